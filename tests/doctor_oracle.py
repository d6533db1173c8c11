"""Independent answers for `runstore doctor`, from the run files and docs/doctor.md's definitions.

Nothing here imports runstore: it builds on oracle.py's readers (live values: the last write of
a step in metrics.jsonl, no pre_resume copies; KL per step with the prefixed spelling first)
and analysis_oracle.py's debiased EMA, and computes each finding in plain Python, one
function per finding, each returning run_name -> `Verdict`. The SQL of sql/doctor/ is not read.

A `Verdict` says whether the finding fired, at which steps, with which numbers (the `facts`
the statement reports), or why the run could not be judged (`missing`, None when judged).
`near` lists the numbers a decision compared with a threshold: when one is within a rounding
error of it, two correct implementations may decide either way, and the tests skip the run.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import analysis_oracle as ao
import oracle

REWARD = "env/all/reward/total"
KL_FAMILIES = oracle.KL_FAMILIES
SEED_LIKE_NAMES = ("log_path", "log_dir", "wandb_name", "run_name", "session_name")


@dataclass
class Verdict:
    fired: bool = False
    first_step: int | None = None
    last_step: int | None = None
    missing: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    near: list[tuple[float, float]] = field(default_factory=list)  # (value, threshold)

    def borderline(self, rel: float = 1e-9) -> bool:
        return any(v is not None and t is not None and math.isfinite(v) and math.isfinite(t)
                   and abs(v - t) <= rel * max(1.0, abs(v), abs(t)) for v, t in self.near)


def missing(why: str) -> Verdict:
    return Verdict(missing=why)


# ---------------------------------------------------------------------------------------------
# Reading the files


def runs(root: Path) -> dict[str, Path]:
    return {oracle.run_name(root, r): r for r in oracle.run_dirs(root)}


def live(run: Path) -> dict[tuple[int, str], float]:
    """(step, key) -> the live write when it is a number (NaN and ±Infinity kept)."""
    return oracle.live_numbers(run)


def finite_series(values: dict[tuple[int, str], float], key: str) -> list[tuple[int, float]]:
    return sorted((s, v) for (s, k), v in values.items() if k == key and math.isfinite(v))


def logged_keys(run: Path, live_only: bool = True) -> set[str]:
    """Keys with a numeric write at a step (NaN counts) in the live file (all files when not
    `live_only`), superseded writes included: what the per-key summary counts."""
    out: set[str] = set()
    for f, is_live in ao.metric_files(run):
        if live_only and not is_live:
            continue
        for step, key, value, _ in oracle.metric_rows(f):
            if step is not None and ao.is_number(value):
                out.add(key)
    return out


def stored_keys(root: Path) -> set[str]:
    """Every key any run logs a number at a step for, in any file (a pre_resume copy too)."""
    return set().union(*(logged_keys(run, live_only=False) for run in oracle.run_dirs(root)))


def mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def tail(series: list[tuple[int, float]], window: int, over: Callable[[float], bool]
         ) -> tuple[float, int]:
    """(mean of the last `window` steps, the first step of the stretch over that runs into
    them): the stretch starts after the last step not over at or before the last step minus
    `window`, else at the first step."""
    last = series[-1][0]
    recent = mean([v for s, v in series if s > last - window])
    before = [s for s, v in series if s <= last - window and not over(v)]
    first = min(s for s, _ in series if not before or s > max(before))
    return recent, first  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# The findings (docs/doctor.md)


def kl_spike(root: Path, threshold: float = 0.01, window: int = 10) -> dict[str, Verdict]:
    kl = oracle.kl_steps(root, threshold)
    sweeps = _sweeps(root)
    out = {}
    for name in runs(root):
        steps = sorted(s for (n, s) in kl if n == name)
        if not steps:
            out[name] = missing("logs no KL")
            continue

        def over(v: float | None) -> bool:
            return v is not None and not math.isnan(v) and v > threshold

        rows = {s: kl[(name, s)] for s in steps}
        over_steps = [s for s in steps if over(rows[s]["v1"]) or over(rows[s]["v2"])]
        if not over_steps:  # (values as logged compare exactly alike everywhere: no `near`)
            out[name] = Verdict()
            continue
        last = steps[-1]
        values = [(v, -s, fam == "v1", fam, s) for s in over_steps for fam in ("v1", "v2")
                  if (v := rows[s][fam]) is not None and not math.isnan(v)]
        peak = max(values)
        lr, rank, n_rates = sweeps.get(name, (None, None, None))
        out[name] = Verdict(True, over_steps[0], over_steps[-1], facts={
            "peak": peak[0], "peak_step": peak[4], "family": f"kl_sample_train_{peak[3]}",
            "steps_over": len(over_steps),
            "recent_over": sum(1 for s in over_steps if s > last - window),
            "recent": sum(1 for s in steps if s > last - window),
            "learning_rate": lr, "lr_rank": rank, "sweep_rates": n_rates})
    return out


def is_seed_like(key: str) -> bool:
    last = key.rsplit(".", 1)[-1].lower()
    return last == "seed" or last.endswith("_seed") or last in SEED_LIKE_NAMES


def _sweeps(root: Path) -> dict[str, tuple[float | None, int | None, int | None]]:
    """run -> (learning rate, its rank among its sweep's distinct rates (1: largest), how many
    there are): a sweep is the runs whose config.json leaves are equal but for the learning
    rate and the seed-like keys."""
    prints: dict[str, str] = {}
    rates: dict[str, float] = {}
    for name, run in runs(root).items():
        cfg = ao.config(run)
        if not isinstance(cfg, dict):
            continue
        leaves = oracle.flatten(cfg)
        kept = {k: json.dumps(v) for k, v in leaves.items()
                if k != "learning_rate" and not is_seed_like(k)}
        if not kept:
            continue
        prints[name] = json.dumps(sorted(kept.items()))
        lr = cfg.get("learning_rate")
        if ao.is_number(lr):
            rates[name] = float(lr)
    out: dict[str, tuple[float | None, int | None, int | None]] = {}
    for name, fp in prints.items():
        if name not in rates:
            continue
        others = sorted({rates[o] for o, p in prints.items() if p == fp and o in rates},
                        reverse=True)
        out[name] = (rates[name], others.index(rates[name]) + 1, len(others))
    return out


def reward_stuck(root: Path, at_most: float = 0.0, window: int = 10) -> dict[str, Verdict]:
    rewards = oracle.rollout_rewards(root)
    out = {}
    for name, run in runs(root).items():
        series = finite_series(live(run), REWARD)
        if not series:
            out[name] = missing("logs no reward")
            continue
        if len(series) < window:
            out[name] = missing("too few")
            continue
        above = [s for s, v in series if v > at_most]
        stuck = [(s, v) for s, v in series if not above or s > max(above)]
        if len(stuck) < window:
            out[name] = Verdict()
            continue
        first, last = stuck[0][0], series[-1][0]
        trajs = [r for (n, split, it, _, _), r in rewards.items()
                 if n == name and split == "train" and first <= it <= last]
        out[name] = Verdict(True, first, last, facts={
            "stuck_steps": len(stuck), "mean": mean([v for _, v in stuck]),
            "lowest": min(v for _, v in stuck),
            "trajectories": len(trajs) or None,
            "earned_nothing": sum(1 for r in trajs if r <= at_most) if trajs else None})
    return out


def parse_errors(root: Path, threshold: float = 0.3, window: int = 10) -> dict[str, Verdict]:
    conversations = oracle.logtree_conversations(root)
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        logged = logged_keys(run)
        fmt = "env/all/format" if "env/all/format" in logged else "env/all/format_parse"
        shares = {f"1 - {fmt}": [(s, 1 - v) for s, v in finite_series(values, fmt)],
                  "env/all/stop/parse_error": finite_series(values, "env/all/stop/parse_error"),
                  "env/all/parse_error_masked": finite_series(values,
                                                              "env/all/parse_error_masked")}
        shares = {k: v for k, v in shares.items() if v}
        if not shares:
            out[name] = missing("logs no share")
            continue
        if max(len(v) for v in shares.values()) < window:
            out[name] = missing("too few")
            continue
        judged = {k: tail(v, window, lambda q: q > threshold) for k, v in shares.items()
                  if len(v) >= window}
        near = [(r, threshold) for r, _ in judged.values()]
        over = sorted((-r, k) for k, (r, _) in judged.items() if r > threshold)
        if not over:
            out[name] = Verdict(near=near)
            continue
        share = over[0][1]
        recent, first = judged[share]
        series = shares[share]
        last = series[-1][0]
        tools = [text for c in conversations if c["run_name"] == name and c["split"] == "train"
                 and first <= c["iteration"] <= last
                 for role, text in c["messages"] if role == "tool"]
        out[name] = Verdict(True, first, last, near=near, facts={
            "share": share, "recent": recent,
            "before": mean([q for s, q in series if s < first]),
            "tool_replies": len(tools) or None,
            "tool_errors": sum(1 for t in tools if (t or "").lower().startswith("error"))
            if tools else None})
    return out


def no_improvement(root: Path, min_steps: int = 20, part: float = 0.25,
                   t_min: float = 2.0) -> dict[str, Verdict]:
    out = {}
    for name, run in runs(root).items():
        logged = logged_keys(run)
        key = next((k for k in (REWARD, "train_mean_nll", "dpo_loss") if k in logged), None)
        if key is None:
            out[name] = missing("logs no objective")
            continue
        series = finite_series(live(run), key)
        n = len(series)
        xs = [float(s) for s, _ in series]
        ys = [v for _, v in series]
        if n < max(min_steps, 3) or len(set(xs)) < 2:
            out[name] = missing("too few")
            continue
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
        syy = sum((y - my) ** 2 for y in ys)
        slope = sxy / sxx
        var = max(syy - sxy * sxy / sxx, 0.0) / (n - 2) / sxx
        better = 1 if key == REWARD else -1
        if var > 0:
            t = better * slope / math.sqrt(var)
        else:
            t = math.copysign(math.inf, better * slope) if better * slope != 0 else 0.0
        near = [(t, t_min), (var, 0.0), (better * slope, 0.0)]
        if not t < t_min:
            out[name] = Verdict(near=near)
            continue
        first_s, last_s = series[0][0], series[-1][0]
        span = math.floor(part * (last_s - first_s))
        out[name] = Verdict(True, last_s - span, last_s, near=near, facts={
            "key": key, "n": n, "slope": slope, "t": t,
            "start_mean": mean([v for s, v in series if s <= first_s + span]),
            "end_mean": mean([v for s, v in series if s >= last_s - span])})
    return out


def drop_rule(series: list[tuple[int, float]], threshold: float, w: float
              ) -> dict[str, Any] | None:
    """The drop rule (docs/checks.md): the best smoothed value so far minus the smoothed
    value, over the rule's steps; None when it never exceeds `threshold`."""
    points = [(s, v) for s, v in series]
    smoothed = ao.ema([v for _, v in points], w)
    values, best = [], None
    for (s, v), sm in zip(points, smoothed):
        if math.isfinite(v):
            best = sm if best is None else max(best, sm)
        if best is None:
            continue
        values.append((s, best - sm if math.isfinite(v) else math.nan))
    over = [(s, v) for s, v in values if not math.isnan(v) and v > threshold]
    if not over:
        return None
    return {"first_step": over[0][0], "last_step": over[-1][0],
            "peak": max(v for _, v in over), "latest": values[-1][1],
            "values": [v for _, v in values]}


