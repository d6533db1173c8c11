"""`Questions`: the `Store` methods that answer about runs — metrics, runs, checks, comparisons.

Contract: each method is one call into the package that owns the answer (`query.statements`
for `metrics`/`runs`, `query.keys` for `logged_keys`/`require_keys`/`key_notes`, `analysis`
for `keys`, `diff`, `code_diff`, `compare`, `groups`, `step_times`) and returns a polars
DataFrame (a string for `code_diff`, a statement for `runs_query`, a dict or list for the
key questions, nothing for `require_keys`, which raises); polars is imported only when a
method needs it. Health rules are in `checks.py`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..errors import UsageError
from ..query.statements import frames
from .base import StoreBase

if TYPE_CHECKING:
    import polars as pl

    from ..analysis.runs import Run


class Questions(StoreBase):
    """Metrics, runs, keys and comparisons."""

    def metrics(self, keys: str | Sequence[str], *, runs: str | None = None,
                wide: bool = False) -> "pl.DataFrame":
        """Live metrics of `keys` (the `metrics` view), optionally for the runs in scope.

        `runs` is a scope (`runstore.analysis.runs`: a GLOB over `run_name`, `*` matching `/`
        too; a run_name, run_id or unique prefix of one, or run directory; or a list of them).
        Long form (default): one row per run, step and key with `run_id, run_name, run_label,
        step, key, value, value_str`. With `wide=True`: one row per run and step, with
        `run_id, run_name, run_label, step` and one column
        per key named exactly like the key (numeric values; a step that logs only some of
        the keys has nulls in the others). A key that no run in the store has logged raises
        `UnknownKey` naming the closest logged keys; a key that only some runs log is fine
        (those runs have rows, the others none) and says nothing.

        Example:
            >>> df = store.metrics(["env/all/reward/total", "optim/kl_sample_train_v1"],
            ...                    runs="math_rl_sweep/*", wide=True)
            >>> df.columns
            ['run_id', 'run_name', 'run_label', 'step', 'env/all/reward/total', 'optim/kl_sample_train_v1']
            >>> df["run_id"].n_unique(), df.height
            (4, 160)
            >>> store.metrics("env/all/reward/total").columns
            ['run_id', 'run_name', 'run_label', 'step', 'key', 'value', 'value_str']
            >>> store.metrics("env/all/rewrd/total")
            Traceback (most recent call last):
            runstore.errors.UnknownKey: no run in the store logs metric 'env/all/rewrd/total'; did you mean env/all/reward/total? (runstore sql "select distinct key from metrics_raw order by 1" lists every key)
        """
        from ..analysis.runs import scope_ids
        from ..query import keys as keys_mod

        frames.metric_keys(keys)  # a bad key list is an error before the runs are looked up
        statement = frames.metrics_query(keys, runs=scope_ids(self, runs), wide=wide)
        keys_mod.require(self, frames.metric_keys(keys))
        return self._frame(*statement)

    def runs(self, *, kind: str | None = None, name: str | None = None,
             where: str | None = None, columns: Sequence[str] | None = None) -> "pl.DataFrame":
        """`run_summary` as a DataFrame, one row per run, ordered by `run_label`.

        `kind` filters on the run kind (`rl`, `sl`, `dpo`, `unknown`), `name` is a scope
        (`runstore.analysis.runs`: a GLOB over `run_name`, a run_name, run_id or prefix, or
        the run's directory), `where` one SQL condition over run_summary's columns (checked to be a
        plain expression: no statements or subqueries). `columns` picks and orders the
        columns (default: all, `run_id` first; a name the view lacks is a `UsageError`).

        Example:
            >>> store.runs().height
            13
            >>> store.runs(kind="rl", where="best_reward > 0.5")["run_name"].to_list()[:2]
            ['gsm8k_tool_rl/sweep/lr_1e-3/seed_0', 'gsm8k_tool_rl/sweep/lr_1e-4/seed_0']
            >>> store.runs(columns=["run_name", "status"]).columns
            ['run_name', 'status']
        """
        return self._frame(*self.runs_query(kind=kind, name=name, where=where, columns=columns))

    def run_columns(self) -> list[str]:
        """The columns of `run_summary` (what `runs` returns), in order.

        Example:
            >>> store.run_columns()[:3]
            ['run_id', 'run_name', 'run_label']
        """
        return frames.summary_columns()

    def runs_query(self, *, kind: str | None = None, name: str | None = None,
                   where: str | None = None, columns: Sequence[str] | None = None,
                   runs: "str | Sequence[str] | None" = None) -> tuple[str, dict[str, Any]]:
        """The statement `runs` runs, as `(sql, params)` for `arrow`/`rows`/`sql` (`runstore
        runs` prints it as plain rows; the web UI runs a `where` from a request in a worker):
        `run_summary`'s rows of the runs `name` names (`runs --name`) or of the scope `runs`
        (as `scope` takes it), `where` a condition over its columns (checked to be a plain
        expression), `columns` its columns to return.

        Example:
            >>> store.rows(*store.runs_query(columns=["run_label"],
            ...                              where="kind = 'sl'")).to_pylist()
            [{'run_label': 'sl/tulu3_qwen3-8b_lr2e-4'}]
        """
        from ..analysis.runs import scope_ids

        if name is not None and runs is not None:
            raise UsageError("give the runs by name or by scope, not both")
        ids = scope_ids(self, runs) if runs is not None else scope_ids(self, name, option="--name")
        return frames.runs_query(kind=kind, runs=ids, where=where, columns=columns)

    # -- naming runs (runstore.analysis.runs, the one RUN resolution) ---------------------
    def resolve(self, runs: "str | Sequence[str]") -> "list[Run]":
        """The one run each of `runs` names, in order: `Run(run_id, label, path)`. A RUN is a
        run_id or a unique prefix of one, a run_name or label, the run's directory, or a GLOB
        (or name prefix) that matches one run; see `runstore.analysis.runs` for the precedence.
        None or several is a `QueryError` that lists the candidates and how to pick one.

        Example:
            >>> store.resolve(["sl/*"])[0].label
            'sl/tulu3_qwen3-8b_lr2e-4'
        """
        from ..analysis.runs import resolve

        return resolve(self, [runs] if isinstance(runs, str) else runs)

    def scope(self, runs: "str | Sequence[str] | None") -> list[str] | None:
        """The run_ids a `runs=` scope covers, sorted (None for every run): each pattern may
        match several runs (a GLOB, a name two runs share); one that matches none is a
        `QueryError`.

        Example:
            >>> len(store.scope("math_rl_sweep/*"))
            4
        """
        from ..analysis.runs import scope_ids

        return scope_ids(self, runs)

    # -- which runs log which keys (runstore.query.keys) ------------------------------------
    def logged_keys(self, keys: Sequence[str] | None = None, *,
                    runs: "str | Sequence[str] | None" = None) -> dict[str, frozenset[str]]:
        """Each of `keys` (else every key) that a run in scope logged, with those runs'
        run_ids; a key no run logs is left out.

        Example:
            >>> found = store.logged_keys(["optim/kl_sample_train_v1", "no/such/key"])
            >>> list(found), len(found["optim/kl_sample_train_v1"])
            (['optim/kl_sample_train_v1'], 11)
        """
        from ..analysis.runs import scope_ids
        from ..query.keys import logged_keys

        return logged_keys(self, keys, runs=scope_ids(self, runs))

    def require_keys(self, keys: Sequence[str]) -> None:
        """`UnknownKey` naming the closest logged keys when one of `keys` is logged by no run
        in the store, as `metrics` and `compare` raise it; nothing when each is logged.

        Example:
            >>> store.require_keys(["env/all/reward/total"])
            >>> store.require_keys(["env/all/rewrd/total"])
            Traceback (most recent call last):
            runstore.errors.UnknownKey: no run in the store logs metric 'env/all/rewrd/total'; did you mean env/all/reward/total? (runstore sql "select distinct key from metrics_raw order by 1" lists every key)
        """
        from ..query.keys import require

        require(self, list(keys))

    def key_notes(self, keys: Sequence[str], *,
                  runs: "str | Sequence[str] | None" = None) -> list[str]:
        """A note for each of `keys` that only some runs in scope log (how many do), as
        `runstore plot metric` prints on stderr; none when every run logs every key.

        Example:
            >>> store.key_notes(["optim/kl_sample_train_v2"])
            ['note: optim/kl_sample_train_v2 is logged by 11 of 13 runs']
        """
        from ..analysis.runs import scope_ids
        from ..query.keys import coverage

        return coverage(self, list(dict.fromkeys(keys)), runs=scope_ids(self, runs)).notes()

    # -- comparing runs (runstore.analysis) ------------------------------------------------
    def groups(self, *, runs: "str | Sequence[str] | None" = None,
               group_by: "str | Sequence[str] | None" = None) -> "pl.DataFrame":
        """Which runs make each group of `compare` (the same `runs` and `group_by`): one row
        per run in scope, `run_id, run_name, run_label, group` and the group keys, in the
        groups' order.

        Example:
            >>> g = store.groups(runs="gsm8k_tool_rl/*", group_by="learning_rate")
            >>> g.filter(g["group"] == "learning_rate=0.001")["run_label"].to_list()
            ['gsm8k_tool_rl/sweep/lr_1e-3/seed_0']
        """
        from ..analysis.groups import groups

        return groups(self, runs=runs, group_by=group_by)  # type: ignore[arg-type]

    def step_times(self, step: int, *,
                   runs: "str | Sequence[str] | None" = None) -> "pl.DataFrame":
        """`run_id, run_label, time_s`: where each run in scope logged `step` on `compare`'s
        `x="time"` axis (wall time since its first step, from `time/total`); a run without a
        time at `step` has no row.

        Example:
            >>> store.step_times(3, runs="gsm8k_tool_rl/*").columns
            ['run_id', 'run_label', 'time_s']
        """
        from ..analysis.compare import step_times

        return step_times(self, step, runs=runs)  # type: ignore[arg-type]

    def compare_axes(self) -> dict[str, str]:
        """The `x` axes `compare` takes, each with the column of its frame that holds it.

        Example:
            >>> store.compare_axes()
            {'step': 'step', 'time': 'time_s', 'tokens': 'tokens', 'cost': 'cost_usd'}
        """
        from ..analysis.compare import X_COLUMNS

        return dict(X_COLUMNS)

    def keys(self, *, runs: "str | Sequence[str] | None" = None,
             like: str | None = None) -> "pl.DataFrame":
        """One row per metric key logged by a run in scope: `key, n_runs, n_points` (live
        points: the `metrics` view's rows), `first_step, last_step, type` (`number`, `string`
        or `both`). `runs`: a scope (a GLOB, name, run_id, directory, or a list of them);
        `like`: a substring
        (any case), or an ILIKE pattern when it holds a `%`. See docs/compare.md.

        Example:
            >>> store.keys(like="reward/total", runs="math_rl_sweep/*").rows()
            [('env/all/reward/total', 4, 160, 0, 39, 'number'), ('test/env/all/reward/total', 4, 20, 0, 40, 'number')]
        """
        from ..analysis.keys import keys

        return keys(self, runs=runs, like=like)

    def key_rows(self, *, runs: "str | Sequence[str] | None" = None,
                 like: str | None = None) -> Any:
        """`keys`'s rows as plain Python rows (`query.rows.Rows`, as `rows` gives): what
        `runstore keys` prints, read without polars or pyarrow.

        Example:
            >>> store.key_rows(like="reward/total", runs="math_rl_sweep/*").data
            [('env/all/reward/total', 4, 160, 0, 39, 'number'), ('test/env/all/reward/total', 4, 20, 0, 40, 'number')]
        """
        from ..analysis.keys import key_rows

        return key_rows(self, runs=runs, like=like)

    def diff(self, runs: Sequence[str], all: bool = False) -> "pl.DataFrame":  # noqa: A002
        """Config diff: one row per flattened config key (dotted path), one column per run
        (named by its `run_label`, in the order given), only keys whose values differ unless
        `all=True` (which adds a `differs` column). A cell is the value's JSON text; a key a
        run lacks is null (missing, never a JSON null, which is the text `null`). A last row
        `code.diff` summarises each run's code.diff (`A: 12 lines, 3456 bytes`; same letter,
        same content). Each of `runs` names exactly one run (`runstore.analysis.runs`: a
        run_id or unique prefix, a run_name, the run's directory, or a GLOB or prefix).
        `code_diff(runs)` gives the unified diff.

        Example:
            >>> df = store.diff(["gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3"])
            >>> df.filter(df["key"] == "learning_rate").rows()
            [('learning_rate', '0.0001', '0.001')]
        """
        from ..analysis.diff import diff

        return diff(self, runs, all=all)

    def diff_rows(self, runs: Sequence[str], all: bool = False) -> Any:  # noqa: A002
        """`diff`'s rows as plain Python rows (`query.rows.Rows`, as `rows` gives): what
        `runstore diff` prints, read without polars or pyarrow.

        Example:
            >>> rows = store.diff_rows(["gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3"])
            >>> [r for r in rows.data if r[0] == "learning_rate"]
            [('learning_rate', '0.0001', '0.001')]
        """
        from ..analysis.diff import diff_rows

        return diff_rows(self, runs, all=all)

    def code_diff(self, runs: Sequence[str]) -> str:
        """Unified diff of each run's code.diff against the first's (`runstore diff --code`).

        Example:
            >>> store.code_diff(["sl/tulu3_qwen3-8b_lr2e-4", "dpo/*"])
            "# dpo/hh_llama-3.1-8b_beta0.1/code.diff: identical to sl/tulu3_qwen3-8b_lr2e-4's\\n"
        """
        from ..analysis.diff import code_diffs

        return code_diffs(self, runs)

    def compare(self, metric: str, *, runs: "str | Sequence[str] | None" = None,
                group_by: "str | Sequence[str] | None" = None, smooth: float | None = None,
                x: str = "step", bucket: float | None = None) -> "pl.DataFrame":
        """Grouped curves with bands: per group and x, `n, n_nan, n_inf, mean, std, min,
        max` of `metric`'s live values (and `smooth_n, smooth_mean, smooth_std, smooth_min,
        smooth_max` with `smooth=W`, the debiased EMA per run before grouping).

        `group_by`: config keys (dotted) or run columns (`model_name`, `learning_rate`,
        `kind`), or `"auto"` (runs whose configs differ only in seed-like keys); None: one
        group per run. `x="time"` puts points at wall time since the run's first step
        (`time_s`, from `time/total`); `x="tokens"` / `x="cost"` at what the run had spent by
        the step (`tokens`: cumulative sampled + trained tokens; `cost_usd`), from the
        `tokens/cumulative/*` and `cost/cumulative_usd` keys. Off `step`, runs are aligned on
        a common grid of buckets `bucket` wide (default about one step), each run counted
        with its last point in a bucket. NaN and ±Infinity are counted in `n_nan`/`n_inf`,
        never aggregated. See docs/compare.md.

        Example:
            >>> df = store.compare("env/all/reward/total", runs="gsm8k_tool_rl/*",
            ...                    group_by="learning_rate", smooth=0.9)
            >>> df.filter(df["step"] == 0).select("group", "n").rows()
            [('learning_rate=0.0001', 2), ('learning_rate=0.0003', 2), ('learning_rate=0.001', 1)]
        """
        from ..analysis.compare import compare

        return compare(self, metric, runs=runs, group_by=group_by, smooth=smooth, x=x,  # type: ignore[arg-type]
                       bucket=bucket)

    def compare_rows(self, metric: str, *, runs: "str | Sequence[str] | None" = None,
                     group_by: "str | Sequence[str] | None" = None,
                     smooth: float | None = None, x: str = "step",
                     bucket: float | None = None) -> Any:
        """`compare`'s rows as plain Python rows (`query.rows.Rows`, as `rows` gives): what
        `runstore compare` prints, read without polars or pyarrow when it neither smooths
        nor leaves the step axis.

        Example:
            >>> rows = store.compare_rows("env/all/reward/total", runs="gsm8k_tool_rl/*",
            ...                           group_by="learning_rate")
            >>> [r[:4] for r in rows.data if r[2] == 0]
            [('learning_rate=0.0001', 0.0001, 0, 2), ('learning_rate=0.0003', 0.0003, 0, 2), ('learning_rate=0.001', 0.001, 0, 1)]
        """
        from ..analysis.compare import compare_rows

        return compare_rows(self, metric, runs=runs, group_by=group_by, smooth=smooth,  # type: ignore[arg-type]
                            x=x, bucket=bucket)
