"""Which runs a picture is about, and the error for an empty selection.

Contract: `ids(store, runs)` is the scope `runs` (a `--runs` pattern, see
`runstore.analysis.runs`: a run_name, run_id or prefix, directory or GLOB) as the list of
run_ids the statements bind as `$runs` (None for every run; a pattern that matches no run is a
`QueryError`). `one_run(store, run)` is the `(run_id, run_label)` of the one run `run` names,
by `analysis.runs.resolve` (the one RUN resolution). `no_data_error(store, runs, what)` is
the error for a chart, report or export that found nothing: the store has no runs yet, or the
runs in scope lack `what`. `scope_text(runs)` is how a picture names its scope (a pattern as
it is, a list of them joined by ", "). The charts, the report and the trace export share
all four.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.runs import Scope, resolve_one, scope_ids
from ..errors import QueryError
from ..query.rows import records
from ..query.statements import named

if TYPE_CHECKING:
    from ..query.reader import Reader


def ids(store: "Reader", runs: Scope) -> list[str] | None:
    """The run_ids in scope (None: every run); see `analysis.runs.scope_ids`."""
    return scope_ids(store, runs)  # type: ignore[arg-type]


def no_data_error(store: "Reader", runs: Scope, what: str) -> QueryError:
    """The error for an empty result: no run matched, or the matching runs lack `what`."""
    n = records(store, named("runs.matching"), {"runs": ids(store, runs)})[0]["n"]
    if n == 0:
        return QueryError("the store has no runs yet — run `runstore ingest PATH` first")
    scope = f"the {n} runs matching {scope_text(runs)!r}" if runs is not None \
        else f"the store's {n} runs"
    return QueryError(f"none of {scope} {what}")


def scope_text(runs: Scope) -> str:
    """The scope `runs` as a picture names it: a pattern as it is, several joined by ", "."""
    if runs is None:
        return ""
    return runs if isinstance(runs, str) else ", ".join(map(str, runs))


def one_run(store: "Reader", run: str) -> tuple[str, str]:
    """`(run_id, run_label)` of the one run `run` names (see `analysis.runs`)."""
    found = resolve_one(store, run)  # type: ignore[arg-type]
    return found.run_id, found.label
