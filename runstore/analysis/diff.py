"""What differs between runs' configs (and code): `runstore diff RUN RUN...`.

Contract: `diff(store, runs, all=False)` resolves each RUN (a run_id or a unique prefix of
one, a run name, the run's directory, or a GLOB or prefix that names exactly one run:
analysis.runs.resolve) and returns one row per flattened config key (the `config` table's
dotted paths, e.g. `dataset_builder.group_size`), ordered by key, with a `key` column and
one column per run, named by its `run_label` (its run_name, with a run_id prefix when two
runs share the name), in the order given:

* a cell is the value's JSON text, exactly the `config.value` column (strings in quotes, so
  the string "null" and a JSON null differ); a key that a run's config lacks is an empty cell
  (null) — missing, never a null value; one run alone is a `UsageError` unless `all`;
* only the keys whose values differ are kept (missing in some runs counts as differing),
  unless `all=True`, which keeps every key and adds a `differs` column. Two numbers are equal
  when their exact values are (`1` and `1.0`, `1e-4` and `0.0001`; not 2**60 and 2**60 + 1,
  which one double holds), anything else when the JSON texts are: `groups.comparable`, the
  rule `compare --group-by` groups by too;
* a last row, `code.diff`, summarises each run's code.diff (`runs.code_diff`, as ingested:
  up to 8 MB): `A: 12 lines, 3456 bytes`, the letter naming the distinct contents in order
  of appearance (runs with the same letter have identical diffs), an empty cell when the run
  has none. It follows the same rule (kept when the summaries differ, or with `all`).

`code_diffs(store, runs)` is `--code`: a unified diff (difflib) of each run's code.diff
against the first run's, with `--- a/<run>/code.diff` / `+++ b/<run>/code.diff` headers, or a
line saying they are identical. A run given twice (two patterns naming one run) is a
`UsageError`. The statements are `sql/statements/diff.sql`'s.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Sequence

from ..errors import UsageError
from ..query.statements import named
from .groups import comparable
from .runs import resolve

if TYPE_CHECKING:
    import polars as pl

    from ..query.reader import Reader
    from ..query.rows import Rows

CODE_KEY = "code.diff"


def _runs(store: "Reader", runs: Sequence[str]) -> list[tuple[str, str]]:
    found = [(r.run_id, r.label) for r in resolve(store, runs)]
    seen: dict[str, str] = {}
    for pattern, (run_id, name) in zip([runs] if isinstance(runs, str) else runs, found):
        if run_id in seen:
            raise UsageError(f"{seen[run_id]!r} and {pattern!r} both name run {name}; give "
                             "each run once")
        seen[run_id] = pattern
    if {name for _, name in found} & {"key", "differs"}:
        raise UsageError("a run named 'key' or 'differs' would collide with a column of "
                         "the diff; diff it with other runs by a longer name")
    return found


def _same(cells: list[tuple[str, float | None] | None]) -> bool:
    """Whether every run has the key with one value (`comparable`: numbers by exact value)."""
    first = cells[0]
    if first is None or any(c is None for c in cells):
        return all(c is None for c in cells)
    return len({comparable(*c) for c in cells}) == 1  # type: ignore[misc]


def diff(store: "Reader", runs: Sequence[str], *, all: bool = False  # noqa: A002
         ) -> "pl.DataFrame":
    """One row per config key that differs between `runs` (every key with `all=True`), one
    column per run; see the module docstring.

    Example:
        >>> df = diff(store, ["gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3"])
        >>> df.columns
        ['key', 'gsm8k_tool_rl/sweep/lr_1e-4/seed_0', 'gsm8k_tool_rl/sweep/lr_1e-3/seed_0']
        >>> df.filter(df["key"] == "learning_rate").row(0)[1:]
        ('0.0001', '0.001')
    """
    import polars as pl

    rows = diff_rows(store, runs, all=all)
    schema = {c: pl.Boolean if c == "differs" else pl.Utf8 for c in rows.column_names}
    return pl.DataFrame(rows.data, schema=schema, orient="row")


def diff_rows(store: "Reader", runs: Sequence[str], *, all: bool = False  # noqa: A002
              ) -> "Rows":
    """`diff`'s rows as plain Python rows (`query.rows.Rows`): what `runstore diff` prints,
    without polars or pyarrow (the one definition of the answer; `diff` types it)."""
    from ..query.rows import Rows, records

    found = _runs(store, runs)
    if len(found) < 2 and not all:
        raise UsageError("a diff compares two or more runs (with all=True / --all, one run "
                         "shows its whole config)")
    ids = [run_id for run_id, _ in found]
    names = [name for _, name in found]
    cells: dict[str, list[tuple[str, float | None] | None]] = {}
    position = {run_id: i for i, run_id in enumerate(ids)}
    codes: dict[str, str | None] = {}
    for r in records(store, named("diff.config_and_code"), {"ids": ids}):
        if r["key"] is None:
            codes[r["run_id"]] = r["code_diff"]
            continue
        row = cells.setdefault(r["key"], [None] * len(ids))
        row[position[r["run_id"]]] = (r["value"], r["value_num"])
    table: list[tuple[str, list[str | None], bool]] = []
    for key in sorted(cells):
        row = cells[key]
        table.append((key, [c[0] if c is not None else None for c in row], not _same(row)))
    summaries = _code_summaries([codes.get(i) for i in ids])
    table.append((CODE_KEY, summaries, len({s for s in summaries}) > 1))
    kept = [t for t in table if all or t[2]]
    columns = ["key", *names, *(["differs"] if all else [])]
    data = [(key, *values, *([differs] if all else [])) for key, values, differs in kept]
    return Rows(columns, [False] * len(columns), data)


def _code_texts(store: "Reader", ids: list[str]) -> list[str | None]:
    from ..query.rows import records

    texts = {r["run_id"]: r["code_diff"]
             for r in records(store, named("diff.code"), {"ids": ids})}
    return [texts.get(i) for i in ids]


def _code_summaries(texts: list[str | None]) -> list[str | None]:
    """`A: 12 lines, 3456 bytes` per run (None without a code.diff); equal texts, one letter."""
    letters: dict[str, str] = {}
    out: list[str | None] = []
    for text in texts:
        if text is None:
            out.append(None)
            continue
        if text not in letters:
            letters[text] = _letter(len(letters))
        lines = len(text.splitlines())
        size = len(text.encode("utf-8"))
        out.append(f"{letters[text]}: {lines} line{'s' if lines != 1 else ''}, "
                   f"{size} byte{'s' if size != 1 else ''}")
    return out


def _letter(i: int) -> str:
    """A, B, ..., Z, AA, AB, ... for the i-th distinct code.diff."""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def code_diffs(store: "Reader", runs: Sequence[str]) -> str:
    """Unified diffs of each run's code.diff against the first run's (see the module).

    Example:
        >>> code_diffs(store, ["sl/tulu3_qwen3-8b_lr2e-4", "dpo/*"])
        "# dpo/hh_llama-3.1-8b_beta0.1/code.diff: identical to sl/tulu3_qwen3-8b_lr2e-4's\\n"
    """
    found = _runs(store, runs)
    if len(found) < 2:
        raise UsageError("--code compares code.diff between two or more runs")
    texts = _code_texts(store, [run_id for run_id, _ in found])
    base_name, base = found[0][1], texts[0]
    parts = []
    for (_, name), text in zip(found[1:], texts[1:]):
        if text == base:
            state = "identical" if text is not None else "both have none"
            parts.append(f"# {name}/code.diff: {state} to {base_name}'s\n")
            continue
        a = f"a/{base_name}/code.diff" + (" (none)" if base is None else "")
        b = f"b/{name}/code.diff" + (" (none)" if text is None else "")
        lines = difflib.unified_diff((base or "").splitlines(keepends=True),
                                     (text or "").splitlines(keepends=True), a, b)
        parts.append("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    return "".join(parts)

