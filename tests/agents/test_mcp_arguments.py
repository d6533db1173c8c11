"""A `tools/call` whose `arguments` are not an object gets runstore's error result.

Sent as JSON-RPC lines to a real `runstore mcp` (the SDK's client only sends objects). What
must hold: `arguments` that are a list (empty or not), a number (0 included), a string (empty
included) or a boolean (false included) is answered with the tool's `Error: <tool>'s
arguments are an object of named values, got <what was sent>` result, never the SDK's bare
-32602 "Invalid request parameters"; `null` is no arguments, as when they are omitted (MCP
lets a call omit them, and the SDK reads null so too), so it is answered as `{}` is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcpkit import REPO, clean_env

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MISSING = object()  # `arguments` left out of the call

NOT_OBJECTS: list[Any] = [[], [1, 2], [{"query": "select 1"}], 0, 3, -1.5, "", "select 1",
                          '{"query": "select 1"}', True, False]
NONE: list[Any] = [None, MISSING, {}]


def call(i: int, tool: str, arguments: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool}
    if arguments is not MISSING:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


@pytest.fixture(scope="module")
def replies(ui_demo: tuple[Path, Path]) -> dict[tuple[str, int], dict[str, Any]]:
    """Every call of this module in one `runstore mcp` session: (tool, index into
    NOT_OBJECTS + NONE) -> the JSON-RPC reply. The server answers every request before it
    ends, however soon its input closes."""
    calls = [(tool, k) for tool in ("sql", "views") for k in range(len(NOT_OBJECTS + NONE))]
    lines = [INITIALIZE, INITIALIZED] + [call(i + 1, tool, (NOT_OBJECTS + NONE)[k])
                                         for i, (tool, k) in enumerate(calls)]
    done = subprocess.run([sys.executable, "-m", "runstore", "--store", str(ui_demo[1]), "mcp"],
                          input="".join(json.dumps(m) + "\n" for m in lines), text=True,
                          capture_output=True, env={**clean_env(), "PYTHONPATH": str(REPO)},
                          timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    got = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert sorted(got) == list(range(len(calls) + 1)), got
    return {c: got[i + 1] for i, c in enumerate(calls)}


def text_of(reply: dict[str, Any]) -> tuple[bool, str]:
    assert "result" in reply, reply  # a tool result, not a JSON-RPC error
    content = reply["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text", reply
    return bool(reply["result"].get("isError")), content[0]["text"]


@pytest.mark.parametrize("tool", ["sql", "views"])
@pytest.mark.parametrize("k", range(len(NOT_OBJECTS)),
                         ids=[json.dumps(v) for v in NOT_OBJECTS])
def test_arguments_that_are_not_an_object_are_said_to_be(replies: Any, tool: str,
                                                         k: int) -> None:
    is_error, text = text_of(replies[(tool, k)])
    sent = json.dumps(NOT_OBJECTS[k], ensure_ascii=False)
    assert is_error and text == (f"Error: {tool}'s arguments are an object of named values, "
                                 f"got {sent}"), text


@pytest.mark.parametrize("tool", ["sql", "views"])
def test_null_arguments_are_none_as_when_omitted(replies: Any, tool: str) -> None:
    null, omitted, empty = (text_of(replies[(tool, len(NOT_OBJECTS) + k)]) for k in range(3))
    assert null == omitted == empty
    if tool == "sql":  # sql needs a query: the error it gives without one
        assert empty[0] and empty[1].startswith("Error: give a query, or docs="), empty
    else:  # views needs nothing: the list of views
        assert not empty[0] and empty[1].startswith("## "), empty
