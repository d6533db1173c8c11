"""Tools about run health: `check` and `doctor`.

Contract: `check` is `runstore check` (`Store.check_result`: the same rules, runstore.toml
included, the same rows and one-line summary) and states the exit status the command would
have: 0 when no rule fired, 1 when one did, 2 for an error (an unknown metric, a bad rule).
Its rows carry `run_id` before the CLI's columns.

`doctor` is `runstore doctor` (`Store.diagnosis`: the same catalogue, runstore.toml's
thresholds, the same rows worst first and the same one-line summary) with `run_id` before
the CLI's columns (each `statement`, `evidence` and `to_try` whole, in markdown too, as
the CLI writes them: the sql tool runs the statement), and states
the exit status the command would have: 0 when no finding is an error, 1 when one is, 2 for
an error. `explain` adds what `--explain` prints (each finding's
thresholds, the runs it could not judge and why, its SQL). `findings_of` is the findings of
one run that `describe_run` shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

from pydantic import Field

from ...errors import RunstoreError
from ..answer import Page
from ..args import MaxChars, Offset, Runs, Since, TextFormat, limit
from .base import Toolbox, tool
from .common import page

if TYPE_CHECKING:
    import polars as pl

    from ...store import Store

CheckLimit = limit(100, 2000, "fired (run, rule) rows")
FINDING_SHOWN = ("finding", "severity", "first_step", "last_step", "evidence", "to_try")
FindingLimit = limit(100, 2000, "findings")

Rules = Annotated[Optional[list[str]], Field(
    description="Rules to check besides the default KL rule: METRIC OP NUMBER (OP: > >= < <=), "
                "or trend rules drop(METRIC) > X, rise(METRIC) > X, stale > MINUTES "
                "(docs/checks.md).",
    examples=[["optim/entropy < 0.05", "drop(env/all/reward/total) > 0.2"]])]


class HealthTools(Toolbox):
    """check."""

    @tool("Check health rules")
    def check(self, threshold: Annotated[Optional[float], Field(
                  description="Threshold of the default KL rule (default: runstore.toml's "
                              "[check] threshold, else the store's kl_threshold setting, "
                              "else 0.01).", examples=[0.02])] = None,
              rules: Rules = None, runs: Runs = None, since_step: Since = None,
              default_rules: Annotated[Optional[bool], Field(
                  description="Include the default KL rule (default: yes, unless "
                              "runstore.toml says default_rules = false).")] = None,
              limit: CheckLimit = 100, offset: Offset = 0, format: TextFormat = "markdown",
              max_chars: MaxChars = None) -> str:
        """Which runs went unstable: the health rules of `runstore check` (by default KL,
        optim/kl_sample_train_v1 or v2, above 0.01 at some step; NaN never fires), one row
        per (run, rule) that fires, with first and last step over, streak, peak and latest
        value. Says the exit status `runstore check` would have (1: a rule fired)."""
        import pyarrow as pa

        result = self.store.check_result(threshold=threshold, rules=rules,
                                         runs=runs,  # type: ignore[arg-type]
                                         since_step=since_step, default_rules=default_rules)
        rows = result.table
        table = rows.add_column(0, "run_id", pa.array(list(result.run_ids), pa.string()))
        fired = table.num_rows
        out = self.answer(max_chars)
        if fired:
            out.line(f"FIRED: {fired} (run, rule) row{'s' if fired != 1 else ''}; "
                     "`runstore check` would exit 1.")
        else:
            out.line("OK: no rule fired; `runstore check` would exit 0.")
        out.line(result.summary())
        if fired:
            shown = table.slice(offset, limit)
            out.table(shown, Page(offset, limit, fired), fmt=format, what="fired rows")
        return out.render()

    def error_text(self, tool: str, error: RunstoreError) -> str:
        return f"Error: {error} (`runstore check` would exit 2)"


def findings_of(store: "Store", run_id: str) -> "pl.DataFrame":
    """The doctor's findings for one run: what `describe_run` shows of them."""
    return store.doctor(run_id).select(*FINDING_SHOWN)


class DoctorTools(Toolbox):
    """doctor."""

    @tool("Diagnose runs")
    def doctor(self, runs: Runs = None, finding: Annotated[Optional[list[str]], Field(
                   description="Only these findings of the catalogue (docs/doctor.md); omit "
                               "for every finding runstore.toml leaves on.",
                   examples=[["kl_spike", "reward_collapse"]])] = None,
               explain: Annotated[bool, Field(
                   description="Also each finding's thresholds, the runs it could not judge "
                               "and why, and its SQL (`runstore doctor --explain`).")] = False,
               limit: FindingLimit = 100, offset: Offset = 0, format: TextFormat = "markdown",
               max_chars: MaxChars = None) -> str:
        """What went wrong in each run (`runstore doctor`): findings such as kl_spike,
        reward_collapse, entropy_collapse, crashed, slow_steps, worst first, each with its
        evidence in numbers, what to try next and a SQL statement (for the sql tool) that
        shows the evidence. Says the exit status `runstore doctor` would have (1: an error
        finding)."""
        found = self.store.diagnosis(runs, only=finding)  # type: ignore[arg-type]
        rows = found.arrow(("run_id", *found.shown_columns))
        out = self.answer(max_chars)
        if found.errors:
            out.line(f"ERRORS: {found.errors} finding{'s' if found.errors != 1 else ''} of "
                     "severity error; `runstore doctor` would exit 1.")
        else:
            out.line("No error finding; `runstore doctor` would exit 0.")
        out.line(found.summary())
        if rows.num_rows:
            out.table(rows.slice(offset, limit), Page(offset, limit, rows.num_rows),
                      fmt=format, what="findings", whole=found.whole_columns)
        if explain:
            out.text(found.explain(), more="ask for fewer findings with finding=[...]")
        return out.render()

    def error_text(self, tool: str, error: RunstoreError) -> str:
        return f"Error: {error} (`runstore doctor` would exit 2)"
