"""An independent reading of run trees, in plain Python, to check what the store holds.

Nothing here imports runstore: it re-derives, from the source files and FORMATS.md alone, how
many rows each table should get and what the live metrics are, so tests compare the store with
a second implementation rather than with itself.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator

ITER_DIR = re.compile(r"^iteration_\d{6,}$")
IN_DIR = re.compile(r"^(train|eval_.+?)(_logtree\.json|_rollout_summaries\.jsonl)$")
FLAT = re.compile(r"^(train|eval_.+?)_iteration_\d+(_logtree\.json|_rollout_summaries\.jsonl)$")


def run_dirs(root: Path) -> list[Path]:
    """Directories holding config.json or metrics.jsonl, not looking inside runs."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if "config.json" in filenames or "metrics.jsonl" in filenames:
            found.append(Path(dirpath))
            dirnames[:] = []
        else:
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return sorted(found)


def complete_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, decoded JSON) of every complete, decodable line."""
    data = path.read_bytes()
    cut = data.rfind(b"\n")
    data = data[: cut + 1]
    for i, raw in enumerate(data.split(b"\n")[:-1], start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8").lstrip("\ufeff")
            yield i, json.loads(text)
        except (ValueError, RecursionError):
            continue


def depth_of(value: Any) -> int:
    """How deeply lists and objects nest in a decoded value (`[]` is 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def good_step(obj: dict) -> bool:
    s = obj.get("step")
    if s is None:
        return True
    if isinstance(s, bool):
        return False
    return isinstance(s, int) or (isinstance(s, float) and s.is_integer())


def metric_rows(path: Path) -> list[tuple[Any, str, Any, int]]:
    """(step, key, value, line) for every non-null value of a metrics file."""
    out = []
    for line, obj in complete_lines(path):
        if not isinstance(obj, dict) or not good_step(obj):
            continue
        step = obj.get("step")
        for k, v in obj.items():
            if k != "step" and v is not None:
                out.append((None if step is None else int(step), k, v, line))
    return out


def live_metrics(run: Path) -> dict[tuple[int, str], Any]:
    """(step, key) → value of the last write, from metrics.jsonl only."""
    live: dict[tuple[int, str], Any] = {}
    p = run / "metrics.jsonl"
    if p.is_file():
        for step, key, value, _ in metric_rows(p):
            if step is not None:
                live[(step, key)] = value
    return live


def per_iteration_files(run: Path) -> list[Path]:
    files = []
    for entry in sorted(run.iterdir()):
        if entry.is_dir() and ITER_DIR.match(entry.name):
            files += [f for f in sorted(entry.iterdir()) if f.is_file() and IN_DIR.match(f.name)]
        elif entry.is_file() and FLAT.match(entry.name):
            files.append(entry)
    return files


def _conversation_data(path: Path) -> list[dict]:
    """The `data` objects of every conversation node of a logtree file ([] if unreadable)."""
    try:
        tree = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError):
        return []
    found = []
    stack = [tree.get("root")] if isinstance(tree, dict) else []
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        data = node.get("data")
        if isinstance(data, dict) and data.get("type") == "conversation":
            found.append(data)
        children = node.get("children")
        if isinstance(children, list):
            stack.extend(children)
    return found


def expected_counts_of(root: Path, tables: Iterable[str]) -> dict[str, int]:
    """`expected_counts(root)` for each of `tables`, 0 for a table it has no rows for. It reads
    every file under `root` once, not once per table (a large tree takes seconds to read)."""
    counts = expected_counts(root)
    return {t: counts.get(t, 0) for t in tables}


def conversations_in(path: Path) -> int:
    return len(_conversation_data(path))


def messages_in(path: Path) -> int:
    return sum(len(d.get("messages") or []) for d in _conversation_data(path))


def expected_counts(root: Path) -> dict[str, int]:
    """Row counts per table for the runs under `root`, as one ingest from scratch writes them
    (`metric_keys`: one row per metrics file and key it logs; appends add a row per key a
    later read logs; `metric_steps`: one row per metrics file that logs anything, and per
    later read that does; `metric_kl`: one row per live step with a KL number, `kl_steps`)."""
    c: dict[str, int] = defaultdict(int)
    for run in run_dirs(root):
        c["runs"] += 1
        c["metric_kl"] += len({s for (s, k) in live_numbers(run)
                               if any(k in pair for pair in KL_FAMILIES.values())})
        for f in sorted(run.iterdir()):
            if f.name == "metrics.jsonl" or re.match(r"^metrics\.jsonl\.pre_resume_\d+$", f.name):
                rows = metric_rows(f)
                c["metrics_raw"] += len(rows)
                c["metric_keys"] += len({key for _, key, _, _ in rows})
                c["metric_steps"] += 1 if rows else 0
        ck = run / "checkpoints.jsonl"
        if ck.is_file():
            c["checkpoints"] += sum(1 for _, o in complete_lines(ck) if isinstance(o, dict))
        ts = run / "timing_spans.jsonl"
        if ts.is_file():
            last: dict[int, int] = {}
            for _, o in complete_lines(ts):
                if isinstance(o, dict) and isinstance(o.get("step"), int) and isinstance(o.get("spans"), list):
                    last[o["step"]] = len(o["spans"])
            c["spans"] += sum(last.values())
        te = run / "trace_events.jsonl"
        if te.is_file():
            c["trace_slices"] += sum(1 for _, o in complete_lines(te)
                                     if isinstance(o, dict) and o.get("ph") in ("B", "X"))
        cfg = run / "config.json"
        if cfg.is_file():
            try:
                c["config"] += len(flatten(json.loads(cfg.read_text())))
            except ValueError:
                pass
        for f in per_iteration_files(run):
            if f.name.endswith("_rollout_summaries.jsonl"):
                for _, o in complete_lines(f):
                    if isinstance(o, dict):
                        c["trajectories"] += 1
                        c["rollout_steps"] += len(o.get("steps") or [])
            else:
                c["conversations"] += conversations_in(f)
                c["messages"] += messages_in(f)
    for table, n in artifact_counts(root).items():
        c[table] += n
    return dict(c)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Flattened key -> leaf, keys as docs/schema.md writes them: parts joined by dots, a part
    that could be misread written as a JSON string."""
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{config_key_part(k)}."))
        return out
    return {prefix[:-1]: obj} if prefix else {}


def config_key_part(name: str) -> str:
    """docs/schema.md's rule: a part is written as it is unless it is empty, holds a `.`, a
    `,` or a control character, begins with `"`, or begins or ends with whitespace."""
    misread = (name == "" or name[0] == '"' or name[0].isspace() or name[-1].isspace()
               or any(c in ".," or ord(c) < 32 or ord(c) == 127 for c in name))
    return json.dumps(name, ensure_ascii=False) if misread else name


def kind_of(config: dict) -> str:
    """Upstream's rule (tinker-cookbook stores/registry.py): keys first, then the builder type."""
    if "dpo_beta" in config:
        return "dpo"
    if "loss_fn" in config:
        return "rl"
    if "num_epochs" in config:
        return "sl"
    builder = config.get("dataset_builder")
    type_name = builder.get("__type__") if isinstance(builder, dict) else None
    if isinstance(type_name, str):
        if "RL" in type_name:
            return "rl"
        if "Supervised" in type_name or "SL" in type_name:
            return "sl"
    return "unknown"


