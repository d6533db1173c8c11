"""The client's messages as the MCP SDK can read them: half a surrogate pair reads as U+FFFD.

Contract: `mended(line)` is the line `wire.py` hands the SDK for a line the client sent.
A line goes through unchanged unless it is JSON holding a string with a lone UTF-16
surrogate: `"\\ud83d"` alone is valid JSON text, and JavaScript's `JSON.stringify` writes it
for a string cut inside an emoji. The SDK's reader refuses such a line and answers nothing,
so the client waits for a reply that never comes. Such a line is read with Python's `json`
and written again, each lone surrogate replaced by U+FFFD: the replacement character the SDK
already reads for bytes that are not UTF-8. A line Python cannot read either is returned as it
is (wire.py answers it).
"""

from __future__ import annotations

import json
import re
from typing import Any

# A JSON escape of a UTF-16 surrogate (high or low): the only way a line can hold a lone one.
_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")  # after json.loads, a pair is one code point


def mended(line: bytes) -> bytes:
    """`line` with each lone surrogate of its JSON strings (keys too) as U+FFFD; unchanged
    when it has none or is not JSON Python reads."""
    if not _ESCAPE.search(line):
        return line
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line
    fixed = _mend(message)
    if fixed == message:
        return line  # only whole pairs
    return json.dumps(fixed).encode() + (b"\n" if line.endswith(b"\n") else b"")


def _mend(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_mend(v) for v in value]
    if isinstance(value, dict):
        return {_mend(k): _mend(v) for k, v in value.items()}
    return value
