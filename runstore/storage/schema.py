"""The store's table schemas and column types, in one place.

Every public table (see docs/schema.md) is declared here: its columns, each with a type name
(`string`, `int64`, `int32`, `float64`, `bool`, `list<string>`, `timestamp[us, tz=UTC]`, the
names migrations use) and a comment. `TYPES` is the one map from a type name to what each
engine calls it: `arrow_type(name)` (pyarrow), `duckdb_type(name)` (what queries and
`runstore schema` show), `spark_type(name)` (Spark DDL), `delta_type(name)` (deltalake's
schema types, for migrations that add columns). `schema(table)` is the pyarrow schema;
`duckdb_columns(table)` the columns with their DuckDB types. Normalizers produce rows whose
keys are these column names; `to_arrow` turns such rows into a table of exactly this schema
(missing keys become null, unknown keys are an error). pyarrow is imported only to build
schemas and tables: a query connection needs the names and DuckDB types alone. One internal
column rides along on every data table but `runs`: `source_id` (which source file produced
the row, so a re-read file can replace its own rows). `_ledger` is internal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import pyarrow as pa

STR = "string"
I64 = "int64"
I32 = "int32"
F64 = "float64"
BOOL = "bool"
TS = "timestamp[us, tz=UTC]"
LIST_STR = "list<string>"
LIST_I64 = "list<int64>"
LIST_F64 = "list<float64>"


@dataclass(frozen=True)
class Type:
    """One column type as each engine names it."""

    duckdb: str  # what `runstore schema` shows and queries see
    spark: str  # Spark DDL
    delta: str  # deltalake's primitive type (`array<T>` for a list)


TYPES: dict[str, Type] = {
    STR: Type("VARCHAR", "STRING", "string"),
    I64: Type("BIGINT", "BIGINT", "long"),
    I32: Type("INTEGER", "INT", "integer"),
    F64: Type("DOUBLE", "DOUBLE", "double"),
    BOOL: Type("BOOLEAN", "BOOLEAN", "boolean"),
    TS: Type("TIMESTAMP WITH TIME ZONE", "TIMESTAMP", "timestamp"),
    LIST_STR: Type("VARCHAR[]", "ARRAY<STRING>", "array<string>"),
    LIST_I64: Type("BIGINT[]", "ARRAY<BIGINT>", "array<long>"),
    LIST_F64: Type("DOUBLE[]", "ARRAY<DOUBLE>", "array<double>"),
}


def _type(name: str) -> Type:
    if name not in TYPES:
        raise ValueError(f"unknown column type {name!r}; types: {', '.join(TYPES)}")
    return TYPES[name]


def duckdb_type(name: str) -> str:
    return _type(name).duckdb


def spark_type(name: str) -> str:
    return _type(name).spark


def delta_type(name: str) -> Any:
    """deltalake's type for a type name (`PrimitiveType`, or `ArrayType` for a list)."""
    from deltalake.schema import ArrayType, PrimitiveType

    delta = _type(name).delta
    if delta.startswith("array<"):
        return ArrayType(PrimitiveType(delta[len("array<"):-1]), contains_null=True)
    return PrimitiveType(delta)