def run_kind(run: Path) -> str:
    """kind_of(config.json), or "unknown" when the run has no readable JSON-object config."""
    try:
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "unknown"
    return kind_of(config) if isinstance(config, dict) else "unknown"


def layout_of(run: Path) -> str:
    """`iteration_dirs` if any iteration_NNNNNN/ holds a rollout/logtree file, else `flat` if
    the run root holds `<base>_iteration_NNNNNN_*` rollout/logtree files, else `none`."""
    files = per_iteration_files(run)
    if any(f.parent != run for f in files):
        return "iteration_dirs"
    return "flat" if files else "none"


def has_final_checkpoint(run: Path) -> bool:
    """A record named `final`, or whose `final` is true: JSON true, the integer 1, or the
    text `true` in any case with spaces around (the checkpoints normalizer's coercions)."""
    ck = run / "checkpoints.jsonl"
    if not ck.is_file():
        return False

    def final(o: Any) -> bool:
        v = o.get("final")
        return (v is True or (type(v) is int and v == 1)
                or (isinstance(v, str) and v.strip().lower() == "true"))

    return any(isinstance(o, dict) and (o.get("name") == "final" or final(o))
               for _, o in complete_lines(ck))


def file_rows(path: Path) -> int:
    """Complete, decodable JSON-object lines of a JSON-lines file."""
    return sum(1 for _, o in complete_lines(path) if isinstance(o, dict))


def tree_digest(root: Path) -> dict[str, tuple[str, int]]:
    """rel path → (sha256 or "dir", mtime_ns) of every file and directory under root: shows a
    new, changed, touched or lost file or directory (used on stores that must not change)."""
    out = {}
    for p in sorted(root.rglob("*")):
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[p.relative_to(root).as_posix()] = (digest, p.stat().st_mtime_ns)
    return out


