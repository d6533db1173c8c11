"""The Health page's answer: `kl_health` and every rule of `runstore check`, flagged runs first.

Contract: `health(store)` returns a JSON-ready dict:

* `summary`: `CheckResult.summary()`, the line `runstore check` prints; `kl_threshold`: the
  store's setting (what `kl_health` uses; the KL rule of `check` may have its own threshold
  from runstore.toml, and says so in its name);
* `rules`: every rule `check` runs (chosen exactly as `runstore check` chooses them: the
  default KL rule, runstore.toml's `[[check.rule]]`s, threshold and trend, the store's
  setting), in `check`'s order, each with its `kind` (`threshold`, `drop`, `rise`,
  `stale`), `metrics` (as written), `smooth` (the EMA weight a drop/rise rule judges by,
  else null), `checked` and `fired` run counts;
* `firings`: one row per (run, rule) that fires, `check`'s columns (`run_name, rule,
  first_step, last_step, steps_over, longest_streak, peak, latest, status`) plus
  `chart_keys`: the stored metric keys of the rule's families that this run logged (what a
  chart of the firing draws). A `stale` rule reads no metric: its chart is the Charts page's
  default panels (`STALE_CHART`: the reward and KL v1 families) in the spellings the run
  logged, else the first key (in key order) the run logged at its last logged step, so the
  chart shows where the run stopped (its row's `first_step`, `runs.last_step`);
* `kl_health`: the `kl_health` view, flagged runs first (then most steps over, then name),
  with `chart_keys` (the KL keys the run logged);
* `runs`: every run (`run_name, status, kl_flagged, rules`), the runs that fire a rule or
  are KL-flagged first (most rules first), then the others by name.

* `n_runs`: the runs `check` looked at (every run of the store).

`fired_rules(answer)`: run name -> names of the rules that fire for it, from a `health`
answer, for the Runs page. Read-only: `check`, `keys.logged_keys` and plain queries through
`Store.arrow`. A rule file `check` refuses raises its `UsageError` (HTTP 400).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..query.keys import family, logged_keys
from .answers import plain, tabular

if TYPE_CHECKING:
    from ..store import Store

KL_HEALTH = """
select * exclude (run_id)
from kl_health
order by flagged desc, steps_over desc, run_name
"""

# The Charts page's default panels (charts.js DEFAULT_METRICS): what a stale run's chart draws.
STALE_CHART = ("env/all/reward/total", "optim/kl_sample_train_v1")

# Per run: the first key (in key order) of its live metrics at its last logged step.
LAST_STEP_KEY = """
select m.run_id, min(m.key) as key
from metrics as m
join (select run_id, max(step) as step from metrics
      where list_contains($ids, run_id) group by run_id) as l
  on l.run_id = m.run_id and l.step = m.step
group by m.run_id
"""

RUNS = """
select r.run_id, r.run_name, s.status
from runs as r
left join run_status as s on s.run_id = r.run_id
order by r.run_name
"""


def _families(rule: Any) -> tuple[tuple[str, ...], ...]:
    """The metric families a rule reads (none for a rule about something else)."""
    families = getattr(rule, "families", None)
    if families is not None:
        return tuple(families)
    metric = getattr(rule, "metric", None)  # a trend rule names one metric, or none (stale)
    return (family(metric),) if metric else ()


def _metrics(rule: Any) -> list[str]:
    metrics = getattr(rule, "metrics", None)
    if metrics is not None:
        return list(metrics)
    metric = getattr(rule, "metric", None)
    return [metric] if metric else []


def _smooth(rule: Any) -> float | None:
    """The smoothing weight a trend rule judges by (its chart shows that smoothing)."""
    if getattr(rule, "kind", None) in ("drop", "rise"):
        from ..health.trends import DEFAULT_WEIGHT

        return rule.weight if rule.weight is not None else DEFAULT_WEIGHT
    return None


def health(store: "Store") -> dict[str, Any]:
    from ..health.evaluate import check
    from ..health.rules import KL_METRICS

    result = check(store)
    runs = store.arrow(RUNS).to_pylist()
    id_of = {r["run_name"]: r["run_id"] for r in runs}
    families = [_families(rule) for rule in result.rules]
    kl_keys = [k for m in KL_METRICS for k in family(m)]
    stale_fams = tuple(family(m) for m in STALE_CHART)
    wanted = sorted({k for fams in families for keys in fams for k in keys} | set(kl_keys)
                    | {k for keys in stale_fams for k in keys})
    logged = logged_keys(store, wanted)

    def chart_keys(run_id: Any, fams: tuple[tuple[str, ...], ...]) -> list[str]:
        # Each family drawn by the spellings the run logged (usually one), in family order.
        return [k for keys in fams for k in keys if run_id in logged.get(k, ())]

    by_name = {rule.name: i for i, rule in enumerate(result.rules)}
    firings = tabular(result.table)
    firings["columns"].append("chart_keys")
    firings["types"].append("list<string>")
    name_at, rule_at = firings["columns"].index("run_name"), firings["columns"].index("rule")
    fired: dict[str, list[str]] = {}
    bare: list[list[Any]] = []  # stale rows whose run logs none of STALE_CHART
    for row in firings["rows"]:
        i = by_name.get(row[rule_at])
        stale = i is not None and getattr(result.rules[i], "kind", None) == "stale"
        fams = stale_fams if stale else families[i] if i is not None else ()
        row.append(chart_keys(id_of.get(row[name_at]), fams))
        if stale and not row[-1]:
            bare.append(row)
        fired.setdefault(row[name_at], []).append(row[rule_at])
    if bare:
        ids = sorted({id_of[row[name_at]] for row in bare if row[name_at] in id_of})
        last = {r["run_id"]: r["key"] for r in store.arrow(LAST_STEP_KEY, {"ids": ids}).to_pylist()}
        for row in bare:
            key = last.get(id_of.get(row[name_at]))
            row[-1] = [key] if key else []

    kl = tabular(store.arrow(KL_HEALTH))
    kl["columns"].append("chart_keys")
    kl["types"].append("list<string>")
    kl_name_at = kl["columns"].index("run_name")
    flagged_at = kl["columns"].index("flagged")
    kl_flagged: dict[str, bool] = {}
    kl_fams = tuple(family(m) for m in KL_METRICS)
    for row in kl["rows"]:
        row.append(chart_keys(id_of.get(row[kl_name_at]), kl_fams))
        kl_flagged[row[kl_name_at]] = bool(row[flagged_at])

    overview = [{"run_name": r["run_name"], "status": r["status"],
                 "kl_flagged": kl_flagged.get(r["run_name"]),
                 "rules": fired.get(r["run_name"], [])} for r in runs]
    overview.sort(key=lambda r: (not (r["rules"] or r["kl_flagged"]), -len(r["rules"]),
                                 r["run_name"]))
    settings = store.settings()
    return {
        "summary": result.summary(),
        "kl_threshold": plain(settings.get("kl_threshold")),
        "rules": [{"rule": rule.name, "kind": getattr(rule, "kind", "threshold"),
                   "metrics": _metrics(rule), "smooth": _smooth(rule),
                   "checked": result.checked[i], "fired": result.fired[i]}
                  for i, rule in enumerate(result.rules)],
        "n_runs": result.runs,
        "firings": firings,
        "kl_health": kl,
        "runs": plain(overview),
    }


def fired_rules(answer: dict[str, Any]) -> dict[str, list[str]]:
    """Run name -> the rules firing for it, from a `health` answer."""
    return {r["run_name"]: r["rules"] for r in answer["runs"] if r["rules"]}