def numeric_series(values: dict[tuple[int, str], float], key: str) -> list[tuple[int, float]]:
    return sorted((s, v) for (s, k), v in values.items() if k == key)


def reward_collapse(root: Path, threshold: float = 0.2, smooth: float = 0.9
                    ) -> dict[str, Verdict]:
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        if not finite_series(values, REWARD):
            out[name] = missing("logs no reward")
            continue
        fired = drop_rule(numeric_series(values, REWARD), threshold, smooth)
        if fired is None:
            out[name] = Verdict()
            continue
        near = [(v, threshold) for v in fired["values"]]
        if not fired["latest"] > threshold:
            out[name] = Verdict(near=near)
            continue
        series = finite_series(values, REWARD)
        best = max(v for _, v in series)
        out[name] = Verdict(True, fired["first_step"], fired["last_step"], near=near, facts={
            "peak": fired["peak"], "latest": fired["latest"], "best": best,
            "best_step": min(s for s, v in series if v == best), "last_value": series[-1][1]})
    return out


def entropy_collapse(root: Path, fraction: float = 0.25, window: int = 10,
                     min_gain: float = 0.02) -> dict[str, Verdict]:
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        # Per step the `optim/` spelling's number when the step has one, else the older name's.
        merged = {s: v for (s, k), v in values.items() if k == "entropy"}
        merged.update({s: v for (s, k), v in values.items() if k == "optim/entropy"})
        series = sorted((s, v) for s, v in merged.items() if math.isfinite(v))
        rewards = finite_series(values, REWARD)
        if not series:
            out[name] = missing("logs no entropy")
            continue
        if not rewards:
            out[name] = missing("logs no reward")
            continue
        if len(series) < 2 * window:
            out[name] = missing("too few")
            continue
        first_s = series[0][0]
        start = mean([v for s, v in series if s < first_s + window])
        if not start > 0:
            out[name] = missing("starts at 0")
            continue
        qs = [(s, v / start) for s, v in series]
        recent, first = tail(qs, window, lambda q: q < fraction)
        near = [(recent, fraction)] + [(q, fraction) for _, q in qs]
        if not recent < fraction:
            out[name] = Verdict(near=near)
            continue
        after = mean([v for s, v in rewards if s >= first])
        before = mean([v for s, v in rewards if first - window <= s < first])
        if after is None or before is None:
            out[name] = Verdict(near=near)
            continue
        near.append((after - before, min_gain))
        if not after - before <= min_gain:
            out[name] = Verdict(near=near)
            continue
        out[name] = Verdict(True, first, series[-1][0], near=near, facts={
            "start": start, "recent": recent, "reward_after": after, "reward_before": before})
    return out


