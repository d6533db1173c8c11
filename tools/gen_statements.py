"""Generated statements (a build tool, not in the wheel): `sql/statements/check_shapes.sql`,
the text of `runstore check`'s statement for every shape of rule set.

Contract: the file is a pure function of `sql/statements/check.sql` and
`runstore.query.statements.check.build_statement` (sqlglot), one `-- name: SHAPE` statement per
entry of `check.SHAPES`, so the committed file can be checked by regenerating it
(tests/health/test_checks.py does). Regenerate after changing check.sql or build_statement:

    python tools/gen_statements.py -o sql/statements/check_shapes.sql
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
if str(TOOLS.parent) not in sys.path:  # run from a checkout: its runstore, not an installed one
    sys.path.insert(0, str(TOOLS.parent))

from runstore.query.statements import check  # noqa: E402


def check_shapes() -> str:
    """sql/statements/check_shapes.sql: every shape's statement under its name."""
    out = ["-- runstore check's statement for each shape of rule set, generated from check.sql by",
           "-- `python tools/gen_statements.py -o sql/statements/check_shapes.sql`; do not edit.",
           "-- A shape's name says which parts it has: m (a series of `metrics`), k (a KL",
           "-- series), s ($since_step), r ($runs), o (KL values read for the runs with a KL",
           "-- write over the threshold only); see runstore/query/statements/check.py.",
           ""]
    for shape in check.SHAPES:
        out += [f"-- name: {check.shape_name(*shape)}", check.build_statement(*shape), ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    args.output.write_text(check_shapes())


if __name__ == "__main__":
    main()
