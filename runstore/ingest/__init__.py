"""Ingest: source files in, rows staged and published, one pipeline stage per module.

discover → changes (the ledger diff) → parse → normalize (one normalizer per artifact,
behind `normalize.registry`) → process (one file) → job (stage, publish) → run (the
orchestration: read-ahead threads, batches, Ctrl-C, the report). `ingest`, `IngestReport`
and `Progress` are importable from here; they load on first use, so that importing a
submodule (`ingest.discover`, say) pays for nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import IngestReport, Progress
    from .run import ingest

__all__ = ["IngestReport", "Progress", "ingest"]


def __getattr__(name: str) -> Any:
    if name == "ingest":
        from .run import ingest

        return ingest
    if name in ("IngestReport", "Progress"):
        from . import report

        return getattr(report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