def length_at_limit(root: Path, near_max: float = 0.9, stop_share: float = 0.2,
                    growth: float = 3.0, window: int = 10) -> dict[str, Verdict]:
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        logged = logged_keys(run)
        ac_key = ("env/all/ac_tokens_per_turn" if "env/all/ac_tokens_per_turn" in logged
                  else "ac_tokens_per_turn")
        ac = finite_series(values, ac_key) if ac_key in logged else []
        stopped = finite_series(values, "env/all/stop/max_tokens")
        if not ac and not stopped:
            out[name] = missing("logs no lengths")
            continue
        cfg = ao.config(run) or {}
        budget = cfg.get("max_tokens")
        budget = float(budget) if ao.is_number(budget) and budget > 0 else None
        start = mean([v for s, v in ac if s < ac[0][0] + window]) if ac else None
        pressures, scale = {}, {}
        if budget is not None and ac:
            pressures["near"], scale["near"] = ac, budget * near_max
        if start is not None and start > 0:
            pressures["grown"], scale["grown"] = ac, start * growth
        if stopped:
            pressures["stopped"], scale["stopped"] = stopped, stop_share
        if max((len(v) for v in pressures.values()), default=0) < window:
            out[name] = missing("too few")
            continue
        # A pressure's recent mean is the mean of its values over its denominator; a value is
        # over when value / denominator > 1.
        judged = {}
        for k, v in pressures.items():
            if len(v) >= window:
                raw, first = tail(v, window, lambda x, d=scale[k]: x / d > 1)
                judged[k] = (raw / scale[k], first)
        near = [(r, 1.0) for r, _ in judged.values()]
        near += [(x / scale[k], 1.0) for k, v in pressures.items() for _, x in v]
        over = sorted((-r, k) for k, (r, _) in judged.items() if r > 1)
        if not over:
            out[name] = Verdict(near=near)
            continue
        which = over[0][1]
        recent, first = judged[which]
        out[name] = Verdict(True, first, pressures[which][-1][0], near=near,
                            facts={"pressure": which, "recent": recent, "max_tokens": budget,
                                   "start_ac": start})
    return out


