"""Health: rules over live metrics, which runs break them, and watching live runs.

`rules.py` (what a rule is, the default KL rule, `--rule` text) → `config.py` (which rules:
runstore.toml, the store's setting, the caller's) → `evaluate.py` (one statement over
`metrics` and `kl_steps`; `runstore check`) → `watch.py` (`ingest --watch`: ingest, evaluate,
report each rule that starts firing once). Everything reads the store through
`query.reader.Reader`.
"""
