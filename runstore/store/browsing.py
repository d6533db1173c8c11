"""`Browsing`: the `Store` methods that read one run in detail, and bounded pages of the rest.

Contract: what an agent (runstore/agents/, `runstore mcp`) or a notebook asks when it
debugs a run, each method one call: a named statement of `sql/statements/browse.sql` through
`StoreBase.fetch` (the read-only guard, DuckDB's sandbox), the ledger (`run_files`),
`present.history` (`history`) or the catalog of tables (`schema`); what another part of
`Store` answers (`check_result` in `checks`, `groups` in `questions`) is not defined again
here (a second definition of a name would silently shadow or be shadowed by the first). A
RUN argument names exactly one run (`analysis.runs`, the one RUN resolution: run_id or a
unique prefix, name, directory or GLOB); `runs=` is a scope (None: every run). Results are
polars DataFrames; methods that page (`trajectories`, `search`) take `limit`/`offset` and
carry `n_total`, the count before the page was cut. Nothing here writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..errors import UsageError
from ..numbers import INT64_MAX, INT64_MIN, is_int64
from ..query.statements import named
from .base import StoreBase

if TYPE_CHECKING:
    import polars as pl

MAX_PAGE = 10_000  # most rows one page of `trajectories` or `search` holds


def _page(limit: Any, offset: Any) -> dict[str, int]:
    """`$limit`/`$offset` checked: whole numbers, 1..MAX_PAGE rows from 0 or later."""
    for name, value, low, high in (("limit", limit, 1, MAX_PAGE), ("offset", offset, 0, None)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low \
                or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
            raise UsageError(f"{name} is a whole number {bound}, got {value!r}")
    return {"limit": limit, "offset": offset}


class Browsing(StoreBase):
    """One run's files, config, checkpoints, rollouts, transcripts and spans; a metric's
    downsampled history; a check's whole result."""

    def _run_id(self, run: str) -> str:
        from ..analysis.runs import resolve_one

        return resolve_one(self, run).run_id

    def _statement(self, name: str, params: dict[str, Any]) -> "pl.DataFrame":
        return self._frame(named(f"browse.{name}"), params)

    def run_files(self, run: str) -> "pl.DataFrame":
        """The source files of `run` as the last ingest read them: `rel_path, kind, bytes,
        lines, modified` (lines: complete lines consumed, for line files), by path.

        Example:
            >>> import polars as pl
            >>> store.run_files("sl/*").filter(pl.col("kind") == "metrics").rows()
            [('metrics.jsonl', 'metrics', 45390, 60, ...)]
        """
        import polars as pl

        from ..storage import ledger as ledger_mod

        run_id = self._run_id(run)
        entries = [e for e in ledger_mod.read(self.path, self.manifest()).entries.values()
                   if e.run_id == run_id and e.kind != ledger_mod.RUN_KIND]
        entries.sort(key=lambda e: e.rel_path)
        return pl.DataFrame(
            {"rel_path": [e.rel_path for e in entries], "kind": [e.kind for e in entries],
             "bytes": [e.size for e in entries], "lines": [e.lines for e in entries],
             "modified": [e.mtime_ns for e in entries]},
            schema={"rel_path": pl.String, "kind": pl.String, "bytes": pl.Int64,
                    "lines": pl.Int64, "modified": pl.Int64},
        ).with_columns(pl.from_epoch("modified", time_unit="ns").dt.replace_time_zone("UTC"))

    def run_config(self, run: str) -> "pl.DataFrame":
        """The flattened config of `run`: `key` (dotted path), `value` (JSON text), by key.

        Example:
            >>> dict(store.run_config("sl/*").rows())["learning_rate"]
            '0.0002'
        """
        return self._statement("run_config", {"run": self._run_id(run)})

    def run_checkpoints(self, run: str) -> "pl.DataFrame":
        """The checkpoint records of `run`, newest first: `name, batch, epoch, final,
        rolling, state_path, sampler_path, seq`.

        Example:
            >>> store.run_checkpoints("sl/*")["name"].to_list()[:2]
            ['final', '000050']
        """
        return self._statement("run_checkpoints", {"run": self._run_id(run)})

    def rollout_index(self, run: str) -> "pl.DataFrame":
        """What was logged of `run`'s rollouts, per `split` and `iteration`:
        `n_trajectories`, `mean_reward`, `min_reward`, `max_reward` (NaN left out),
        `n_conversations` (logtree conversations).

        Example:
            >>> store.rollout_index("gsm8k_tool_rl/sweep/lr_1e-3/seed_0").row(0)
            ('eval/aime2025', 0, 8, 0.125, 0.0, 1.0, 0)
        """
        return self._statement("rollout_index", {"run": self._run_id(run)})

    def trajectories(self, run: str, *, iteration: int, split: str = "train",
                     highest: bool = False, limit: int | None = 100,
                     offset: int = 0) -> "pl.DataFrame":
        """One page of `run`'s trajectories at `split`, `iteration` (`limit=None`: every one
        from `offset`), lowest `total_reward`
        first (`highest=True`: highest first; NaN rewards last either way): `group_idx,
        traj_idx, total_reward, final_reward, n_steps, final_ob_len, tags,
        sampling_client_step, metrics, n_conversations, conversations_of` (`trajectory`: the
        logtree ties conversations to it, `group`: only to its group) and `n_total`.

        Example:
            >>> t = store.trajectories("math_rl_sweep/qwen3-8b/lr_1e-5", iteration=0,
            ...                        split="eval/test", highest=True, limit=3)
            >>> t["total_reward"].to_list(), t["n_total"][0]
            ([1.0, 0.0, 0.0], 8)
        """
        page = _page(1 if limit is None else limit, offset)
        params = {"run": self._run_id(run), "split": split, "iteration": _whole(iteration),
                  "highest": bool(highest), **page, "limit": limit}
        return self._statement("trajectories", params)

    def messages(self, run: str, *, iteration: int, groups: Sequence[int],
                 split: str = "train", chars: int = 2000) -> "pl.DataFrame":
        """The messages of `run`'s logtree conversations at `split`, `iteration` in the groups
        `groups`: `conversation_id, section, group_idx, traj_idx, message_idx, role, name,
        content` (its first `chars` characters), `content_chars` (its whole length),
        `tool_calls`, by group, conversation and position.

        Example:
            >>> m = store.messages("math_rl_sweep/qwen3-8b/lr_1e-5", iteration=20, groups=[0],
            ...                    chars=20)
            >>> m["role"].to_list()[:2], m["content"].str.len_chars().max() <= 20
            (['system', 'user'], True)
        """
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 0:
            raise UsageError(f"chars is a whole number of characters of at least 0, got {chars!r}")
        params = {"run": self._run_id(run), "split": split, "iteration": _whole(iteration),
                  "groups": [_whole(g) for g in _listed(groups, "groups")], "chars": chars}
        return self._statement("messages", params)

    def search(self, text: str, *, runs: "str | Sequence[str] | None" = None,
               role: str | None = None, context: int = 80, limit: int = 100,
               offset: int = 0) -> "pl.DataFrame":
        """One page of the messages (the `transcripts` view) whose text contains `text`, in
        any case, across every run (or the runs in scope), of `role` when given: `run_id,
        run_label, split, iteration, group_idx, traj_idx, conversation_id, message_idx, role,
        total_reward, snippet` (`context` characters either side of the first match) and
        `n_total`.

        Example:
            >>> found = store.search("Final answer", role="assistant", limit=2)
            >>> found.height, found["n_total"][0] > 2, "final answer" in found["snippet"][0].lower()
            (2, True, True)
        """
        if not isinstance(text, str) or not text:
            raise UsageError(f"give some text to search for, got {text!r}")
        if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= 10_000:
            raise UsageError(f"context is a number of characters from 0 to 10000, got {context!r}")
        params = {"text": text, "role": role or "", "context": context,
                  "runs": self.scope(runs), **_page(limit, offset)}
        return self._statement("search", params)

    def run_step_times(self, run: str) -> "pl.DataFrame":
        """`run`'s steps with timing spans: `step, wall_s` (the latest end of its spans),
        `n_spans`, `longest_span`, `longest_s` (its longest top-level span).

        Example:
            >>> store.run_step_times("sl/*").columns
            ['step', 'wall_s', 'n_spans', 'longest_span', 'longest_s']
        """
        return self._statement("step_times", {"run": self._run_id(run)})

    def step_spans(self, run: str, *, step: int) -> "pl.DataFrame":
        """The timing spans of `run`'s step `step` in start order: `name, depth, parent,
        start_s, end_s, duration_s` (seconds from the step's first span), `span_idx` (its
        position in the step's timing record).

        Example:
            >>> store.step_spans("sl/*", step=3)["depth"].min()
            0
        """
        return self._statement("step_spans", {"run": self._run_id(run), "step": _whole(step)})

    def run_slowest_spans(self, run: str) -> "pl.DataFrame":
        """`run`'s rows of the `slowest_spans` view (where its step time goes), by rank.

        Example:
            >>> store.run_slowest_spans("sl/*")["rank"].to_list()[:3]
            [1, 2, 3]
        """
        return self._statement("slowest_spans", {"run": self._run_id(run)})

    def history(self, keys: str | Sequence[str], *, runs: "str | Sequence[str] | None" = None,
                x: str = "step", smooth: float | None = None, max_points: int = 200,
                x_min: float | None = None, x_max: float | None = None) -> "pl.DataFrame":
        """The live values of metric `keys` per run in scope (a scope, as `runs=` everywhere),
        on `x` (`step`, or `time`: `time_s`), optionally smoothed (`smooth=W`: `smoothed`,
        the debiased EMA) and within `x_min`..`x_max`, each (run, key) line reduced to at
        most `max_points` points with its buckets' minimum and maximum kept (a spike
        survives): `run_id, run_label, key, step, [time_s,] value, [smoothed,] n_points` (the
        line's points before downsampling). See `present.history`.

        Example:
            >>> h = store.history("optim/kl_sample_train_v1", runs="gsm8k_tool_rl/sweep/lr_1e-3/*",
            ...                   max_points=10)
            >>> h.height, h["n_points"][0], h["value"].max() == store.sql(
            ...     "select max(max_kl_v1) from kl_health where run_name like '%lr_1e-3%'").item()
            (10, 30, True)
        """
        from ..present.history import history

        return history(self, keys, runs=runs, x=x, smooth=smooth, max_points=max_points,
                       x_min=x_min, x_max=x_max)

    def schema(self, table: str | None = None) -> "pl.DataFrame":
        """The public tables' columns (`runstore schema`): `table, column, type, comment`,
        of every table or of `table` (a view's name is a `QueryError` that says so).

        Example:
            >>> store.schema("metrics_raw")["column"].to_list()[:3]
            ['run_id', 'step', 'key']
        """
        import polars as pl

        from ..query.catalog import schema_table

        frame = pl.from_arrow(schema_table(table))
        assert isinstance(frame, pl.DataFrame)
        return frame


def _listed(values: Any, name: str) -> list[Any]:
    """`values` as a list, when it is a list, tuple or other iterable that is not text."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise UsageError(f"{name} is a list of whole numbers, got {values!r}")
    return list(values)


def _whole(value: Any) -> int:
    if not is_int64(value):  # as the int64 columns it is compared with hold
        raise UsageError(f"give a whole number from {INT64_MIN} to {INT64_MAX} (an iteration, "
                         f"step or group, as an int64 column holds it), got {value!r}")
    return value