def _tail_finding(root: Path, key: str, threshold: float, window: int,
                  transform: Callable[[float], float] = lambda v: v) -> dict[str, Verdict]:
    out = {}
    for name, run in runs(root).items():
        series = [(s, transform(v)) for s, v in finite_series(live(run), key)]
        if not series:
            out[name] = missing(f"logs no {key}")
            continue
        if len(series) < window:
            out[name] = missing("too few")
            continue
        recent, first = tail(series, window, lambda q: q > threshold)
        near = [(recent, threshold)]
        if not recent > threshold:
            out[name] = Verdict(near=near)
            continue
        out[name] = Verdict(True, first, series[-1][0], near=near, facts={"recent": recent})
    return out


def no_signal(root: Path, threshold: float = 0.9, window: int = 10) -> dict[str, Verdict]:
    return _tail_finding(root, "env/all/by_group/frac_mixed", threshold, window,
                         lambda v: 1 - v)


def stale_policy(root: Path, threshold: float = 2.0, window: int = 5) -> dict[str, Verdict]:
    return _tail_finding(root, "async/staleness_mean", threshold, window)


def summary_statuses(run: Path) -> list[tuple[int, str, str | None]]:
    """(iteration, status, error_type) of each training trajectory of a run's rollout
    summaries that says its status (newer tinker-cookbook versions)."""
    out = []
    for f in oracle.per_iteration_files(run):
        if not f.name.endswith("_rollout_summaries.jsonl"):
            continue
        for _, o in oracle.complete_lines(f):
            if isinstance(o, dict) and o.get("split") == "train" \
                    and isinstance(o.get("status"), str):
                kind = o.get("error_type")
                out.append((o["iteration"], o["status"], kind if isinstance(kind, str) else None))
    return out


