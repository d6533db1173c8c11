"""Health: rules over live metrics, which runs break them, watching live runs, notifications.

`grammar.py` (rule text: one scanner) → `rules.py` (what a rule is: threshold and trend
rules, the default KL rule, `parse_rule`) → `config.py` (which rules: runstore.toml against
one schema, the store's setting, the caller's) → `evaluate.py` (one statement over `metrics`
and `metric_kl`; `runstore check`) and `trends.py` (drop, rise, stale) → `watch.py`
(`ingest --watch`: ingest, evaluate, report each firing once) → `notify.py` (webhooks; what
was posted is kept in the store by `notified.py`, URLs checked by `urls.py`). `firing.py` is
the row every rule reports and the `Alert` a firing is. Everything reads the store through
`query.reader.Reader`; imports inside the package go one way (no cycle: an import-linter
contract).
"""
