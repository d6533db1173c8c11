"""The kinds of run: the one list every layer names them by.

Contract: `RUN_KINDS` is every value of `runs.kind` (what the ingest's `infer_kind` gives a
run, from its config.json), in the order help texts list them: `rl`, `sl`, `dpo`, and
`unknown` for a config that says none. `runstore runs --kind`, `Store.runs(kind=)` and the
MCP `list_runs` tool accept these and nothing else (another text would match no run).
"""

from __future__ import annotations

RUN_KINDS = ("rl", "sl", "dpo", "unknown")
