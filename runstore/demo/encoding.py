"""JSON text exactly as tinker-cookbook writes it: what every generated file is made of.

Contract: `_dumps(obj)` is `json.dumps(obj)` with Python's default options (ASCII escapes, bare
`NaN`/`Infinity`); `_dumps(obj, indent=n)` is byte-for-byte `json.dumps(obj, indent=n)`, only
faster. `_jsonl(lines)` joins lines into JSON-lines text (`\n` after every line). Pure functions
of their arguments; no I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable


def _dumps(obj: Any, indent: int | None = None) -> str:
    # Python's defaults on purpose: ensure_ascii=True, allow_nan=True (bare NaN / Infinity).
    if indent is None:
        return json.dumps(obj)
    out: list[str] = []
    _encode_indented(obj, out, "\n", " " * indent)
    return "".join(out)


_encode_str = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _encode_indented(obj: Any, out: list[str], newline: str, step: str) -> None:
    """Byte-for-byte `json.dumps(obj, indent=...)`, several times faster.

    With `indent` set the stdlib falls back to its pure-Python encoder, which made big logtree
    files dominate benchmark-tree generation.
    """
    if isinstance(obj, str):
        out.append(_encode_str(obj))
    elif isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        inner = newline + step
        sep = "{" + inner
        for key, value in obj.items():
            out.append(sep)
            out.append(_encode_str(key) if isinstance(key, str) else _encode_str(_scalar(key)))
            out.append(": ")
            _encode_indented(value, out, inner, step)
            sep = "," + inner
        out.append(newline + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        inner = newline + step
        sep = "[" + inner
        for value in obj:
            out.append(sep)
            _encode_indented(value, out, inner, step)
            sep = "," + inner
        out.append(newline + "]")
    else:
        out.append(_scalar(obj))


def _scalar(obj: Any) -> str:
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return int.__repr__(obj)
    if isinstance(obj, float):
        if obj != obj:
            return "NaN"
        if obj in (math.inf, -math.inf):
            return "Infinity" if obj > 0 else "-Infinity"
        return float.__repr__(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def _jsonl(lines: Iterable[str]) -> str:
    return "".join(line + "\n" for line in lines)
