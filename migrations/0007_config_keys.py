"""Rewrite the `config` table's keys, recomputed from `runs.config`, so that a key part holding a dot (or a comma, a quote, spaces at its ends) is quoted and `{"a.b": 1}` no longer reads as `{"a": {"b": 1}}`."""

# Frozen as they were at schema version 7 (runstore/storage/schema.py may add more columns,
# runstore/ingest/normalize/config.py may change how it flattens): this migration imports
# nothing of runstore, so what it does never changes with the live code.
CONFIG_COLUMNS = [("run_id", "string"), ("key", "string"), ("value", "string"),
                  ("value_num", "float64"), ("value_str", "string"), ("source_id", "int64")]
RUN_COLUMNS = [("run_id", "string"), ("config", "string")]


def migrate(ctx):
    files = ctx.table_files("config")
    if not files:
        return

    def rows(ctx):
        import pyarrow as pa

        stored = pa.concat_tables([ctx.read_file(f, CONFIG_COLUMNS) for f in files])
        runs = [ctx.read_file(f, RUN_COLUMNS) for f in ctx.table_files("runs")]
        configs = {}
        for part in runs:
            for run_id, text in zip(part.column("run_id").to_pylist(),
                                    part.column("config").to_pylist()):
                configs[run_id] = text
        by_run = {}  # run_id -> its stored rows, in order
        for row in stored.to_pylist():
            by_run.setdefault(row["run_id"], []).append(row)
        out = []
        for run_id, old in by_run.items():
            cfg = _load(configs.get(run_id))
            if cfg is None:  # no config text to read the keys from again: keep the rows
                out.extend(old)
                continue
            source_id = old[0]["source_id"]
            for key, leaf in _flatten(cfg):
                out.append({"run_id": run_id, "key": _clean(key), "value": _json_text(leaf),
                            "value_num": _num(leaf),
                            "value_str": _clean(leaf) if isinstance(leaf, str) else None,
                            "source_id": source_id})
        schema = pa.schema([(name, pa.string() if typ == "string" else
                             pa.float64() if typ == "float64" else pa.int64())
                            for name, typ in CONFIG_COLUMNS])
        return pa.Table.from_pylist(out, schema=schema)

    ctx.rewrite_table("config", rows)


def _load(text):
    import json

    if not text:
        return None
    try:
        cfg = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return cfg if isinstance(cfg, dict) else None


def _part(name):
    import json
    import re

    if name and name == name.strip() and not name.startswith('"') \
            and not re.search(r"[.,\x00-\x1f\x7f]", name):
        return name
    return json.dumps(name, ensure_ascii=False)


def _flatten(cfg):
    out = []
    stack = [("", iter(cfg.items()))]
    while stack:
        prefix, items = stack[-1]
        for key, value in items:
            path = f"{prefix}{_part(key)}"
            if isinstance(value, dict):
                if value:
                    stack.append((path + ".", iter(value.items())))
                    break
                out.append((path, value))
            else:
                out.append((path, value))
        else:
            stack.pop()
    return out


def _clean(text):
    import re

    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return re.sub("[\ud800-\udfff]", "\ufffd", text)


def _json_text(value):
    import json

    return _clean(json.dumps(value, ensure_ascii=False, allow_nan=True))


def _num(value):
    import math

    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return None