# Column comments double as the schema documentation (docs/schema.md is checked against them).
TABLES: dict[str, list[tuple[str, str, str]]] = {
    "runs": [
        ("run_id", STR, "stable id of the run: a hash of its resolved source directory"),
        ("run_name", STR, "POSIX path of the run relative to the directory first given to ingest"),
        ("run_path", STR, "absolute resolved source directory"),
        ("kind", STR, "rl / sl / dpo / unknown, inferred from config keys as tinker-cookbook does"),
        ("layout", STR, "iteration_dirs / flat / none: how per-iteration artefacts are laid out"),
        ("model_name", STR, "config.json `model_name`"),
        ("learning_rate", F64, "config.json `learning_rate`"),
        ("config", STR, "config.json as JSON text"),
        ("code_diff", STR, "code.diff text"),
        ("status", STR, "completed / running / idle / missing, as of the ingest (the run_status "
                        "view applies the same macro, `run_status_at`, as of the query)"),
        ("last_step", I64, "largest `step` in metrics.jsonl"),
        ("n_metric_rows", I64, "lines read from metrics.jsonl (including superseded ones)"),
        ("source_updated_at", TS, "newest modification time of any source file of the run"),
        ("ingested_at", TS, "when this row was written"),
        ("final_checkpoint", BOOL, "true when `checkpoints.jsonl` holds a final checkpoint "
                                   "(`final` true or the name `final`)"),
        ("done_frac", F64, "largest non-NaN `progress/done_frac` logged in `metrics.jsonl` (any "
                           "write, superseded ones too; null when it logs none)"),
        ("command", STR, "the command line that started the run (logs.log's first "
                         "`Command line invocation:`)"),
        ("last_error", STR, "the exception line ending the last traceback of logs.log since "
                            "its last command line; an exception group's line, then its "
                            "first five sub-exceptions' (`GROUP: SUB; SUB; N more`); null "
                            "when none"),
        ("last_error_line", I64, "line number in logs.log of the log record whose traceback "
                                 "gave `last_error` (its first line); null with it. The "
                                 "log's last record when nothing was logged after the error"),
        ("cost_usd", F64, "the run's total cost: the last `cost/cumulative_usd` written to "
                          "the live metrics.jsonl (a step-less `log_summary` row included)"),
        ("tokens_sampled", I64, "the last `tokens/cumulative/sampled` written"),
        ("tokens_trained", I64, "the last `tokens/cumulative/trained` written"),
        ("tmp_files", LIST_STR, "leftover `.NAME.PID.tmp` files of an interrupted atomic "
                                "write (ignored; null when none)"),
    ],
    "config": [
        ("run_id", STR, "run"),
        ("key", STR, "dotted path of the leaf, e.g. `dataset_builder.group_size`; a part that "
                     "could be misread (empty, holding `.`, `,` or a control character, "
                     "starting with `\"`, or with spaces at its ends) is a JSON string: "
                     "`{\"a.b\": 1}` is `\"a.b\"`, `{\"a\": {\"b\": 1}}` is `a.b`"),
        ("value", STR, "the leaf as JSON text (lists stay one leaf)"),
        ("value_num", F64, "the leaf as a number when it is one (booleans too: 1/0)"),
        ("value_str", STR, "the leaf as text when it is a string"),
        ("source_id", I64, "internal: source file id"),
    ],
    "metrics_raw": [
        ("run_id", STR, "run"),
        ("step", I64, "`step` of the line; null for step-less summary rows"),
        ("key", STR, "metric name as written, e.g. `optim/kl_sample_train_v1`"),
        ("value", F64, "numeric value; NaN and ±Infinity kept as IEEE values"),
        ("value_str", STR, "string and boolean values (`true`/`false`)"),
        ("seq", I64, "write order within the run: line number (1-based) in the file"),
        ("pre_resume", BOOL, "true for rows read from `metrics.jsonl.pre_resume_*` copies (not live)"),
        ("source_id", I64, "internal: source file id"),
    ],
    "metric_keys": [
        ("run_id", STR, "run"),
        ("source_id", I64, "internal: source file id (the metrics file summarised)"),
        ("key", STR, "metric name as written"),
        ("pre_resume", BOOL, "true for a `metrics.jsonl.pre_resume_*` copy (not live)"),
        ("n_points", I64, "distinct steps of the key in the rows summarised"),
        ("first_step", I64, "smallest step (null: only step-less rows)"),
        ("last_step", I64, "largest step"),
        ("n_numbers", I64, "rows with a numeric value (NaN and ±Infinity included)"),
        ("n_strings", I64, "rows with a string or boolean value"),
        ("n_stepless", I64, "rows without a step"),
        ("steps_exact", BOOL, "false when these steps may repeat earlier ones (readers recount)"),
        ("max_value", F64, "largest numeric value, NaN left out (+Infinity kept); null when none"),
        ("n_step_numbers", I64, "rows with a step and a numeric value (NaN included)"),
    ],
    "metric_steps": [
        ("run_id", STR, "run"),
        ("source_id", I64, "internal: source file id (the metrics file summarised)"),
        ("pre_resume", BOOL, "true for a `metrics.jsonl.pre_resume_*` copy (not live)"),
        ("n_steps", I64, "steps (of any key) these rows add to the file's distinct steps"),
        ("first_step", I64, "smallest step (null: only step-less rows)"),
        ("last_step", I64, "largest step"),
        ("steps_exact", BOOL, "false when `n_steps` may count earlier steps again (readers recount)"),
    ],
    "metric_kl": [
        ("run_id", STR, "run"),
        ("source_id", I64, "internal: source file id (the live metrics file merged)"),
        ("step", I64, "training step"),
        ("v1", F64, "KL v1 that counts at this step (NaN and ±Infinity kept); null when none is a number"),
        ("v2", F64, "KL v2 that counts at this step (NaN and ±Infinity kept); null when none is a number"),
    ],
    "checkpoints": [
        ("run_id", STR, "run"),
        ("name", STR, "`000050` or `final`"),
        ("batch", I64, "`batch` (RL: the next batch)"),
        ("epoch", I64, "`epoch`"),
        ("final", BOOL, "`final` flag as written (null when absent)"),
        ("state_path", STR, "`tinker://.../weights/<name>`"),
        ("sampler_path", STR, "`tinker://.../sampler_weights/<name>`"),
        ("rolling", BOOL, "`rolling` flag (rolling saves have state_path only)"),
        ("extra", STR, "every other key of the record, as JSON text"),
        ("seq", I64, "write order: line number in checkpoints.jsonl"),
        ("source_id", I64, "internal: source file id"),
    ],
    "trajectories": [
        ("run_id", STR, "run"),
        ("split", STR, "`train` or `eval/<label>`"),
        ("iteration", I64, "training step of the batch"),
        ("group_idx", I64, "group within the batch"),
        ("traj_idx", I64, "trajectory within the group"),
        ("tags", LIST_STR, "env tags"),
        ("sampling_client_step", I64, "policy version that sampled it (null if unknown)"),
        ("total_reward", F64, "sum of step rewards + final_reward"),
        ("final_reward", F64, "reward given at episode end"),
        ("final_ob_len", I64, "tokens of the final observation"),
        ("n_steps", I64, "number of env steps"),
        ("metrics", STR, "`trajectory_metrics` as JSON text"),
        ("source_id", I64, "internal: source file id"),
        ("status", STR, "`status` of the trajectory (newer summaries; null when absent)"),
        ("error_type", STR, "`error_type` (newer summaries)"),
        ("error_message", STR, "`error_message` (newer summaries)"),
        ("stop_reason", STR, "`stop_reason` of the trajectory (newer summaries)"),
        ("model_name", STR, "`model_name` (newer summaries)"),
        ("conversation", STR, "`conversation` (newer summaries) as JSON text"),
    ],
    "rollout_steps": [
        ("run_id", STR, "run"),
        ("split", STR, "`train` or `eval/<label>`"),
        ("iteration", I64, "training step of the batch"),
        ("group_idx", I64, "group within the batch"),
        ("traj_idx", I64, "trajectory within the group"),
        ("step_idx", I64, "env step within the trajectory"),
        ("ob_len", I64, "observation tokens"),
        ("ac_len", I64, "action tokens"),
        ("reward", F64, "step reward"),
        ("episode_done", BOOL, "episode ended at this step"),
        ("metrics", STR, "step metrics as JSON text"),
        ("logs", STR, "step logs as JSON text"),
        ("stop_reason", STR, "`stop_reason` of the step, when written"),
        ("extra", STR, "other keys of the step (e.g. `trace`) as JSON text"),
        ("source_id", I64, "internal: source file id"),
    ],
    "conversations": [
        ("run_id", STR, "run"),
        ("split", STR, "`train` or `eval/<label>`"),
        ("iteration", I64, "training step"),
        ("conversation_id", STR, "unique id: `<source_id>:<index in file>`"),
        ("section", STR, "header path in the logtree, joined with ` / `"),
        ("group_idx", I64, "group, where the tree tells (index of its `Group Rollout` section)"),
        ("traj_idx", I64, "trajectory within the group, where the tree tells"),
        ("n_messages", I64, "messages in the conversation"),
        ("title", STR, "logtree title, e.g. `RL Iteration 3`"),
        ("source_id", I64, "internal: source file id"),
    ],
    "messages": [
        ("run_id", STR, "run"),
        ("conversation_id", STR, "conversation it belongs to"),
        ("message_idx", I64, "position in the conversation"),
        ("role", STR, "system / user / assistant / tool"),
        ("content", STR, "all text parts joined with a newline (thinking parts included)"),
        ("parts", STR, "the content list as JSON text (null for plain-string content)"),
        ("tool_calls", STR, "tool calls as JSON text (unparsed ones as {type: unparsed, ...})"),
        ("tool_call_id", STR, "for a tool message: the call it answers"),
        ("name", STR, "`name` of the message, when given"),
        ("trainable", BOOL, "`trainable` flag, when given"),
        ("source_id", I64, "internal: source file id"),
    ],
    "spans": [
        ("run_id", STR, "run"),
        ("step", I64, "training step"),
        ("name", STR, "span name"),
        ("duration_s", F64, "perf_counter duration in seconds"),
        ("wall_start_s", F64, "start, seconds after the step's earliest span start"),
        ("wall_end_s", F64, "end, seconds after the step's earliest span start"),
        ("depth", I32, "nesting depth from interval containment (0 = top level)"),
        ("parent", STR, "name of the tightest enclosing span, null at top level"),
        ("span_idx", I32, "position in the record (completion order)"),
        ("source_id", I64, "internal: source file id"),
        ("wall_add_s", F64, "wall time in seconds this span adds to the union of its name's "
                            "intervals in its step: spans of a step and name taken in "
                            "(wall_start_s, wall_end_s) order, the part of its interval after "
                            "the latest end before it; a step's values of a name sum to the "
                            "union's length (`slowest_spans.wall_s`); null without both wall "
                            "times"),
    ],
    "trace_slices": [
        ("run_id", STR, "run"),
        ("name", STR, "event name"),
        ("start_us", F64, "B timestamp (process-local perf_counter, microseconds)"),
        ("dur_us", F64, "E minus B; null when no E was found"),
        ("pid", I64, "fake pid as written (restarts at 0 after a resume)"),
        ("track", STR, "`args.track` (asyncio task or `sync:<thread>`)"),
        ("thread", STR, "`args.thread`"),
        ("args", STR, "merged args of B and E (minus track/thread) as JSON text"),
        ("depth", I32, "nesting depth within (segment, pid, track)"),
        ("segment", I32, "process session: 0, then +1 each time a resumed process restarts the clock"),
        ("source_id", I64, "internal: source file id"),
    ],
    "samples": [
        ("run_id", STR, "run whose directory holds the capture file"),
        ("run_attempt", I64, "scope `run_attempt`: 0, then 1, ... after each resume"),
        ("split", STR, "scope `split` as user code set it (e.g. `train`, `test`)"),
        ("iteration", I64, "scope `iteration` (set by user code; may differ from the rollouts')"),
        ("group_idx", I64, "scope `group_idx`"),
        ("traj_idx", I64, "scope `traj_idx`"),
        ("sample_idx", I64, "position of the sequence in its record's `samples`"),
        ("purpose", STR, "scope `purpose` (e.g. `rollout`, `eval`)"),
        ("policy_version", STR, "the sampling client's `model_path` (or `policy_version`); "
                                "often null"),
        ("created_at", TS, "when the SDK call was made (records are written as calls complete)"),
        ("prompt_tokens", LIST_I64, "token ids of the prompt"),
        ("sampled_tokens", LIST_I64, "token ids sampled"),
        ("logprobs", LIST_F64, "logprob of each sampled token (NaN and ±Infinity kept)"),
        ("prompt_len", I64, "number of prompt tokens"),
        ("sampled_len", I64, "number of sampled tokens"),
        ("n_logprobs", I64, "number of logprobs"),
        ("logprob_sum", F64, "sum of the logprobs (NaN when one is NaN)"),
        ("stop_reason", STR, "`stop_reason` of the sequence"),
        ("sampling_session_id", STR, "the sampling client's session id"),
        ("seq_id", I64, "id of the SDK call (one record)"),
        ("capture_run_id", STR, "scope `run_id` as user code set it (a name, not runstore's "
                                "run_id)"),
        ("metadata", STR, "the record's other keys (request metadata, `status`, "
                          "`latency_sec`, ...), the sequence's `stop_reason` and any other "
                          "scope key under `scope`, as JSON text"),
        ("seq", I64, "line number of the record in its capture file (completion order)"),
        ("source_id", I64, "internal: source file id"),
    ],
    "capture_events": [
        ("run_id", STR, "run whose directory holds the capture file"),
        ("kind", STR, "record `kind` (`train_op`, or `sample` for a call without sequences)"),
        ("op", STR, "`op` of a `train_op` record (`forward_backward`, `optim_step`, ...)"),
        ("status", STR, "`status`: `ok`, `error`, `cancelled`, `submitted`"),
        ("error", STR, "`error` (the exception's repr) when the call failed"),
        ("created_at", TS, "when the SDK call was made"),
        ("latency_s", F64, "`latency_sec`"),
        ("run_attempt", I64, "scope `run_attempt`"),
        ("split", STR, "scope `split`"),
        ("iteration", I64, "scope `iteration`"),
        ("group_idx", I64, "scope `group_idx`"),
        ("traj_idx", I64, "scope `traj_idx`"),
        ("purpose", STR, "scope `purpose`"),
        ("capture_run_id", STR, "scope `run_id` as user code set it"),
        ("event_id", STR, "the record's `event_id`, else `<source_id>:<line>`"),
        ("payload", STR, "the whole record as JSON text"),
        ("seq", I64, "line number of the record in its capture file"),
        ("source_id", I64, "internal: source file id"),
    ],
    "eval_runs": [
        ("eval_store_id", STR, "the eval store: a hash of its resolved directory"),
        ("eval_store", STR, "the eval store's directory (holding `runs.jsonl` and `runs/`)"),
        ("eval_run_id", STR, "`run_id` of metadata.json (the eval run's directory name)"),
        ("model_name", STR, "`model_name`"),
        ("checkpoint_name", STR, "`checkpoint_name` (null: the base model)"),
        ("checkpoint_path", STR, "`checkpoint_path` (`tinker://.../sampler_weights/<name>`)"),
        ("run_id", STR, "the training run whose `checkpoints.jsonl` lists `checkpoint_path` "
                        "(as sampler_path or state_path), resolved when queried; null when "
                        "no ingested run or several do"),
        ("timestamp", STR, "`timestamp` as written (ISO 8601, local time, no zone)"),
        ("benchmarks", LIST_STR, "`benchmarks`"),
        ("scores", STR, "`scores` (benchmark → score, filled when the run was finalized) "
                        "as JSON text"),
        ("config", STR, "`config` as JSON text"),
        ("source_id", I64, "internal: source file id"),
    ],
    "eval_results": [
        ("eval_store_id", STR, "the eval store (see `eval_runs`)"),
        ("eval_run_id", STR, "eval run (its directory name)"),
        ("benchmark", STR, "benchmark (its directory name)"),
        ("score", F64, "`score`"),
        ("num_examples", I64, "`num_examples`"),
        ("num_correct", I64, "`num_correct`"),
        ("num_errors", I64, "`num_errors`"),
        ("num_truncated", I64, "`num_truncated`"),
        ("time_s", F64, "`time_seconds`"),
        ("metrics", STR, "`metrics` as JSON text"),
        ("pass_at_k", STR, "`pass_at_k` (k → estimate) as JSON text"),
        ("source_id", I64, "internal: source file id"),
    ],
    "eval_trajectories": [
        ("eval_store_id", STR, "the eval store (see `eval_runs`)"),
        ("eval_run_id", STR, "eval run (its directory name)"),
        ("benchmark", STR, "benchmark (its directory name)"),
        ("idx", I64, "`idx`: the example's position in the benchmark"),
        ("example_id", STR, "`example_id`"),
        ("reward", F64, "`reward`"),
        ("error", STR, "`error` (null when the example ran)"),
        ("time_s", F64, "`time_seconds`"),
        ("n_turns", I64, "number of `turns`"),
        ("turns", STR, "`turns` (role, content, token_count, metadata) as JSON text"),
        ("metrics", STR, "`metrics` as JSON text"),
        ("logs", STR, "`logs` as JSON text"),
        ("seq", I64, "line number in trajectories.jsonl"),
        ("source_id", I64, "internal: source file id"),
    ],
    "run_logs": [
        ("run_id", STR, "run"),
        ("line_no", I64, "line number in logs.log"),
        ("level", STR, "level of the log record the line belongs to (`INFO`, `WARNING`, "
                       "`ERROR`, ...); null before the first record"),
        ("logger", STR, "logger name of that record (`root`, `tinker_cookbook.rl.train`)"),
        ("record_line", I64, "line number of that record's first line (a multi-line record "
                             "— a table, a traceback — shares it)"),
        ("text", STR, "the line as written"),
        ("source_id", I64, "internal: source file id"),
    ],
}