def fingerprint(root: Path) -> dict[str, tuple[str, int, int]]:
    """rel path → (sha256, size, mtime_ns) of every file under root (symlinks not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "link"
            out[p.relative_to(root).as_posix()] = (digest, st.st_size, st.st_mtime_ns)
    return out


# ---------------------------------------------------------------------------------------------
# Canned views, recomputed from the source files (tests/query/test_views.py compares them with SQL).
# Same rule as above: no runstore import; every number comes from the JSON files themselves.

KL_FAMILIES = {"v1": ("optim/kl_sample_train_v1", "kl_sample_train_v1"),
               "v2": ("optim/kl_sample_train_v2", "kl_sample_train_v2")}
REWARD_KEY = "env/all/reward/total"


# Hand-written metrics.jsonl for the rules kl_health encodes in its ordering and windows: the
# prefixed spelling wins at a step even when the unprefixed one is written later; a later write
# of a step wins; a step without KL does not end a streak, a NaN step and a not-over step do; a
# streak at the start and at the end of a run counts. Over: 0 1 4 6 7 9 12 13; streaks 0-1,
# 4-7 (3 steps: 5 logs no KL), 9, 12-13.
KL_EDGE_METRICS = "".join(json.dumps(line) + "\n" for line in [
    {"step": 0, "optim/kl_sample_train_v1": 0.5}, {"step": 1, "optim/kl_sample_train_v1": 0.5},
    {"step": 2, "optim/kl_sample_train_v1": 0.001},
    {"step": 3, "optim/kl_sample_train_v1": 0.001}, {"step": 3, "kl_sample_train_v1": 0.9},
    {"step": 4, "kl_sample_train_v1": 0.2}, {"step": 5, "optim/entropy": 1.0},
    {"step": 6, "kl_sample_train_v1": 0.3},
    {"step": 7, "optim/kl_sample_train_v1": 0.4, "optim/kl_sample_train_v2": float("nan")},
    {"step": 8, "optim/kl_sample_train_v1": float("nan")},
    {"step": 9, "optim/kl_sample_train_v1": 0.2}, {"step": 10, "optim/kl_sample_train_v1": 0.2},
    {"step": 10, "optim/kl_sample_train_v1": 0.001},
    {"step": 11, "optim/kl_sample_train_v1": 0.001},
    {"step": 12, "optim/kl_sample_train_v1": 0.3}, {"step": 13, "optim/kl_sample_train_v1": 0.3},
    # A number superseded by a string at the same step is not live: the unprefixed spelling's
    # live number is used (14), or the step logs no KL at all and does not end a streak (16).
    {"step": 14, "optim/kl_sample_train_v1": 0.5},
    {"step": 14, "optim/kl_sample_train_v1": "n/a", "kl_sample_train_v1": 0.002},
    {"step": 15, "optim/kl_sample_train_v1": 0.3},
    {"step": 16, "optim/kl_sample_train_v1": 0.9}, {"step": 16, "optim/kl_sample_train_v1": "skipped"},
    {"step": 17, "optim/kl_sample_train_v1": 0.3},
])


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _isnan(v: float) -> bool:
    return v != v


def run_name(root: Path, run: Path) -> str:
    return run.relative_to(root).as_posix()


def live_numbers(run: Path) -> dict[tuple[int, str], float]:
    """(step, key) → float of the live write when that write is a number (not a bool/string)."""
    return {k: float(v) for k, v in live_metrics(run).items() if _is_number(v)}


def last_steps(root: Path, n: int = 10) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(run_name, key) → its `n` largest steps whose live write is a number, largest first,
    with the number: the `last_steps` view."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for run in run_dirs(root):
        by_key: dict[str, list[tuple[int, float]]] = {}
        for (step, key), value in live_numbers(run).items():
            by_key.setdefault(key, []).append((step, value))
        for key, points in by_key.items():
            out[(run_name(root, run), key)] = sorted(points, reverse=True)[:n]
    return out


def kl_health(root: Path, threshold: float = 0.01) -> dict[str, dict[str, Any]]:
    """run_name → the kl_health row, for runs that log a KL metric (prefixed name preferred)."""
    out: dict[str, dict[str, Any]] = {}
    for run in run_dirs(root):
        live = live_numbers(run)
        names = {n for pair in KL_FAMILIES.values() for n in pair}
        per_step: dict[int, dict[str, float]] = defaultdict(dict)
        for step in sorted({s for s, k in live if k in names}):
            for fam, (prefixed, bare) in KL_FAMILIES.items():
                if (step, prefixed) in live:
                    per_step[step][fam] = live[(step, prefixed)]
                elif (step, bare) in live:
                    per_step[step][fam] = live[(step, bare)]
        if not per_step:
            continue
        steps = sorted(per_step)

        def over(v: float | None) -> bool:
            return v is not None and not _isnan(v) and v > threshold

        flags = [any(over(per_step[s].get(f)) for f in KL_FAMILIES) for s in steps]
        longest = streak = 0
        for f in flags:
            streak = streak + 1 if f else 0
            longest = max(longest, streak)
        over_steps = [s for s, f in zip(steps, flags) if f]
        row: dict[str, Any] = {}
        for fam in KL_FAMILIES:
            logged = [(s, per_step[s][fam]) for s in steps if fam in per_step[s]]
            not_nan = [v for _, v in logged if not _isnan(v)]
            row[f"max_kl_{fam}"] = max(not_nan) if not_nan else None
            row[f"last_kl_{fam}"] = logged[-1][1] if logged else None
        row.update(
            steps_over=len(over_steps),
            first_step_over=over_steps[0] if over_steps else None,
            last_step_over=over_steps[-1] if over_steps else None,
            longest_streak_over=longest,
            nan_steps=sum(1 for s in steps if any(_isnan(v) for v in per_step[s].values())),
            flagged=bool(over_steps),
        )
        out[run_name(root, run)] = row
    return out


def kl_steps(root: Path, threshold: float = 0.01) -> dict[tuple[str, int], dict[str, Any]]:
    """(run_name, step) → the kl_steps row, for every step that logs a numeric KL value."""
    names = {n for pair in KL_FAMILIES.values() for n in pair}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for run in run_dirs(root):
        live = live_numbers(run)
        for step in sorted({s for s, k in live if k in names}):
            row: dict[str, Any] = {}
            for fam, (prefixed, bare) in KL_FAMILIES.items():
                row[fam] = live.get((step, prefixed), live.get((step, bare)))
            values = [v for v in row.values() if v is not None]
            row["is_nan"] = any(_isnan(v) for v in values)
            row["is_over"] = any(not _isnan(v) and v > threshold for v in values)
            out[(run_name(root, run), step)] = row
    return out


def all_kl_writes(run: Path) -> list[float]:
    """Every KL value ever written for the run, superseded and pre_resume copies included."""
    names = {n for pair in KL_FAMILIES.values() for n in pair}
    values = []
    for f in sorted(run.iterdir()):
        if f.name == "metrics.jsonl" or f.name.startswith("metrics.jsonl.pre_resume_"):
            values += [float(v) for _, k, v, _ in metric_rows(f) if k in names and _is_number(v)]
    return values


def reward_trends(root: Path) -> dict[tuple[str, int], tuple[float, float | None, float | None]]:
    """(run_name, step) → (reward, mean of non-NaN rewards over the last 10 logged steps,
    best non-NaN reward so far)."""
    out: dict[tuple[str, int], tuple[float, float | None, float | None]] = {}
    for run in run_dirs(root):
        live = live_numbers(run)
        series = sorted((s, v) for (s, k), v in live.items() if k == REWARD_KEY)
        best: float | None = None
        for i, (step, value) in enumerate(series):
            window = [v for _, v in series[max(0, i - 9): i + 1] if not _isnan(v)]
            if not _isnan(value):
                best = value if best is None else max(best, value)
            out[(run_name(root, run), step)] = (
                value, sum(window) / len(window) if window else None, best)
    return out


def live_spans(run: Path) -> dict[int, list[dict[str, Any]]]:
    """step → spans of the last timing_spans.jsonl record of that step."""
    spans: dict[int, list[dict[str, Any]]] = {}
    path = run / "timing_spans.jsonl"
    if path.is_file():
        for _, obj in complete_lines(path):
            if isinstance(obj, dict) and isinstance(obj.get("step"), int) \
                    and isinstance(obj.get("spans"), list):
                spans[obj["step"]] = obj["spans"]
    return spans


def top_level(spans: list[dict[str, Any]], eps: float = 1e-6) -> list[dict[str, Any]]:
    """Spans of one step that no other span contains. A container has another name, an
    interval around this one (1 µs slack for float noise) and completes later (comes later
    in the file, which lists spans in completion order)."""
    out = []
    for i, s in enumerate(spans):
        contained = any(
            p["name"] != s["name"] and p["wall_start"] <= s["wall_start"] + eps
            and p["wall_end"] >= s["wall_end"] - eps
            for p in spans[i + 1:])
        if not contained:
            out.append(s)
    return out


def _percentile_cont(sorted_values: list[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = int(pos // 1)
    hi = min(lo + 1, len(sorted_values) - 1) if pos != lo else lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of closed intervals: merge them into disjoint islands (sorted by
    start, an interval that starts after the island's end opens a new one), add the islands."""
    total = 0.0
    island: list[float] | None = None
    for start, end in sorted(intervals):
        if island is not None and start <= island[1]:
            island[1] = max(island[1], end)
            continue
        if island is not None:
            total += island[1] - island[0]
        island = [start, max(start, end)]
    if island is not None:
        total += island[1] - island[0]
    return total