def rollout_errors(root: Path, threshold: float = 0.05) -> dict[str, Verdict]:
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        counted = finite_series(values, "rollout_errors/total")
        episodes = finite_series(values, "env/all/total_episodes")
        stops = (finite_series(values, "env/all/stop/context_overflow")
                 + finite_series(values, "env/all/stop/rollout_timeout"))
        statuses = summary_statuses(run)
        bad = [(it, kind or status) for it, status, kind in statuses if status != "ok"]
        if not counted and not episodes and not stops and not statuses:
            out[name] = missing("logs none")
            continue
        failed = max((v for _, v in counted), default=None)
        total_episodes = sum(v for _, v in episodes)
        failed_share = failed / (total_episodes + failed) if failed and failed > 0 else None
        stop_share = (sum(v for _, v in stops) / len(episodes)) if episodes else None
        summary_share = len(bad) / len(statuses) if statuses else None
        near = [(failed_share, threshold), (stop_share, threshold), (summary_share, threshold)]
        if not any(x is not None and x > threshold
                   for x in (failed_share, stop_share, summary_share)):
            out[name] = Verdict(near=near)
            continue
        firsts = ([s for s, v in counted if v > 0] + [s for s, v in stops if v > 0]
                  + [it for it, _ in bad])
        lasts = [s for s, v in stops if v > 0] + [it for it, _ in bad]
        if failed and failed > 0:
            lasts.append(min(s for s, v in counted if v == failed))
        out[name] = Verdict(True, min(firsts) if firsts else None,
                            max(lasts) if lasts else None, near=near,
                            facts={"failed": failed, "failed_share": failed_share,
                                   "stop_share": stop_share,
                                   "summarized": len(statuses) or None,
                                   "summary_failed": len(bad) if statuses else None,
                                   "summary_share": summary_share})
    return out


def rise_rule(series: list[tuple[int, float]], threshold: float, w: float,
              history: int = 10) -> dict[str, Any] | None:
    """The rise rule (docs/checks.md): the smoothed value over the median of the earlier raw
    finite values, from the first step with `history` of them; None when never over."""
    smoothed = ao.ema([v for _, v in series], w)
    values = []
    for i, ((s, v), sm) in enumerate(zip(series, smoothed)):
        earlier = [x for _, x in series[:i] if math.isfinite(x)]
        if len(earlier) < history:
            continue
        m = statistics.median(earlier)
        values.append((s, sm / m if math.isfinite(v) and m > 0 else math.nan))
    over = [(s, v) for s, v in values if not math.isnan(v) and v > threshold]
    if not over:
        return None
    return {"first_step": over[0][0], "last_step": over[-1][0], "peak": max(v for _, v in over),
            "latest": values[-1][1], "values": [v for _, v in values]}