LEDGER: list[tuple[str, str, str]] = [
    ("source_id", I64, "hash of run_id and the file's path in the run"),
    ("run_id", STR, "run"),
    ("rel_path", STR, "file path relative to the run directory"),
    ("kind", STR, "file kind (see ingest.discover.FileKind)"),
    ("size", I64, "size when last read"),
    ("mtime_ns", I64, "mtime when last read"),
    ("offset", I64, "bytes consumed (append-only files: up to the last complete line)"),
    ("lines", I64, "complete lines consumed"),
    ("state", STR, "normalizer state carried between incremental reads (JSON)"),
]

# Which tables a run's row set is spread over; `runs` is keyed by run_id, the rest by source_id.
DATA_TABLES = [t for t in TABLES if t != "runs"]


def arrow_type(name: str) -> "pa.DataType":
    """The pyarrow type of a type name (`string`, `list<string>`, ...)."""
    import pyarrow as pa

    _type(name)
    return {STR: pa.string, I64: pa.int64, I32: pa.int32, F64: pa.float64, BOOL: pa.bool_,
            TS: lambda: pa.timestamp("us", tz="UTC"),
            LIST_STR: lambda: pa.list_(pa.string()),
            LIST_I64: lambda: pa.list_(pa.int64()),
            LIST_F64: lambda: pa.list_(pa.float64())}[name]()


