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
  chart of the firing draws; empty for a rule that reads no metric);
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
    wanted = sorted({k for fams in families for keys in fams for k in keys} | set(kl_keys))
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
    for row in firings["rows"]:
        fams = families[by_name[row[rule_at]]] if row[rule_at] in by_name else ()
        row.append(chart_keys(id_of.get(row[name_at]), fams))
        fired.setdefault(row[name_at], []).append(row[rule_at])

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