def _timed(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not _isnan(float(v))


def slowest_spans(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(run_name, span name) → calls, total_s, mean_s, p50_s, p95_s, max_s, share, wall_s,
    wall_share, rank. `wall_s` sums, over steps, the union of the name's intervals."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for run in run_dirs(root):
        name = run_name(root, run)
        by_step = live_spans(run)
        durations: dict[str, list[float]] = defaultdict(list)
        wall: dict[str, float] = {}
        for spans in by_step.values():
            intervals: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for s in spans:
                durations[s["name"]].append(float(s["duration"]))
                if _timed(s.get("wall_start")) and _timed(s.get("wall_end")):
                    intervals[s["name"]].append((float(s["wall_start"]), float(s["wall_end"])))
            for span, ivs in intervals.items():
                wall[span] = wall.get(span, 0.0) + union_length(ivs)
        if not durations:
            continue
        live = live_numbers(run)
        totals = [v for (_, k), v in live.items() if k == "time/total" and not _isnan(v)]
        if totals:
            denominator = sum(totals)
        else:
            denominator = sum(float(s["duration"]) for spans in by_step.values()
                              for s in top_level(spans))
        ranked = sorted(durations, key=lambda n: (-sum(durations[n]), n))
        for rank, span in enumerate(ranked, start=1):
            values = sorted(durations[span])
            total = sum(values)
            out[(name, span)] = {
                "calls": len(values), "total_s": total, "mean_s": total / len(values),
                "p50_s": _percentile_cont(values, 0.5), "p95_s": _percentile_cont(values, 0.95),
                "max_s": values[-1], "share": total / denominator if denominator else None,
                "wall_s": wall.get(span),
                "wall_share": (wall[span] / denominator if denominator and span in wall
                               else None),
                "rank": rank}
    return out


def checkpoint_records(run: Path) -> list[dict[str, Any]]:
    path = run / "checkpoints.jsonl"
    if not path.is_file():
        return []
    return [o for _, o in complete_lines(path) if isinstance(o, dict)]


def latest_checkpoints(root: Path) -> dict[str, dict[str, Any]]:
    """run_name → the latest checkpoint record, the latest with a sampler path, the final one."""
    out: dict[str, dict[str, Any]] = {}
    for run in run_dirs(root):
        records = checkpoint_records(run)
        if not records:
            continue
        last = records[-1]
        samplers = [r for r in records if r.get("sampler_path") is not None]
        finals = [r for r in records if r.get("final") is True or r.get("name") == "final"]
        out[run_name(root, run)] = {
            "n_checkpoints": len(records), "latest_name": last.get("name"),
            "batch": last.get("batch"),
            "epoch": last.get("epoch"), "rolling": last.get("rolling") is True,
            "state_path": last.get("state_path"), "sampler_path": last.get("sampler_path"),
            "sampler_name": samplers[-1].get("name") if samplers else None,
            "latest_sampler_path": samplers[-1]["sampler_path"] if samplers else None,
            "final_name": finals[-1].get("name") if finals else None,
            "final_state_path": finals[-1].get("state_path") if finals else None,
            "final_sampler_path": finals[-1].get("sampler_path") if finals else None,
        }
    return out


def eval_metrics(root: Path) -> dict[tuple[str, int, str, str], float | None]:
    """(run_name, step, evaluator, metric) → value, for live keys `<evaluator>/env/...`."""
    out: dict[tuple[str, int, str, str], float | None] = {}
    for run in run_dirs(root):
        for (step, key), value in live_metrics(run).items():
            i = key.find("/env/")
            if i > 0:
                out[(run_name(root, run), step, key[:i], key[i + 1:])] = (
                    float(value) if _is_number(value) else None)
    return out


def run_summary(root: Path) -> dict[str, dict[str, Any]]:
    """run_name → run_summary row (without status, which depends on file times and the clock)."""
    kl = kl_health(root)
    trends = reward_trends(root)
    ckpts = latest_checkpoints(root)
    out: dict[str, dict[str, Any]] = {}
    for run in run_dirs(root):
        name = run_name(root, run)
        try:
            config = json.loads((run / "config.json").read_text())
        except (OSError, ValueError):
            config = {}
        steps = {s for s, _ in live_metrics(run)}
        rewards = sorted((s, v) for (n, s), v in trends.items() if n == name)
        k = kl.get(name)
        maxes = [v for v in (k["max_kl_v1"], k["max_kl_v2"]) if v is not None] if k else []
        lr = config.get("learning_rate")
        out[name] = {
            "kind": kind_of(config),
            "model_name": config.get("model_name"),
            "learning_rate": float(lr) if _is_number(lr) else None,
            "n_steps": len(steps) if steps else None,
            "last_step": max(steps) if steps else None,
            "last_reward_ma10": rewards[-1][1][1] if rewards else None,
            "best_reward": rewards[-1][1][2] if rewards else None,
            "max_kl": max(maxes) if maxes else None,
            "kl_flagged": k["flagged"] if k else None,
            "n_checkpoints": ckpts[name]["n_checkpoints"] if name in ckpts else 0,
            "last_checkpoint": ckpts[name]["latest_name"] if name in ckpts else None,
        }
    return out


# Transcripts: messages of logtree conversations and the reward the logtree shows for each.

def _split_iteration(run: Path, f: Path) -> tuple[str, int]:
    m = re.match(r"^(train|eval_(.+?))(?:_iteration_(\d+))?(_logtree\.json|_rollout_summaries\.jsonl)$",
                 f.name)
    assert m, f
    split = "train" if m.group(1) == "train" else "eval/" + (m.group(2) or "")
    iteration = m.group(3) if m.group(3) is not None else f.parent.name.split("_")[1]
    return split, int(iteration)


def _node_text(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict):
        return "".join(_node_text(c) for c in node.get("children") or [])
    return ""


def _header_of(node: dict) -> str | None:
    for child in node.get("children") or []:
        if isinstance(child, dict) and child.get("tag") in ("h1", "h2", "h3", "h4", "h5", "h6"):
            return html.unescape(_node_text(child)).strip()
    return None


def _reward_cell(node: dict) -> str | None:
    """The value cell of the `reward` row of a Reward section's table."""
    stack = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, dict):
            continue
        if n.get("tag") == "tr":
            cells = [c for c in n.get("children") or [] if isinstance(c, dict)]
            if len(cells) == 2 and _node_text(cells[0]).strip() == "reward":
                return _node_text(cells[1]).strip()
        stack.extend(n.get("children") or [])
    return None


def _message_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    parts = []
    for p in content:
        if isinstance(p, str):
            parts.append(p)
        elif isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
            parts.append(p["text"])
        elif isinstance(p, dict) and p.get("type") == "thinking" \
                and isinstance(p.get("thinking"), str):
            parts.append(p["thinking"])
    return "\n".join(parts)


def logtree_conversations(root: Path) -> list[dict[str, Any]]:
    """Every conversation of every readable logtree, in document order within its file:
    run_name, split, iteration, index (k-th conversation of the file), messages
    [(role, text)], and the `reward` cell of the Reward section that closes its trajectory
    unit inside a `Group Rollout` section (None outside one)."""
    out: list[dict[str, Any]] = []
    for run in run_dirs(root):
        for f in per_iteration_files(run):
            if not f.name.endswith("_logtree.json"):
                continue
            try:
                tree = json.loads(f.read_bytes().decode("utf-8"))
            except (ValueError, RecursionError):
                continue
            if not isinstance(tree, dict) or not isinstance(tree.get("root"), dict):
                continue
            split, iteration = _split_iteration(run, f)
            found: list[dict[str, Any]] = []
            pending: list[dict[str, Any]] = []

            def walk(node: Any) -> None:
                if not isinstance(node, dict):
                    return
                data = node.get("data")
                if isinstance(data, dict) and data.get("type") == "conversation":
                    conv = {"run_name": run_name(root, run), "split": split,
                            "iteration": iteration, "index": len(found), "reward": None,
                            "messages": [(m.get("role"), _message_text(m.get("content")))
                                         for m in data.get("messages") or []]}
                    found.append(conv)
                    pending.append(conv)
                if node.get("tag") == "section":
                    header = _header_of(node)
                    if header == "Group Rollout":
                        pending.clear()
                    elif header == "Reward":
                        cell = _reward_cell(node)
                        for conv in pending:
                            conv["reward"] = cell
                        pending.clear()
                for child in node.get("children") or []:
                    walk(child)

            walk(tree["root"])
            out += found
    return out


def rollout_rewards(root: Path) -> dict[tuple[str, str, int, int, int], float]:
    """(run_name, split, iteration, group_idx, traj_idx) → total_reward from rollout summaries."""
    out: dict[tuple[str, str, int, int, int], float] = {}
    for run in run_dirs(root):
        for f in per_iteration_files(run):
            if not f.name.endswith("_rollout_summaries.jsonl"):
                continue
            for _, o in complete_lines(f):
                if isinstance(o, dict):
                    out[(run_name(root, run), o["split"], o["iteration"], o["group_idx"],
                         o["traj_idx"])] = float(o["total_reward"])
    return out


def trace_slices(path: Path) -> list[tuple[str, float, float | None]]:
    """(name, B ts, E ts - B ts or None) of a trace written by ONE process (no resume).

    B and E pair by (pid, args.track, name), last in first out; an E with no open B is
    ignored; X events carry their own `dur`."""
    open_: dict[tuple, list[tuple[str, float]]] = defaultdict(list)
    out: list[tuple[str, float, float | None]] = []
    for _, o in complete_lines(path):
        if not isinstance(o, dict):
            continue
        args = o.get("args") if isinstance(o.get("args"), dict) else {}
        key = (o.get("pid"), args.get("track"), o.get("name"))
        if o.get("ph") == "B":
            open_[key].append((o["name"], float(o["ts"])))
        elif o.get("ph") == "E" and open_[key]:
            name, ts = open_[key].pop()
            out.append((name, ts, float(o["ts"]) - ts))
        elif o.get("ph") == "X":
            out.append((o["name"], float(o["ts"]), float(o["dur"])))
    out += [(name, ts, None) for stack in open_.values() for name, ts in stack]
    return sorted(out, key=lambda r: (r[1], r[0], -1 if r[2] is None else r[2]))


def trace_events(events: list[tuple[int, Any]]) -> tuple[list[dict], list[dict], list[int]]:
    """A whole trace file event by event, by the rules of the trace_slices docs (docs/schema.md,
    the trace normalizer's contract), resumes included: (the rows in the order the events
    complete them, the rows of the B's still open at the end, the lines warned about).

    Events pair B with E by (segment, pid, args.track, name), last in first out. A segment
    ends when a `process_name` event repeats a pid of the segment (the last B/E/X event, when
    it is a B of that pid, moves to the new segment) or a timestamp falls more than 1e6 below
    the segment's largest; the B's it leaves open become rows without a duration there. Depth:
    the B's open on (segment, pid, track) when a B or X arrives. A row's args are the B's (the
    E's added over them) without track and thread, as JSON text; its thread the B's, else the
    E's. Events with missing or wrongly typed fields are warned about and skipped, instants
    are skipped silently."""
    def num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def finite(v: Any) -> bool:
        try:
            return num(v) and math.isfinite(v)
        except OverflowError:
            return False

    def int64(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and -2 ** 63 <= v < 2 ** 63

    def label(v: Any) -> str | None:
        return None if v is None else v if isinstance(v, str) else json.dumps(v, default=str)

    def text(args: dict) -> str | None:
        return json.dumps(args, ensure_ascii=False) if args else None

    rows: list[dict] = []
    warned: list[int] = []
    segment, top, pids, opened, last_b = 0, None, set(), [], None

    def row(b: dict, end: float | None, e_args: dict | None) -> dict:
        args = {**b["args"], **{k: v for k, v in (e_args or {}).items()
                                if k not in ("track", "thread")}}
        thread = b["thread"] if b["thread"] is not None or e_args is None \
            else label(e_args.get("thread"))
        return {"name": b["name"], "start_us": b["ts"],
                "dur_us": None if end is None else end - b["ts"], "pid": b["pid"],
                "track": b["track"], "thread": thread, "args": text(args),
                "depth": b["depth"], "segment": b["segment"]}

    def new_segment() -> None:
        nonlocal segment, top, pids, opened, last_b
        rows.extend(row(b, None, None) for b in opened)
        segment, top, pids, opened, last_b = segment + 1, None, set(), [], None

    for line, ev in events:
        if not isinstance(ev, dict) or not isinstance(ev.get("ph"), str):
            warned.append(line)
            continue
        ph = ev["ph"]
        if ph in ("i", "I"):
            continue
        if ph == "M":
            if not (int64(ev.get("pid")) and int64(ev.get("tid"))):
                warned.append(line)
            elif ev.get("name") == "process_name":
                if ev["pid"] in pids:
                    move = last_b if last_b is not None and last_b["pid"] == ev["pid"] else None
                    if move is not None:
                        opened = [b for b in opened if b is not move]
                    new_segment()
                    if move is not None:
                        move = {**move, "depth": 0, "segment": segment}
                        opened.append(move)
                        top, last_b = move["ts"], move
                pids.add(ev["pid"])
            continue
        args = {} if ev.get("args") is None else ev.get("args", {})
        if ph not in ("B", "E", "X") or not isinstance(ev.get("name"), str) \
                or not int64(ev.get("pid")) or not finite(ev.get("ts")) \
                or not isinstance(args, dict) or (ph == "X" and not finite(ev.get("dur"))):
            warned.append(line)
            continue
        ts = float(ev["ts"])
        if top is not None and ts < top - 1e6:
            new_segment()
        top = ts if top is None else max(top, ts)
        track = label(args.get("track"))
        if ph == "E":
            last_b = None
            match = [b for b in opened if (b["pid"], b["track"], b["name"])
                     == (ev["pid"], track, ev["name"])]
            if not match:
                warned.append(line)
                continue
            opened = [b for b in opened if b is not match[-1]]
            rows.append(row(match[-1], ts, args))
            continue
        b = {"name": ev["name"], "pid": ev["pid"], "track": track, "ts": ts,
             "thread": label(args.get("thread")),
             "args": {k: v for k, v in args.items() if k not in ("track", "thread")},
             "depth": sum((o["pid"], o["track"]) == (ev["pid"], track) for o in opened),
             "segment": segment}
        if ph == "X":
            last_b = None
            rows.append(row(b, ts + float(ev["dur"]), None))
        else:
            opened.append(b)
            last_b = b
    return rows, [row(b, None, None) for b in opened], warned


# ---------------------------------------------------------------------------------------------
# Health checks (tests/health/test_checks.py): a rule evaluated over the live values of the files.
# Written from docs/checks.md, not from runstore's SQL: `optim/X` and `X` are one family
# (the prefixed write wins at a step that has both), NaN never compares true, a step is over
# when any of the rule's metrics is, streaks run over the steps that log the rule's metrics.

def rule_family(metric: str) -> tuple[str, ...]:
    """The keys a rule's metric reads, preferred first: `optim/X` and `X` for any X (one
    `optim/` taken off or put on; docs/checks.md, FORMATS.md)."""
    base = metric[len("optim/"):] if metric.startswith("optim/") and metric != "optim/" \
        else metric
    return "optim/" + base, base


_COMPARE = {">": lambda v, t: v > t, ">=": lambda v, t: v >= t,
            "<": lambda v, t: v < t, "<=": lambda v, t: v <= t}


def check_rule(root: Path, metrics: tuple[str, ...] | str, op: str, value: float, *,
               since_step: int | None = None, runs: str | None = None
               ) -> dict[str, dict[str, Any]]:
    """run_name → first_step, last_step, steps_over, longest_streak, peak, latest, for the
    runs where the rule fires. `runs` is a glob over run_name (`*` matches `/` too)."""
    import fnmatch

    if isinstance(metrics, str):
        metrics = (metrics,)
    families = []
    for m in metrics:
        if rule_family(m) not in families:
            families.append(rule_family(m))
    cmp = _COMPARE[op]
    pick_max = op in (">", ">=")
    out: dict[str, dict[str, Any]] = {}
    for run in run_dirs(root):
        name = run_name(root, run)
        if runs is not None and not fnmatch.fnmatchcase(name, runs):
            continue
        live = live_numbers(run)
        steps: dict[int, list[float]] = defaultdict(list)
        for step in sorted({s for s, _ in live}):
            if since_step is not None and step < since_step:
                continue
            for fam in families:
                for key in fam:  # preferred spelling first
                    if (step, key) in live:
                        steps[step].append(live[(step, key)])
                        break
        over_steps, streak, longest, extreme = [], 0, 0, []
        for step in sorted(steps):
            values = steps[step]
            over = any(not _isnan(v) and cmp(v, value) for v in values)
            streak = streak + 1 if over else 0
            longest = max(longest, streak)
            finite = [v for v in values if not _isnan(v)]
            step_value = (max(finite) if pick_max else min(finite)) if finite else float("nan")
            extreme.append(step_value)
            if over:
                over_steps.append((step, step_value))
        if not over_steps:
            continue
        peaks = [v for _, v in over_steps]
        out[name] = {
            "first_step": over_steps[0][0], "last_step": over_steps[-1][0],
            "steps_over": len(over_steps), "longest_streak": longest,
            "peak": max(peaks) if pick_max else min(peaks), "latest": extreme[-1],
        }
    return out


# ---------------------------------------------------------------------------------------------
# tinker-cookbook 0.6.1's other artifacts (issue 32), read again from the files: the token-level
# capture, eval stores, logs.log, the run's final cost and tokens. Same rule: no runstore import.

CAPTURE_COORDS = ("run_attempt", "iteration", "group_idx", "traj_idx")


def capture_files(run: Path) -> list[Path]:
    d = run / "capture"
    return sorted(p for p in d.iterdir() if p.is_file() and p.name.endswith(".jsonl")
                  and not p.name.startswith(".")) if d.is_dir() else []


def _int_coord(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and -2 ** 63 <= v < 2 ** 63:
        return v
    if isinstance(v, float) and v.is_integer() and -2 ** 63 <= v < 2 ** 63:
        return int(v)
    return None


def _int_list(v: Any) -> list[int] | None:
    ok = isinstance(v, list) and all(type(x) is int and -2 ** 63 <= x < 2 ** 63 for x in v)
    return v if ok else None


def _num_list(v: Any) -> list[float] | None:
    ok = isinstance(v, list) and all(_is_number(x) for x in v)
    return [float(x) for x in v] if ok else None


def capture_rows(run: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(samples, events) of a run's capture files: a `sample` record whose `samples` list
    holds an object is one sample row per object in it, every other object line one event."""
    samples, events = [], []
    for path in capture_files(run):
        for line, rec in complete_lines(path):
            if not isinstance(rec, dict):
                continue
            scope = rec.get("scope") if isinstance(rec.get("scope"), dict) else {}
            coords = {k: _int_coord(scope.get(k)) for k in CAPTURE_COORDS}
            coords.update({k: scope.get(k) if isinstance(scope.get(k), str) else None
                           for k in ("split", "purpose")})
            where = {"file": path.name, "seq": line, **coords}
            seqs = rec.get("samples")
            objects = [i for i, s in enumerate(seqs) if isinstance(s, dict)] \
                if isinstance(seqs, list) else []
            if rec.get("kind") == "sample" and objects:
                for i in objects:
                    s = seqs[i]
                    samples.append({**where, "sample_idx": i,
                                    "prompt_tokens": _int_list(rec.get("prompt_tokens")),
                                    "sampled_tokens": _int_list(s.get("tokens")),
                                    "logprobs": _num_list(s.get("logprobs")),
                                    "stop_reason": s.get("stop_reason")})
            else:
                events.append({**where, "kind": rec.get("kind"), "status": rec.get("status"),
                               "op": rec.get("op"), "record": rec})
    return samples, events


def eval_stores(root: Path) -> list[Path]:
    """Directories holding `runs.jsonl` and some `runs/<id>/metadata.json`: found while
    walking (not inside runs, whose `eval/` and `eval_store/` are looked at instead)."""
    def is_store(d: Path) -> bool:
        return (d / "runs.jsonl").is_file() and (d / "runs").is_dir() and any(
            (r / "metadata.json").is_file() for r in (d / "runs").iterdir() if r.is_dir())

    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if "config.json" in filenames or "metrics.jsonl" in filenames:
            found += [here / n for n in ("eval", "eval_store") if is_store(here / n)]
            dirnames[:] = []
            continue
        if is_store(here):
            found.append(here)
            dirnames[:] = [d for d in dirnames if d != "runs"]
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return sorted(found)


def _json_object(path: Path) -> dict | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def eval_store_rows(store: Path) -> dict[str, list[dict[str, Any]]]:
    """`eval_runs`, `eval_results`, `eval_trajectories` of one eval store, keyed by the
    directory names (eval run, benchmark) the files lie in."""
    out: dict[str, list[dict[str, Any]]] = {"eval_runs": [], "eval_results": [],
                                            "eval_trajectories": []}
    for run in sorted(p for p in (store / "runs").iterdir() if p.is_dir()):
        meta = _json_object(run / "metadata.json")
        if meta is not None:
            out["eval_runs"].append({"eval_run_id": run.name, **meta})
        for bench in sorted(p for p in run.iterdir() if p.is_dir()):
            result = _json_object(bench / "result.json")
            if result is not None:
                out["eval_results"].append({"eval_run_id": run.name, "benchmark": bench.name,
                                            **result})
            traj = bench / "trajectories.jsonl"
            if traj.is_file():
                out["eval_trajectories"] += [
                    {"eval_run_id": run.name, "benchmark": bench.name, "seq": line, **o}
                    for line, o in complete_lines(traj) if isinstance(o, dict)]
    return out


def log_lines(run: Path) -> list[str]:
    """The complete lines of a run's logs.log (without their newline)."""
    p = run / "logs.log"
    if not p.is_file():
        return []
    data = p.read_bytes()
    return [line.removesuffix("\r") for line in
            data[: data.rfind(b"\n") + 1].decode("utf-8", "replace").split("\n")[:-1]]


_COMMAND = re.compile(r"^\S+:\d+ \[[A-Z]+\] Command line invocation: (.*)$")
_RECORD = re.compile(r"^\S+:\d+ \[[A-Z]+\]")


def log_facts(run: Path) -> dict[str, Any]:
    """`command` (the first command line), `last_error` and `last_error_line` (the 1-based
    line of the record header its traceback follows, None when none), from the last
    traceback after the last command line that has an exception line (found by looking
    backwards from the end, unlike the ingest): a plain traceback's is the first unindented
    line after its indented frames; an exception group's (Python's framed
    `+ Exception Group Traceback` block) is the group's own line in its frame, then the lines
    of the first five sub-exceptions one frame further in, joined as `GROUP: SUB; SUB`, and
    `; N more` when there are more."""
    lines = log_lines(run)
    commands = [i for i, line in enumerate(lines) if _COMMAND.match(line)]
    command = _COMMAND.match(lines[commands[0]]).group(1) if commands else None  # type: ignore[union-attr]
    start = commands[-1] + 1 if commands else 0
    starts = [i for i in range(start, len(lines))
              if lines[i] == "Traceback (most recent call last):"
              or (_RECORD.match(lines[i]) and lines[i].endswith("] Traceback (most recent call last):"))]
    # Groups' frames: a group header opens one unless one is open (then it is nested in it);
    # a frame closes at the first record or line outside any frame.
    open_frame = False
    for i in range(start, len(lines)):
        framed = re.match(r"^ *[|+]", lines[i]) and not _RECORD.match(lines[i])
        if not framed:
            open_frame = False
        elif _GROUP_START.match(lines[i]) and not open_frame:
            starts.append(i)
            open_frame = True
    # Only a traceback an ERROR or CRITICAL record logged (or one before any record): one in
    # another record is text the run logged (a transcript, a warning of a retried call).
    first = commands[-1] if commands else 0
    starts = sorted(i for i in starts if _level_of(lines, i, first) in (None, "ERROR", "CRITICAL"))
    for at in reversed(starts):
        group = _GROUP_START.match(lines[at])
        error = (_group_error(lines, at, len(group.group(1))) if group
                 else _plain_error(lines, at))
        if error is not None:
            return {"command": command, "last_error": error, "last_error_line":
                    _record_of(lines, at, commands[-1] if commands else 0)}
    return {"command": command, "last_error": None, "last_error_line": None}


def _record_of(lines: list[str], at: int, start: int) -> int | None:
    """The 1-based line number of the record header the line at index `at` belongs to (the
    last one at or before it, from index `start` on); None when it has none."""
    return next((i + 1 for i in range(at, start - 1, -1) if _RECORD.match(lines[i])), None)


def _level_of(lines: list[str], at: int, start: int) -> str | None:
    """The level of the record the line at index `at` belongs to (None when it has none)."""
    at_record = _record_of(lines, at, start)
    return None if at_record is None else lines[at_record - 1].split(" [", 1)[1].split("]")[0]


def log_ends_in_error(run: Path) -> bool:
    """Whether the log's last record is the one holding the traceback of its last error (the
    record header it follows, `log_facts`' `last_error_line`, and no header after it)."""
    line = log_facts(run)["last_error_line"]
    headers = [i + 1 for i, text in enumerate(log_lines(run)) if _RECORD.match(text)]
    return line is not None and line == headers[-1]


_GROUP_START = re.compile(r"^( *)\+ Exception Group Traceback \(most recent call last\):$")
_NOT_ERRORS = ("During handling", "The above exception", "Traceback (most recent call last):",
               "Exception Group Traceback (most recent call last):")


def _plain_error(lines: list[str], at: int) -> str | None:
    for line in lines[at + 1:]:
        if _RECORD.match(line):
            return None  # cut short by the next record: no exception line
        if line and not line[0].isspace() and not line.startswith(("During handling",
                                                                     "The above exception")):
            return None if line == "Traceback (most recent call last):" else line
    return None


def _group_error(lines: list[str], at: int, margin: int) -> str | None:
    own: str | None = None
    subs: list[str] = []
    for line in lines[at + 1:]:
        if _RECORD.match(line) or not re.match(r"^ *[|+]", line):
            break  # the frame ends: a line outside any frame
        if line.startswith(" " * margin + "| ") and own is None:
            text = line[margin + 2:]
            if text and not text[0].isspace() and not text.startswith(_NOT_ERRORS):
                own = text
        elif own is not None and line.startswith(" " * (margin + 2) + "| "):
            text = line[margin + 4:]
            if text and not text[0].isspace() and not text.startswith(_NOT_ERRORS):
                subs.append(text)
    if own is None:
        return None
    named = subs[:5] + ([f"{len(subs) - 5} more"] if len(subs) > 5 else [])
    return own + (": " + "; ".join(named) if named else "")


TOTAL_KEYS = {"cost_usd": "cost/cumulative_usd", "tokens_sampled": "tokens/cumulative/sampled",
              "tokens_trained": "tokens/cumulative/trained"}


def run_totals(run: Path) -> dict[str, Any]:
    """The last numeric write of each cumulative key in metrics.jsonl (step-less rows too)."""
    last: dict[str, Any] = {}
    p = run / "metrics.jsonl"
    if p.is_file():
        for _, key, value, _ in metric_rows(p):
            if _is_number(value):
                last[key] = value
    out: dict[str, Any] = {}
    for column, key in TOTAL_KEYS.items():
        v = last.get(key)
        if column != "cost_usd" and v is not None:
            v = int(v) if float(v).is_integer() and abs(v) < 2 ** 63 else None
        out[column] = None if v is None else (float(v) if column == "cost_usd" else v)
    return out


def artifact_counts(root: Path) -> dict[str, int]:
    """Row counts of the tables issue 32 adds, for the runs and eval stores under `root`."""
    c: dict[str, int] = defaultdict(int)
    for run in run_dirs(root):
        c["run_logs"] += len(log_lines(run))
        samples, events = capture_rows(run)
        c["samples"] += len(samples)
        c["capture_events"] += len(events)
    for store in eval_stores(root):
        for table, rows in eval_store_rows(store).items():
            c[table] += len(rows)
    return dict(c)



# Agents' answers (tests/agents): a run's metric history, the time axis, smoothing.

def metric_series(run: Path, key: str) -> list[tuple[int, float]]:
    """(step, value) of the live numeric writes of `key`, in step order."""
    return sorted((s, v) for (s, k), v in live_numbers(run).items() if k == key)


def elapsed_times(run: Path) -> dict[int, float]:
    """step → wall seconds at which the run logged it: the sum of `time/total` over the steps
    after the run's first step with a finite `time/total`, up to and including it (steps
    without a finite duration have no time)."""
    durations = [(s, v) for s, v in metric_series(run, "time/total")
                 if v == v and v not in (float("inf"), float("-inf"))]
    out: dict[int, float] = {}
    total = 0.0
    for i, (step, d) in enumerate(durations):
        if i:
            total += d
        out[step] = total
    return out


def debiased_ema(values: list[float], weight: float) -> list[float | None]:
    """TensorBoard's smoothing written out: at point t, sum_i w^(k_t-k_i) x_i / sum_i
    w^(k_t-k_i) over the finite x_i up to t (k counts finite points); a non-finite point
    carries the previous value; None before the first finite point."""
    out: list[float | None] = []
    finite: list[float] = []
    for x in values:
        if x == x and x not in (float("inf"), float("-inf")):
            finite.append(x)
        if not finite:
            out.append(None)
            continue
        k = len(finite)
        weights = [weight ** (k - 1 - i) for i in range(k)]
        out.append(sum(w * v for w, v in zip(weights, finite)) / sum(weights))
    return out


def rollout_index(root: Path) -> dict[tuple[str, str, int], list[float]]:
    """(run_name, split, iteration) → the total rewards of its trajectories (rollout
    summaries), in file order."""
    out: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for (name, split, iteration, _, _), reward in rollout_rewards(root).items():
        out[(name, split, iteration)].append(reward)
    return dict(out)
