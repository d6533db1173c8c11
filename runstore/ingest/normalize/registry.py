"""The normalizer registry: one tuple, from each file kind to its normalizer and the tables it
writes.

Contract: `NORMALIZERS` lists one `Normalizer` per artifact (the way sqlglot's optimizer
composes its rules from one tuple); every file kind `discover` can classify has exactly one
entry (tests/ingest/test_normalizers.py holds the two together, and that every public table but
`runs` is written by some entry). `for_kind(kind)` is the normalizer of a kind,
`tables_of(kind)` the tables its rows go to (a re-read file's earlier rows are deleted from
exactly these), `kinds_writing(table)` the kinds whose rows a table holds (what `runstore
repair` marks to be read again when a file of the table is lost). Adding an artifact: a
module in this package and one line here.
"""

from __future__ import annotations

from . import (capture, checkpoints, code_diff, config, evals, logs, logtree, metrics, rollouts,
               timing, trace)
from .base import Normalizer

NORMALIZERS: tuple[Normalizer, ...] = (
    config.Config(),
    code_diff.CodeDiff(),
    metrics.Metrics(),
    checkpoints.Checkpoints(),
    timing.Timing(),
    trace.Trace(),
    rollouts.Rollouts(),
    logtree.Logtree(),
    capture.Capture(),
    logs.Logs(),
    evals.EvalRuns(),
    evals.EvalResults(),
    evals.EvalTrajectories(),
)

_BY_KIND: dict[str, Normalizer] = {}
for _n in NORMALIZERS:
    for _kind in _n.kinds:
        assert _kind not in _BY_KIND, f"two normalizers read {_kind}"
        _BY_KIND[_kind] = _n


def for_kind(kind: str) -> Normalizer:
    """The normalizer of files of `kind`."""
    return _BY_KIND[kind]


def tables_of(kind: str) -> tuple[str, ...]:
    """The store tables rows of files of `kind` go to."""
    return _BY_KIND[kind].tables


def kinds_writing(table: str) -> set[str]:
    """The file kinds whose rows `table` holds."""
    return {k for k, n in _BY_KIND.items() if table in n.tables}