def schema(table: str) -> "pa.Schema":
    """The pyarrow schema of `table` (a public table or `_ledger`)."""
    import pyarrow as pa

    cols = LEDGER if table == "_ledger" else TABLES[table]
    return pa.schema([pa.field(name, arrow_type(typ)) for name, typ, _ in cols])


def duckdb_columns(table: str) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a public table, in order (no pyarrow needed)."""
    return [(name, TYPES[typ].duckdb) for name, typ, _ in TABLES[table]]


def to_arrow(table: str, rows: Iterable[dict[str, Any]]) -> "pa.Table":
    """Rows (dicts keyed by column name) → a pyarrow table of exactly `table`'s schema."""
    import pyarrow as pa

    return pa.Table.from_pylist(list(rows), schema=schema(table))


def empty(table: str) -> "pa.Table":
    # Not Schema.empty_table(): it imports pandas (~0.2 s).
    import pyarrow as pa

    return pa.Table.from_batches([], schema=schema(table))


# Tables the ingest derives from other tables' rows (not read from a source file): the
# ingest report's row counts leave them out.
SUMMARY_TABLES = frozenset({"metric_keys", "metric_steps", "metric_kl"})

TABLE_DOCS: dict[str, str] = {
    "runs": "One row per run directory. Sources: `config.json`, `code.diff`, `logs.log` "
            "(command line, last error), the ledger of the run's files (status, last step, "
            "modification times, final checkpoint, largest `progress/done_frac`, total cost "
            "and tokens, leftover temporary files).",
    "config": "One row per leaf of `config.json`, nested keys flattened with dots (a key part "
              "holding a dot is quoted, so every key names one leaf; see `key`).",
    "metrics_raw": "One row per (line, key) of `metrics.jsonl` and its `metrics.jsonl.pre_resume_*` "
                   "copies, as written. The `metrics` view keeps the live value per (run, step, key).",
    "metric_keys": "The per-key summary of `metrics_raw` kept at ingest (what `runstore keys` "
                   "reads): one row per key and read of a metrics file (appended, never rewritten).",
    "metric_steps": "The per-read step count of `metrics_raw` kept at ingest (what `run_summary`'s "
                    "`n_steps` adds up): one row per read of a metrics file (appended, never rewritten).",
    "metric_kl": "The KL values that count, merged at ingest (what `kl_steps` reads): one row per "
                 "run and live step that logs a KL number, by the statement `metric_kl` of "
                 "`sql/statements/summaries.sql` (a read whose KL steps repeat earlier ones "
                 "re-reads its file).",
    "checkpoints": "One row per record of `checkpoints.jsonl`.",
    "trajectories": "One row per record of `*_rollout_summaries.jsonl` (either layout).",
    "rollout_steps": "One row per element of a trajectory record's `steps`.",
    "conversations": "One row per conversation node (`data.type == \"conversation\"`) of a "
                      "`*_logtree.json` file.",
    "messages": "One row per message of a logtree conversation.",
    "spans": "One row per span of the latest record of each step of `timing_spans.jsonl`.",
    "trace_slices": "One row per B/E pair (or X event) of `trace_events.jsonl`; a B whose E never "
                    "came is kept with a null `dur_us`.",
    "samples": "One row per sampled sequence of the token-level capture (`capture/<kind>.jsonl`, "
               "written by `tinker_cookbook.capture`): each `sample` record with sequences gives "
               "one row per element of its `samples`, token lists stored as list columns. Join "
               "to `trajectories` on (run_id, split, iteration, group_idx, traj_idx).",
    "capture_events": "One row per capture record that is not a sampled sequence: `train_op` "
                      "records (forward_backward, optim_step, save_weights_for_sampler) and "
                      "`sample` records without sequences (a cancelled or failed call).",
    "eval_runs": "One row per eval run of an eval store (`runs/<id>/metadata.json`, written by "
                 "`tinker_cookbook.stores.EvalStore`), wherever the store lies under an ingested "
                 "path. An eval store is not a training run: it has no `runs` row.",
    "eval_results": "One row per benchmark result of an eval run "
                    "(`runs/<id>/<benchmark>/result.json`).",
    "eval_trajectories": "One row per stored trajectory of an eval run "
                         "(`runs/<id>/<benchmark>/trajectories.jsonl`).",
    "run_logs": "One row per line of a run's `logs.log` (Python logging text: "
                "`<logger>:<lineno> [<LEVEL>] <message>`, multi-line messages continuing on "
                "the lines after).",
}


def markdown() -> str:
    """docs/schema.md: every table and column with its type and source (checked by a test)."""
    out = ["# Schema", "",
           "Every table carries `run_id`. The names below are the public contract; columns may be "
           "added, never renamed. `source_id` is internal (which source file produced the row, so "
           "a re-read file replaces exactly its own rows). Generated from "
           "`runstore/storage/schema.py` by `schema.markdown()` (see "
           "tests/docs/test_packaging.py); a test keeps this file in step.", ""]
    for name, cols in TABLES.items():
        out += [f"## `{name}`", "", TABLE_DOCS[name], "", "| column | type | meaning / source |",
                "|---|---|---|"]
        out += [f"| `{c}` | {arrow_type(t)} | {doc} |" for c, t, doc in cols]
        out.append("")
    out += ["## Views", "",
            "`metrics` and the other canned views are described in [views.md](views.md).", ""]
    return "\n".join(out)
