"""config.json → `config` rows (one per flattened leaf) and the config fields of the `runs` row.

Contract:

* `normalize(data, ctx) -> {"config": rows}`. `data` is the raw bytes of `config.json`. Nested
  objects are flattened into dotted keys (`dataset_builder.group_size`); a list is one leaf; an
  empty object is one leaf whose value is `{}`. A key is unambiguous: each part is written as
  it is (`key_part`) unless that could be misread — it is empty, holds a `.` or a `,` or a
  control character, begins with `"`, or begins or ends with whitespace — and then it is
  written as a JSON string (`{"a.b": 1}` gives `"a.b"`, `{"a": {"b": 2}}` gives `a.b`).
  `flat_key(parts)` writes a key, `split_key(key)` reads its parts back, and
  `split_keys(text)` reads a comma-separated list of keys as typed (`--group-by`), a comma
  inside a quoted part belonging to it. Per leaf: `value` is the leaf as JSON text
  (`NaN`/`Infinity` kept as the bare tokens Python writes), `value_num` the leaf as a float when it
  is a number (an integer as the nearest double, ±inf past the largest) or a boolean
  (1.0/0.0), `value_str` the leaf when it is a string.
* `summarize(data, ctx) -> {"config_json", "kind", "model_name", "learning_rate"}` gives the
  `runs` columns derived from the config. `config_json` is the whole object re-serialised compactly
  (the file is indented; 80% of its bytes are whitespace).
* `infer_kind(cfg) -> "rl" | "sl" | "dpo" | "unknown"` (see its docstring for the rule).
* Bad input (empty, cut, not JSON, not an object) is reported once with `ctx.warn(None, ...)`;
  `normalize` then returns no rows and `summarize` returns `None` for everything but `kind`,
  which is `"unknown"` (the column's documented vocabulary has no null).
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from ...errors import UsageError
from .. import parse as jsonl
from .base import Batch, Context, Output, clean_str as _clean_str, json_text as _json_text, to_float

__all__ = ["Config", "normalize", "summarize", "infer_kind", "flatten", "load", "flat_key",
           "key_part", "split_key", "split_keys"]


def load(data: bytes, ctx: Context) -> dict | None:
    """Parse config.json bytes; warn and return None unless it is one JSON object."""
    if not data or not data.strip():
        ctx.warn(None, "config.json is empty")
        return None
    try:
        # Stdlib json accepts the bare NaN/Infinity tokens Python writes, and detects UTF-8/16/32.
        cfg = jsonl.loads(data)  # json.loads, with a bound on nesting
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        ctx.warn(None, f"config.json is not valid JSON ({exc.__class__.__name__}: {exc})")
        return None
    if not isinstance(cfg, dict):
        ctx.warn(None, f"config.json holds a JSON {type(cfg).__name__}, not an object")
        return None
    return cfg


def flatten(cfg: dict) -> list[tuple[str, Any]]:
    """(flattened key, leaf) pairs in document order (keys as `flat_key` writes them).
    Iterative, so absurd nesting cannot recurse out."""
    out: list[tuple[str, Any]] = []
    # Stack of (prefix, iterator over the dict's items); an explicit stack keeps document order.
    stack: list[tuple[str, Any]] = [("", iter(cfg.items()))]
    while stack:
        prefix, items = stack[-1]
        for key, value in items:
            path = f"{prefix}{key_part(key)}"
            if isinstance(value, dict):
                if value:
                    stack.append((path + ".", iter(value.items())))
                    break  # descend now; the parent iterator resumes afterwards
                out.append((path, value))  # empty object: one leaf `{}`
            else:
                out.append((path, value))
        else:
            stack.pop()
    return out


def key_part(name: str) -> str:
    """One part of a flattened key: `name` as it is, or as a JSON string when it could be
    misread (see the module docstring).

    >>> key_part("group_size"), key_part("a.b"), key_part(""), key_part(' x')
    ('group_size', '"a.b"', '""', '" x"')
    >>> print(key_part('"quoted"'), key_part('say "hi"'), key_part("a,b"))
    "\\"quoted\\"" say "hi" "a,b"
    """
    if name and name == name.strip() and not name.startswith('"') \
            and not _MISREAD.search(name):
        return name
    return json.dumps(name, ensure_ascii=False)


_MISREAD = re.compile(r"[.,\x00-\x1f\x7f]")


def flat_key(parts: Sequence[str]) -> str:
    """The flattened key of a leaf at the path `parts`.

    >>> flat_key(["a.b"]), flat_key(["a", "b"]), flat_key(["model", "lr"])
    ('"a.b"', 'a.b', 'model.lr')
    """
    return ".".join(key_part(p) for p in parts)


def split_key(key: str) -> list[str]:
    """The path a flattened key names (`flat_key`'s inverse); a `UsageError` for text that
    is not one (a quoted part left open, say).

    >>> split_key('"a.b".c'), split_key("a.b"), split_key('x."".y')
    (['a.b', 'c'], ['a', 'b'], ['x', '', 'y'])
    """
    parts: list[str] = []
    i = 0
    while True:
        if key.startswith('"', i):
            try:
                part, i = _DECODER.raw_decode(key, i)
            except ValueError:
                raise UsageError(f"config key {key!r}: a quoted part is not a JSON string "
                                 '(write "a.b" for a key holding a dot)') from None
            if i < len(key) and key[i] != ".":
                raise UsageError(f"config key {key!r}: a quoted part must be followed by a "
                                 "dot or end the key")
        else:
            end = key.find(".", i)
            end = len(key) if end < 0 else end
            part, i = key[i:end], end
        parts.append(part)
        if i >= len(key):
            return parts
        i += 1  # the dot


def split_keys(text: str) -> list[str]:
    """Comma-separated flattened keys as typed (`--group-by a.b,"x,y"`), each stripped of
    the spaces around it; a comma inside a quoted part belongs to the key (a part is quoted
    when it begins with `"`, as `split_key` reads it).

    >>> split_keys('learning_rate, "a,b".c ,model')
    ['learning_rate', '"a,b".c', 'model']
    """
    keys: list[str] = []
    i = 0
    while True:
        start = j = i
        while j < len(text) and text[j].isspace():
            j += 1
        while True:  # one part, then a dot and the next, up to a comma or the end
            if text.startswith('"', j):
                try:
                    _, j = _DECODER.raw_decode(text, j)
                except ValueError:  # an open quote: the rest is this key (split_key says why)
                    j = len(text)
            while j < len(text) and text[j] not in ".,":
                j += 1
            if j < len(text) and text[j] == ".":
                j += 1
                continue
            break
        keys.append(text[start:j].strip())
        if j >= len(text):
            return keys
        i = j + 1  # the comma


_DECODER = json.JSONDecoder()


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return to_float(value)
    return None


def normalize(data: bytes, ctx: Context) -> dict[str, list[dict]]:
    cfg = load(data, ctx)
    if cfg is None:
        return {"config": []}
    base = ctx.base()
    rows = []
    for key, leaf in flatten(cfg):
        rows.append(
            {
                **base,
                "key": _clean_str(key),
                "value": _json_text(leaf),
                "value_num": _num(leaf),
                "value_str": _clean_str(leaf) if isinstance(leaf, str) else None,
            }
        )
    return {"config": rows}


# Module-path / class-name tokens that name a training kind, used only when the upstream rules
# (keys, then upstream's own `__type__` substrings) decide nothing.
_RL_TOKENS = {"rl", "rlhf", "env", "envs", "grpo", "ppo"}
_DPO_TOKENS = {"dpo"}
_SL_TOKENS = {"sl", "sft", "supervised"}
_PREF_TOKENS = {"preference", "preferences"}


def _type_tokens(type_name: str) -> set[str]:
    """Lower-case tokens of a dotted type name: split on `.`, `_`, and CamelCase boundaries.

    `tinker_cookbook.recipes.math_rl.math_env.MathDatasetBuilder` →
    {tinker, cookbook, recipes, math, rl, env, dataset, builder}."""
    tokens: set[str] = set()
    for part in re.split(r"[._\-]+", type_name):
        # CamelCase split that keeps acronyms together: `Gsm8kToolRLDatasetBuilder` → Gsm8k Tool RL Dataset Builder
        for tok in re.findall(r"[A-Z]+(?=[A-Z][a-z]|\d|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+", part):
            tokens.add(tok.lower())
    return tokens


def infer_kind(cfg: dict) -> str:
    """The run kind, "rl" / "sl" / "dpo" / "unknown" (`kinds.RUN_KINDS`).

    1. Upstream's rule (tinker-cookbook `stores/registry.py`), top-level keys only and in this
       order: `dpo_beta` → dpo; `loss_fn` → rl; `num_epochs` → sl.
    2. Upstream's fallback on the string `dataset_builder.__type__`: contains "RL" (case-sensitive)
       → rl; contains "Supervised" or "SL" → sl.
    3. runstore's extension, when upstream decides nothing (upstream then reports no kind): the
       `__type__` is cut into lower-case tokens on `.`, `_` and CamelCase boundaries; a token in
       {dpo} → dpo; else a token in {rl, rlhf, env, envs, grpo, ppo} → rl (RL builders live in
       `*_rl`/`rl` modules or `*_env` modules, e.g. `recipes.math_rl.math_env.MathDatasetBuilder`);
       else a token in {sl, sft, supervised} → sl (`chat_sl`, `supervised.data`); else a token in
       {preference, preferences} → dpo (comparison datasets without an RL token feed DPO).
    4. Otherwise "unknown".
    """
    if "dpo_beta" in cfg:
        return "dpo"
    if "loss_fn" in cfg:
        return "rl"
    if "num_epochs" in cfg:
        return "sl"
    builder = cfg.get("dataset_builder")
    type_name = builder.get("__type__") if isinstance(builder, dict) else None
    if not isinstance(type_name, str):
        return "unknown"
    if "RL" in type_name:
        return "rl"
    if "Supervised" in type_name or "SL" in type_name:
        return "sl"
    tokens = _type_tokens(type_name)
    if tokens & _DPO_TOKENS:
        return "dpo"
    if tokens & _RL_TOKENS:
        return "rl"
    if tokens & _SL_TOKENS:
        return "sl"
    if tokens & _PREF_TOKENS:
        return "dpo"
    return "unknown"


def summarize(data: bytes, ctx: Context) -> dict[str, Any]:
    cfg = load(data, ctx)
    if cfg is None:
        return {"config_json": None, "kind": "unknown", "model_name": None, "learning_rate": None}
    model_name = cfg.get("model_name")
    lr = cfg.get("learning_rate")
    learning_rate = None
    if isinstance(lr, (int, float)) and not isinstance(lr, bool):
        learning_rate = to_float(lr)
    return {
        "config_json": _json_text(cfg),
        "kind": infer_kind(cfg),
        "model_name": _clean_str(model_name) if isinstance(model_name, str) else None,
        "learning_rate": learning_rate,
    }


class Config:
    """config.json → `config` (its `runs` fields come from `summarize`, read with the run)."""

    kinds = ("config",)
    tables = ("config",)

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        out.rows(normalize(batch.data, batch.ctx))
        return out
