"""`Doctor`: the `Store` methods that say what went wrong in each run — `doctor`, `diagnosis`.

Contract: `diagnosis(runs=None, *, only=None, config=True)` is one call into
`runstore.health.doctor.diagnose` and returns its whole `Diagnosis`: the findings that fire,
worst first (`rows`, `frame()`, `table()`, `arrow()`), the runs each finding could not judge,
the findings evaluated (each with the metrics its chart draws), the one-line summary and the
explanation `runstore doctor --explain` prints. `doctor(...)` is its rows as a polars
DataFrame (`health.doctor.ROW_COLUMNS`). polars is imported only by `doctor`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Sequence

from .base import StoreBase

if TYPE_CHECKING:
    import polars as pl

    from ..health.doctor import Diagnosis


class Doctor(StoreBase):
    """The doctor's findings."""

    def doctor(self, runs: "str | Sequence[str] | None" = None, *,
               only: Iterable[str] | None = None,
               config: "bool | str | os.PathLike[str]" = True) -> "pl.DataFrame":
        """What went wrong in each run: one row per (run, finding) that fires, worst first.

        Columns: `run_id, run_name, finding` (a name of the catalogue, docs/doctor.md),
        `severity` (`error`, `warning`, `info`), `first_step, last_step`, `evidence` (a
        sentence with the numbers), `to_try` (the next thing to try), `statement` (SQL that
        shows the evidence, for `store.sql`) and `facts` (the evidence's numbers as JSON).
        `runs`: run names, run_ids or GLOBs over run names (`*` matches `/` too); None: every
        run. `only`: finding names to evaluate (default: every finding runstore.toml leaves
        on). `config=True` reads the `[doctor.NAME]` thresholds of the runstore.toml beside
        the store or in the working directory (`False`: none; a path: that file).
        `diagnosis` also says which runs each finding could not judge.

        Example:
            >>> df = store.doctor()
            >>> df.select("run_name", "finding", "severity", "first_step", "last_step").rows()[0]
            ('gsm8k_tool_rl/sweep/lr_1e-3/seed_0', 'kl_spike', 'error', 22, 29)
            >>> store.doctor("math_rl_sweep/*").height
            0
        """
        return self.diagnosis(runs, only=only, config=config).frame()

    def diagnosis(self, runs: "str | Sequence[str] | None" = None, *,
                  only: Iterable[str] | None = None,
                  config: "bool | str | os.PathLike[str]" = True) -> "Diagnosis":
        """`runstore doctor`'s whole answer (options as in `doctor`): `rows` (dicts, worst
        first), `not_evaluated` (finding, run, why), `findings` (the catalogue's findings
        evaluated), `errors` (how many rows are errors), `summary()`, `explain()`, and the
        rows as `frame()`, `table()` (plain rows) or `arrow()`.

        Example:
            >>> found = store.diagnosis("gsm8k_tool_rl/*")
            >>> found.errors, found.rows[0]["finding"]
            (1, 'kl_spike')
        """
        from ..health.doctor import diagnose

        with self.one_snapshot() as snap:  # its statements' answers agree
            return diagnose(snap, runs, only=only, config=config)
