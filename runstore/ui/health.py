"""The Health page's answer: `kl_health`, every rule of `runstore check` and the doctor's
findings, flagged runs first.

Contract: `health(store)` returns a JSON-ready dict:

* `summary`: `CheckResult.summary()`, the line `runstore check` prints; `kl_threshold`: the
  store's setting (what `kl_health` uses; the KL rule of `check` may have its own threshold
  from runstore.toml, and says so in its name);
* `rules`: every rule `check` runs (chosen exactly as `runstore check` chooses them: the
  default KL rule, runstore.toml's `[[check.rule]]`s, threshold and trend, the store's
  setting), in `check`'s order, each with its `kind` (`threshold`, `drop`, `rise`,
  `stale`), `metrics` (as written), `smooth` (the EMA weight a drop/rise rule judges by,
  else null), `checked` and `fired` run counts;
* `firings`: one row per (run, rule) that fires, `check`'s columns (`run_name`, the run's
  label, `rule, first_step, last_step, steps_over, longest_streak, peak, latest, status`),
  `run_id`, plus
  `chart_keys`: the stored metric keys of the rule's families that this run logged (what a
  chart of the firing draws). A `stale` rule reads no metric: its chart is the Charts page's
  default panels (`DEFAULT_PANELS`: the reward and KL v1 families) in the spellings the run
  logged, else the first key (in key order) the run logged at its last logged step, so the
  chart shows where the run stopped (its row's `first_step`, `runs.last_step`);
* `kl_health`: the `kl_health` view, flagged runs first (then most steps over, then name),
  with `chart_keys` (the KL keys the run logged);
* `findings`: the doctor's (`doctor`): `summary` (its one line), `error` (why it could not
  run, else null), `n_checked` (findings evaluated) and `rows`, worst first, each with
  `run_name, finding, severity, first_step, last_step, evidence, to_try, statement` and
  `chart_keys`: the keys of the finding's chart (its `@chart` metrics, sql/doctor/) that the
  run logged;
* `runs`: every run (`run_id, run_name` (its label), `status, kl_flagged, rules, findings`),
  the runs that fire a rule or are KL-flagged first (most rules first), then those with a
  finding, then the others, by label. Runs are matched by `run_id` throughout: two runs that
  share a name never share a row.

* `n_runs`: the runs `check` looked at (every run of the store).

`fired_rules(answer)`: run_id -> names of the rules that fire for it, from a `health`
answer, for the Runs page. Read-only: `Store.check_result`, `Store.diagnosis`,
`Store.logged_keys` and plain queries through `Store.arrow`. A rule file `check` refuses
raises its `UsageError` (HTTP 400).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..families import KL_METRICS, family
from ..errors import RunstoreError
from ..present.charts.metrics import REWARD_KEY
from .answers import plain, tabular

if TYPE_CHECKING:
    from ..store import Store

KL_HEALTH = """
select run_label as run_name, * exclude (run_name, run_label)
from kl_health
order by flagged desc, steps_over desc, run_name, run_id
"""

# The Charts page's default panels (sent to the page as /api/status `default_metrics`): the
# reward and KL v1; also what a stale run's chart draws.
DEFAULT_PANELS = (REWARD_KEY, KL_METRICS[0])
STALE_CHART = DEFAULT_PANELS

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
select run_id, run_label as run_name, status
from run_status
order by run_label, run_id
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
        return float(rule.smoothing)
    return None


def diagnosis(store: "Store") -> Any:
    """The doctor's findings (`Store.diagnosis`, with runstore.toml's thresholds), or the
    `RunstoreError` that refused them (a runstore.toml the doctor refuses)."""
    try:
        return store.diagnosis()
    except RunstoreError as e:
        return e


def doctor(found: Any, logged: dict[str, Any]) -> dict[str, Any]:
    """The doctor's findings for the page: each row with `chart_keys`, the keys of its
    finding's chart (`@chart`) that its run logged, in the finding's order (each standing for
    its `optim/` family). A refusal (`found` is the error) leaves the findings empty and says
    why in `error`, so the page still shows."""
    if isinstance(found, RunstoreError):
        return {"summary": None, "error": str(found), "rows": [], "n_checked": 0}
    charts = {f.name: f.chart for f in found.findings}
    rows = []
    for r in found.rows:
        chart = [k for m in charts[r["finding"]] for k in family(m)
                 if r["run_id"] in logged.get(k, ())]
        rows.append(plain({**{c: r[c] for c in r if c != "facts"},
                           "chart_keys": chart}))
    return {"summary": found.summary(), "error": None, "rows": rows,
            "n_checked": len(found.findings)}


def health(store: "Store") -> dict[str, Any]:
    result = store.check_result()
    found = diagnosis(store)
    runs = store.arrow(RUNS).to_pylist()
    families = [_families(rule) for rule in result.rules]
    kl_keys = [k for m in KL_METRICS for k in family(m)]
    stale_fams = tuple(family(m) for m in STALE_CHART)
    doctor_keys = (set() if isinstance(found, RunstoreError) else
                   {k for f in found.findings for m in f.chart for k in family(m)})
    wanted = sorted({k for fams in families for keys in fams for k in keys} | set(kl_keys)
                    | {k for keys in stale_fams for k in keys} | doctor_keys)
    logged = store.logged_keys(wanted)
    findings = doctor(found, logged)

    def chart_keys(run_id: Any, fams: tuple[tuple[str, ...], ...]) -> list[str]:
        # Each family drawn by the spellings the run logged (usually one), in family order.
        return [k for keys in fams for k in keys if run_id in logged.get(k, ())]

    by_name = {rule.name: i for i, rule in enumerate(result.rules)}
    firings = tabular(result.table)
    firings["columns"] += ["run_id", "chart_keys"]
    firings["types"] += ["varchar", "list<string>"]
    rule_at = firings["columns"].index("rule")
    fired: dict[str, list[str]] = {}
    bare: list[list[Any]] = []  # stale rows whose run logs none of STALE_CHART
    for row, run_id in zip(firings["rows"], result.run_ids):
        i = by_name.get(row[rule_at])
        stale = i is not None and getattr(result.rules[i], "kind", None) == "stale"
        fams = stale_fams if stale else families[i] if i is not None else ()
        row += [run_id, chart_keys(run_id, fams)]
        if stale and not row[-1]:
            bare.append(row)
        fired.setdefault(run_id, []).append(row[rule_at])
    if bare:
        ids = sorted({row[-2] for row in bare})
        last = {r["run_id"]: r["key"] for r in store.arrow(LAST_STEP_KEY, {"ids": ids}).to_pylist()}
        for row in bare:
            key = last.get(row[-2])
            row[-1] = [key] if key else []

    kl = tabular(store.arrow(KL_HEALTH))
    kl["columns"].append("chart_keys")
    kl["types"].append("list<string>")
    kl_id_at = kl["columns"].index("run_id")
    flagged_at = kl["columns"].index("flagged")
    kl_flagged: dict[str, bool] = {}
    kl_fams = tuple(family(m) for m in KL_METRICS)
    for row in kl["rows"]:
        row.append(chart_keys(row[kl_id_at], kl_fams))
        kl_flagged[row[kl_id_at]] = bool(row[flagged_at])

    found: dict[str, list[str]] = {}
    for row in findings["rows"]:
        found.setdefault(row["run_id"], []).append(row["finding"])
    overview = [{"run_id": r["run_id"], "run_name": r["run_name"], "status": r["status"],
                 "kl_flagged": kl_flagged.get(r["run_id"]),
                 "rules": fired.get(r["run_id"], []),
                 "findings": found.get(r["run_id"], [])} for r in runs]
    overview.sort(key=lambda r: (not (r["rules"] or r["kl_flagged"]), -len(r["rules"]),
                                 not r["findings"], r["run_name"]))
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
        "findings": findings,
        "kl_health": kl,
        "runs": plain(overview),
    }


def fired_rules(answer: dict[str, Any]) -> dict[str, list[str]]:
    """run_id -> the rules firing for it, from a `health` answer."""
    return {r["run_id"]: r["rules"] for r in answer["runs"] if r["rules"]}