def slow_steps(root: Path, threshold: float = 2.0, smooth: float = 0.9) -> dict[str, Verdict]:
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        times = finite_series(values, "time/total")
        if not times:
            out[name] = missing("logs no time/total")
            continue
        if len(times) < 11:
            out[name] = missing("too few")
            continue
        fired = rise_rule(numeric_series(values, "time/total"), threshold, smooth)
        if fired is None:
            out[name] = Verdict()
            continue
        first = fired["first_step"]
        spans = oracle.live_spans(run)
        per_name: dict[str, dict[str, list[Any]]] = {}
        for step, items in spans.items():
            for span in oracle.top_level(items):
                side = "after" if step >= first else "before"
                entry = per_name.setdefault(span["name"], {"before": [], "after": []})
                entry[side].append((step, float(span["duration"])))
        grown = []
        for span_name, sides in per_name.items():
            if sides["before"] and sides["after"]:
                b = sum(d for _, d in sides["before"]) / len({s for s, _ in sides["before"]})
                a = sum(d for _, d in sides["after"]) / len({s for s, _ in sides["after"]})
                grown.append((a - b, span_name))
        out[name] = Verdict(True, first, fired["last_step"],
                            near=[(v, threshold) for v in fired["values"]],
                            facts={"peak": fired["peak"], "latest": fired["latest"],
                                   "span": max(grown)[1] if grown else None})
    return out


def crashed(root: Path, minutes: float = 60.0, now: float | None = None) -> dict[str, Verdict]:
    """Not completed (no final checkpoint, no live `progress/done_frac` of at least 1), and
    either every source file older than `minutes` (as of `now`, epoch seconds), or logs.log's
    last record the one holding its last error's traceback (oracle.log_ends_in_error) and
    every source file older than two minutes by the clock (not running). The facts add the
    last error logs.log shows (oracle.log_facts: read backwards from the end), whether the
    log ends in it, and the name of the last record of checkpoints.jsonl (None when it has
    none, or no file)."""
    import time

    clock = time.time()
    now = clock if now is None else now
    checkpoints = oracle.latest_checkpoints(root)
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        done = [v for (s, k), v in values.items()
                if k == "progress/done_frac" and not math.isnan(v)]
        newest = max(p.stat().st_mtime for p in run.rglob("*") if p.is_file())
        age = (now - newest) / 60
        completed = oracle.has_final_checkpoint(run) or (done and max(done) >= 1)
        ends_in_error = oracle.log_ends_in_error(run)
        ended = ends_in_error and clock - newest > 120
        if completed or not (age > minutes or ended):
            out[name] = Verdict(near=[(age, minutes)])
            continue
        last = max((s for s, _ in oracle.live_metrics(run)), default=None)
        out[name] = Verdict(True, last, last, near=[(age, minutes)],
                            facts={"done_frac": max(done) if done else None,
                                   "last_error": oracle.log_facts(run)["last_error"],
                                   "log_ends_in_error": ends_in_error,
                                   "last_checkpoint": checkpoints.get(name, {}).get(
                                       "latest_name")})
    return out


WATCHED = re.compile(r"(loss|nll|reward/total)$|(^|/)grad(ient)?(_norm)?(/|$)")


def not_finite(root: Path) -> dict[str, Verdict]:
    watched = {k for k in stored_keys(root) if WATCHED.search(k)}
    kl = oracle.kl_steps(root)
    out = {}
    for name, run in runs(root).items():
        bad = []
        for (s, k), v in live(run).items():
            if k in watched and not math.isfinite(v):
                bad.append((s, k, v))
        for (n, s), row in kl.items():
            if n == name:
                for fam in ("v1", "v2"):
                    v = row[fam]
                    if v is not None and not math.isfinite(v):
                        bad.append((s, f"kl_sample_train_{fam}", v))
        has_kl = any(n == name for n, _ in kl)
        if not bad:
            logged = logged_keys(run, live_only=False)
            out[name] = Verdict() if (logged & watched or has_kl) else missing("logs none")
            continue
        steps = [s for s, _, _ in bad]
        out[name] = Verdict(True, min(steps), max(steps), facts={"values": len(bad)})
    return out


