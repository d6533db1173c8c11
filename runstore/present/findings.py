"""The doctor's findings as text for people: one short block per finding, worst first.

Contract: `render_findings(rows, width)` takes the doctor's rows (dicts with `severity`,
`run_name`, `finding`, `first_step`, `last_step`, `evidence`, `to_try`, `statement`, in the
order to print) and returns one block per row: a head line (the severity in capitals, the run,
the finding, its steps), then the evidence, `try:` the next thing to try and `show:` a
`runstore sql` command line that prints the evidence, each wrapped to `width` columns with
nothing cut. The command line is never broken inside a quoted SQL string or name, so that
the lines pasted run as printed. The SQL is quoted for a POSIX shell (double quotes when it
holds none of `"$\\``, as the doctor's statements do, else `shlex.quote`). No rows: an
empty string.
`finding_text(row)` is one finding as one line (`runstore ingest --watch --doctor`). Control
characters (a run named with a newline or a terminal escape) are shown, not obeyed
(`printable`), so a finding's line stays one line.
"""

from __future__ import annotations

import shlex
import textwrap
from typing import Any, Sequence

from ..printable import printable

INDENT = "  "
# Stands for a space inside a quoted SQL string or name while a line is wrapped: a command
# line broken there would run with a newline in a run's name. Not whitespace, and a character
# no finding's text holds (private use; `printable` leaves it).
_KEPT_SPACE = "\ue000"


def shell_quoted(sql: str) -> str:
    """`sql` as one word of a POSIX shell command line."""
    if not any(c in sql for c in '"$`\\!'):
        return f'"{sql}"'
    return shlex.quote(sql)


def _spaces_kept(sql: str) -> str:
    """`sql` with each space inside a string or a quoted name as `_KEPT_SPACE`: the tokens
    of sqlglot's DuckDB tokenizer (sqlglot wrote the statement)."""
    from sqlglot.dialects.duckdb import DuckDB
    from sqlglot.tokens import TokenType

    out = list(sql)
    for token in DuckDB.Tokenizer().tokenize(sql):
        if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            for i in range(token.start, token.end + 1):
                if out[i] == " ":
                    out[i] = _KEPT_SPACE
    return "".join(out)


def _steps(first: Any, last: Any) -> str:
    if first is None:
        return ""
    return f"step {first}" if first == last else f"steps {first}-{last}"


def finding_text(row: dict[str, Any]) -> str:
    """One line for a finding: `FINDING run: finding (severity) steps A-B: evidence` (what
    `runstore ingest --watch --doctor` prints as each finding appears)."""
    steps = _steps(row["first_step"], row["last_step"])
    return printable(f"FINDING {row['run_name']}: {row['finding']} ({row['severity']})"
                     f"{' ' + steps if steps else ''}: {row['evidence']}")


def render_findings(rows: Sequence[dict[str, Any]], width: int = 100) -> str:
    """One block per finding (see the module)."""
    out = []
    label = max((len(str(r["severity"])) for r in rows), default=0)
    for r in rows:
        head = "  ".join(p for p in (str(r["severity"]).upper().ljust(label), r["run_name"],
                                     r["finding"], _steps(r["first_step"], r["last_step"])) if p)
        out.append(printable(head))
        show = f"runstore sql {shell_quoted(_spaces_kept(r['statement']))}"
        for prefix, text in (("", r["evidence"]), ("try: ", r["to_try"]), ("show: ", show)):
            if not text:
                continue
            out += [line.replace(_KEPT_SPACE, " ") for line in textwrap.wrap(
                printable(prefix + text), width=max(width, 40), initial_indent=INDENT,
                subsequent_indent=INDENT + " " * len(prefix), break_long_words=False,
                break_on_hyphens=False)]
        out.append("")
    return "\n".join(out)
