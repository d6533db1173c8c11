"""Which runs a picture is about: one run by name or GLOB, and the error for an empty selection.

Contract: `one_run(store, run)` is the `(run_id, run_name)` of the run named `run`, or of
the one run the GLOB `run` matches; none or several is a `QueryError` that says so (naming
up to five). `no_data_error(store, runs, what)` is the error for a chart, report or export
that found nothing: no run matches `--runs`, the store has no runs yet, or the matching runs
lack `what`. The charts, the report and the trace export share both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import QueryError
from ..query.statements import named

if TYPE_CHECKING:
    from ..query.reader import Reader


def no_data_error(store: "Reader", runs: str | None, what: str) -> QueryError:
    """The error for an empty result: no run matched, or the matching runs lack `what`."""
    n = store.arrow(named("runs.matching"), {"runs": runs}).column("n")[0].as_py()
    if runs is not None and n == 0:
        return QueryError(f"no run matches --runs {runs!r} (`runstore runs` lists them; `*` "
                          "matches `/` too)")
    if n == 0:
        return QueryError("the store has no runs yet — run `runstore ingest PATH` first")
    scope = f"the {n} runs matching {runs!r}" if runs is not None else f"the store's {n} runs"
    return QueryError(f"none of {scope} {what}")


def one_run(store: "Reader", run: str) -> tuple[str, str]:
    """`(run_id, run_name)` of the run named `run`, or of the one run a GLOB `run` matches."""
    rows = store.arrow(named("runs.named"), {"run": run}).to_pylist()
    if not rows:
        rows = store.arrow(named("runs.globbed"), {"run": run}).to_pylist()
    if len(rows) == 1:
        return rows[0]["run_id"], rows[0]["run_name"]
    if not rows:
        raise QueryError(f"no run is named or matches {run!r} (`runstore runs` lists run names)")
    names = ", ".join(r["run_name"] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
    raise QueryError(f"{run!r} matches {len(rows)} runs ({names}); give one run_name or a "
                     "narrower GLOB")
