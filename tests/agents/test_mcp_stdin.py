"""`runstore mcp`'s stdin mending (runstore/agents/stdin.py) against the SDK's own reader.

For any JSON-RPC message whose strings hold any code points, lone surrogates among them: the
line as `json.dumps` writes it (surrogates as `\\uXXXX` escapes), mended, is read by the SDK's
validator (`jsonrpc_message_adapter.validate_json`, what its stdio reader calls) as the
message with each lone surrogate replaced by U+FFFD; a line without one is the same bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runstore.agents.stdin import mended

TEXT = st.text(alphabet=st.one_of(st.characters(), st.sampled_from(["\ud83d", "\ude00", "\udfff",
                                                                  "\ud800"])), max_size=12)
ARGS = st.recursive(st.one_of(TEXT, st.integers(), st.booleans(), st.none()),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(TEXT, inner, max_size=3)),
                    max_leaves=8)
LONE = re.compile("[\ud800-\udfff]")


def replaced(value: Any) -> Any:
    """`value` (as `json.loads` read it) with each surrogate of its strings as U+FFFD,
    written independently of the module: one left after `json.loads` has no partner."""
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, list):
        return [replaced(v) for v in value]
    if isinstance(value, dict):
        return {replaced(k): replaced(v) for k, v in value.items()}
    return value


@settings(deadline=None)  # the first example imports the SDK's types
@given(st.dictionaries(TEXT, ARGS, max_size=4))
def test_a_mended_line_is_what_the_sdk_reads(arguments: dict[str, Any]) -> None:
    from mcp_types import jsonrpc_message_adapter

    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "sql", "arguments": arguments}}
    line = json.dumps(message).encode() + b"\n"
    sent = json.loads(line)["params"]["arguments"]  # JSON pairs two adjacent halves up
    out = mended(line)
    read = jsonrpc_message_adapter.validate_json(out, by_name=False)
    assert read.model_dump(by_alias=True, exclude_unset=True)["params"]["arguments"] == \
        replaced(sent)
    if not LONE.search(json.dumps(sent, ensure_ascii=False)):
        assert out == line


def test_what_is_not_json_is_left_to_the_sdk() -> None:
    for line in (b'{"a": "\\ud83d"\n', b"\\ud800 not json\n", b'"\\\\ud83d"\n',
                 b"[" * 100_000 + b'"\\ud83d"' + b"]" * 100_000):
        assert mended(line) == line
