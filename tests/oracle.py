"""An independent reading of run trees, in plain Python, to check what the store holds.

Nothing here imports runstore: it re-derives, from the source files and FORMATS.md alone, how
many rows each table should get and what the live metrics are, so tests compare the store with
a second implementation rather than with itself.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

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


def _good_step(obj: dict) -> bool:
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
        if not isinstance(obj, dict) or not _good_step(obj):
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


def conversations_in(path: Path) -> int:
    try:
        tree = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError):
        return 0
    n = 0
    stack = [tree.get("root")] if isinstance(tree, dict) else []
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        data = node.get("data")
        if isinstance(data, dict) and data.get("type") == "conversation":
            n += 1
        children = node.get("children")
        if isinstance(children, list):
            stack.extend(children)
    return n


def expected_counts(root: Path) -> dict[str, int]:
    """Row counts per table for the runs under `root`."""
    c: dict[str, int] = defaultdict(int)
    for run in run_dirs(root):
        c["runs"] += 1
        for f in sorted(run.iterdir()):
            if f.name == "metrics.jsonl" or re.match(r"^metrics\.jsonl\.pre_resume_\d+$", f.name):
                c["metrics_raw"] += len(metric_rows(f))
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
    return dict(c)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj} if prefix else {}


def kind_of(config: dict) -> str:
    if "dpo_beta" in config:
        return "dpo"
    if "loss_fn" in config:
        return "rl"
    if "num_epochs" in config:
        return "sl"
    return "unknown"