EVALUATOR = re.compile(r"^[^/]+/env/all/reward/total$")


def _welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """(mean(b) - mean(a), Welch's t; a one-value side has variance 0)."""
    change = statistics.fmean(b) - statistics.fmean(a)
    va = statistics.variance(a) if len(a) > 1 else 0.0
    vb = statistics.variance(b) if len(b) > 1 else 0.0
    se = math.sqrt(va / len(a) + vb / len(b))
    if se > 0:
        return change, change / se
    return change, (math.copysign(math.inf, change) if change else 0.0)


def eval_gap(root: Path, min_evals: int = 6, margin: float = 0.05,
             t_min: float = 2.0) -> dict[str, Verdict]:
    keys = sorted(k for k in stored_keys(root) if EVALUATOR.search(k))
    out = {}
    for name, run in runs(root).items():
        values = live(run)
        train = finite_series(values, REWARD)
        evals = {k: finite_series(values, k) for k in keys}
        evals = {k: v for k, v in evals.items() if v}
        if not evals:
            out[name] = missing("logs no evaluator")
            continue
        tested, near = [], []
        for key, series in evals.items():
            if len(series) < min_evals:
                continue
            twice_middle = series[0][0] + series[-1][0]  # exact, as Python ints are
            first = [(s, v) for s, v in series if 2 * s < twice_middle]
            last = [(s, v) for s, v in series if 2 * s > twice_middle]
            if not first or not last:
                continue
            t_first = [v for s, v in train if first[0][0] <= s <= first[-1][0]]
            t_last = [v for s, v in train if last[0][0] <= s <= last[-1][0]]
            if not t_first or not t_last:
                continue
            e_change, e_t = _welch([v for _, v in first], [v for _, v in last])
            t_change, t_t = _welch(t_first, t_last)
            near += [(e_change, -margin), (t_change, margin), (e_t, -t_min), (t_t, t_min)]
            tested.append((e_change, key, e_t, t_change, t_t, last[0][0], last[-1][0]))
        if not tested:
            out[name] = missing("no evaluator judged")
            continue
        fell = sorted(x for x in tested if x[3] > margin and x[4] >= t_min
                      and x[0] < -margin and x[2] <= -t_min)
        if not fell:
            out[name] = Verdict(near=near)
            continue
        e_change, key, e_t, t_change, t_t, first_step, last_step = fell[0]
        out[name] = Verdict(True, first_step, last_step, near=near, facts={
            "evaluator": key, "eval_change": e_change, "eval_t": e_t,
            "train_change": t_change, "train_t": t_t})
    return out


FINDINGS: dict[str, Callable[..., dict[str, Verdict]]] = {
    "kl_spike": kl_spike, "reward_stuck": reward_stuck, "parse_errors": parse_errors,
    "no_improvement": no_improvement, "reward_collapse": reward_collapse,
    "entropy_collapse": entropy_collapse, "length_at_limit": length_at_limit,
    "no_signal": no_signal, "rollout_errors": rollout_errors, "stale_policy": stale_policy,
    "slow_steps": slow_steps, "crashed": crashed, "not_finite": not_finite,
    "eval_gap": eval_gap}


def fired(root: Path, params: dict[str, dict[str, Any]] | None = None,
          off: tuple[str, ...] | frozenset[str] = (), strict: bool = True
          ) -> dict[tuple[str, str], Verdict]:
    """(run, finding) -> the oracle's verdict for every finding that fires on the tree (each
    finding with its `params[name]`, if any; those in `off` left out). A borderline verdict
    (a number within a rounding error of its threshold) is an error here when `strict`: a
    test that reads the whole tree's answer must not depend on a coin toss. (Not strict: for
    trees whose borderline numbers are exact, such as a reward of exactly 0 at every step,
    whose trend is exactly 0.)"""
    out = {}
    for name, finding in FINDINGS.items():
        if name in off:
            continue
        for run, verdict in finding(root, **(params or {}).get(name, {})).items():
            assert not (strict and verdict.borderline()), (name, run, verdict)
            if verdict.fired:
                out[(run, name)] = verdict
    return out
