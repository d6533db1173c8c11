"""An eval store's files → `eval_runs`, `eval_results` and `eval_trajectories` rows.

Contract: an eval store is what tinker-cookbook's `stores.EvalStore` writes (discovery finds
it by its shape, `ingest.discover`): per eval run a directory `runs/<id>/` holding
`metadata.json` (`RunMetadata.to_dict()`, rewritten with the scores when the run is
finalized) and per benchmark `<benchmark>/result.json` (`BenchmarkResult`, written once) and
`<benchmark>/trajectories.jsonl` (one `StoredTrajectory` per line, appended). The eval run
and benchmark of a row are the directory names its file lies in (`eval_run_id`,
`benchmark`), as `EvalStore` reads them back; `eval_store_id` is the eval store's id (a hash
of its resolved directory, the `Context`'s unit id) and `eval_store` its directory.

* `metadata.json` → one `eval_runs` row: `model_name`, `checkpoint_name`,
  `checkpoint_path`, `timestamp` (as written), `benchmarks`, `scores` and `config` (JSON
  text). `run_id`, the training run that wrote the checkpoint, is not known here: the query
  layer resolves it through the `checkpoints` table (runstore.query.connect), so an eval
  ingested before its training run is linked once that run is ingested.
* `result.json` → one `eval_results` row: `score`, `num_examples`, `num_correct`,
  `num_errors`, `num_truncated`, `time_s` (`time_seconds`), `metrics` and `pass_at_k`
  (JSON text).
* `trajectories.jsonl` → one `eval_trajectories` row per line: `idx`, `example_id`,
  `reward`, `error`, `time_s`, `n_turns`, `turns`, `metrics` and `logs` (JSON text), `seq`
  (the line number).

Bad input costs only itself: a file or line that is not a JSON object is reported and
skipped, a field of the wrong type (`fields.Fields`) is reported and stored as null.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import parse
from .base import Batch, Context, Output, clean_str
from .fields import Fields


def _where(ctx: Context) -> tuple[str | None, str | None]:
    """(eval run id, benchmark) from the file's path in the store: `runs/<id>/metadata.json`
    or `runs/<id>/<benchmark>/<file>`."""
    parts = (ctx.file or "").split("/")
    if len(parts) == 3:
        return parts[1], None
    if len(parts) == 4:
        return parts[1], parts[2]
    return None, None


def _object(batch: Batch, what: str) -> dict | None:
    """The file's JSON object, or None (reported) when it holds anything else."""
    try:
        obj = parse.loads(batch.data)
    except RecursionError:
        batch.ctx.warn(None, "skipped: JSON nested too deeply")
        return None
    except ValueError as e:
        batch.ctx.warn(None, f"skipped: not valid JSON ({str(e)[:120]})")
        return None
    if not isinstance(obj, dict):
        batch.ctx.warn(None, f"{what} is a JSON {type(obj).__name__}, not an object; skipped")
        return None
    return obj


def _warn(ctx: Context, line: int | None, f: Fields, what: str) -> None:
    if f.problems:
        ctx.warn(line, f"{what} fields of the wrong type stored as null: "
                       + ", ".join(f.problems))


def _base(ctx: Context) -> dict[str, Any]:
    eval_run_id, benchmark = _where(ctx)
    row: dict[str, Any] = {"eval_store_id": ctx.run_id, "eval_run_id": eval_run_id,
                           "source_id": ctx.source_id}
    if benchmark is not None:
        row["benchmark"] = benchmark
    return row


def _str_list(value: Any, f: Fields) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [clean_str(v) for v in value]
    f.bad("benchmarks", value)
    return None


def _whole_file(batch: Batch, what: str, table: str,
                row_of: Callable[[dict, Fields], dict[str, Any]]) -> Output:
    """The one row of a file holding one JSON object (`row_of` reads its fields)."""
    out = Output()
    obj = _object(batch, what)
    if obj is not None:
        f = Fields()
        row = {**_base(batch.ctx), **row_of(obj, f)}
        _warn(batch.ctx, None, f, what)
        out.rows({table: [row]})
    return out


class EvalRuns:
    """`runs/<id>/metadata.json` → `eval_runs`."""

    kinds = ("eval_metadata",)
    tables = ("eval_runs",)

    def normalize(self, batch: Batch) -> Output:
        def row(meta: dict, f: Fields) -> dict[str, Any]:
            return {"eval_store": batch.ctx.run_path, "run_id": None,
                    "model_name": f.str(meta, "model_name"),
                    "checkpoint_name": f.str(meta, "checkpoint_name"),
                    "checkpoint_path": f.str(meta, "checkpoint_path"),
                    "timestamp": f.str(meta, "timestamp"),
                    "benchmarks": _str_list(meta.get("benchmarks"), f),
                    "scores": f.json(meta.get("scores")), "config": f.json(meta.get("config"))}

        return _whole_file(batch, "eval run metadata", "eval_runs", row)


class EvalResults:
    """`runs/<id>/<benchmark>/result.json` → `eval_results`."""

    kinds = ("eval_result",)
    tables = ("eval_results",)

    def normalize(self, batch: Batch) -> Output:
        def row(result: dict, f: Fields) -> dict[str, Any]:
            return {"score": f.float(result, "score"),
                    **{k: f.int(result, k) for k in ("num_examples", "num_correct",
                                                     "num_errors", "num_truncated")},
                    "time_s": f.float(result, "time_seconds"),
                    "metrics": f.json(result.get("metrics")),
                    "pass_at_k": f.json(result.get("pass_at_k"))}

        return _whole_file(batch, "benchmark result", "eval_results", row)


class EvalTrajectories:
    """`runs/<id>/<benchmark>/trajectories.jsonl` → `eval_trajectories`, line by line."""

    kinds = ("eval_trajectories",)
    tables = ("eval_trajectories",)

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        base = _base(batch.ctx)
        rows = []
        for line, rec in batch.records():
            if not isinstance(rec, dict):
                batch.ctx.warn(line, f"eval trajectory is a JSON {type(rec).__name__}, not an "
                                     "object; skipped")
                continue
            f = Fields()
            turns = rec.get("turns")
            if turns is not None and not isinstance(turns, list):
                f.bad("turns", turns)
                turns = None
            rows.append({**base, "idx": f.int(rec, "idx"), "example_id": f.str(rec, "example_id"),
                         "reward": f.float(rec, "reward"), "error": f.str(rec, "error"),
                         "time_s": f.float(rec, "time_seconds"),
                         "n_turns": None if turns is None else len(turns),
                         "turns": f.json(turns), "metrics": f.json(rec.get("metrics")),
                         "logs": f.json(rec.get("logs")), "seq": line})
            _warn(batch.ctx, line, f, "eval trajectory")
        out.rows({"eval_trajectories": rows})
        return out
