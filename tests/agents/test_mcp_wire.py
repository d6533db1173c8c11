"""`runstore mcp` answers every line a client sends (runstore/agents/wire.py).

The SDK's stdio reader drops a line it cannot read as a message without a word, so a client
that sent it waits for ever. What must hold: each such line gets JSON-RPC 2.0's error (-32700
for a line that is not JSON, -32600 for JSON that is no message), with the line's id when it
is text or an integer, else null; the reply is a message the SDK's own reader takes for an
error; a line the SDK reads is left to it (it answers, or it is a notification); the server
keeps serving, and its own long answers reach the client whole, never cut by a reply made
beside them. The expected codes come from the JSON-RPC 2.0 and MCP texts, not from the code.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import JSONRPCError, jsonrpc_message_adapter  # the SDK's reader, imported once
from mcpkit import REPO, clean_env

import runstore
from runstore.agents.wire import reply_to

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}}

# line -> (code, id) of the error it must get; None: the SDK reads it (no reply made here).
CASES: list[tuple[str, tuple[int, Any] | None]] = [
    ('{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}', None),
    ('{"jsonrpc": "2.0", "id": "a", "method": "x", "params": {}}', None),
    ('{"jsonrpc": "2.0", "method": "notifications/initialized"}', None),
    ('{"jsonrpc": "2.0", "id": 4, "result": {}}', None),
    ('{"jsonrpc": "2.0", "id": 4, "error": {"code": 1, "message": "m"}}', None),
    ("   ", None),
    ("not json", (-32700, None)),
    ('{"jsonrpc": "2.0", "id": 5, "method": "x"', (-32700, None)),  # cut short
    ("42", (-32600, None)),
    ('"text"', (-32600, None)),
    ("null", (-32600, None)),
    ('[{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}]', (-32600, None)),  # a batch
    ('{"jsonrpc": "2.0", "id": 5, "method": 7}', (-32600, 5)),
    ('{"id": 6, "method": "tools/list"}', (-32600, 6)),
    ('{"jsonrpc": "1.0", "id": "seven", "method": "tools/list"}', (-32600, "seven")),
    ('{"jsonrpc": "2.0", "id": 9}', (-32600, 9)),
    ('{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": "x"}', (-32600, 11)),
    ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', (-32600, None)),
    ('{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', (-32600, None)),
    ('{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', (-32600, None)),
    ('{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', (-32600, None)),
]


@pytest.mark.parametrize("line, want", CASES, ids=[c[0][:40] for c in CASES])
def test_each_line_the_sdk_would_drop_gets_its_error(line: str, want: Any) -> None:
    got = reply_to(line.encode())
    if want is None:
        assert got is None
        return
    assert got is not None and got.endswith(b"\n") and got.count(b"\n") == 1
    reply = json.loads(got)
    assert (reply["error"]["code"], reply["id"]) == want
    assert reply["jsonrpc"] == "2.0" and reply["error"]["message"] in ("Parse error",
                                                                        "Invalid Request")
    assert reply["error"]["data"]  # says what is wrong


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
ENVELOPE = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "id": JSON,
    "method": st.sampled_from(["tools/list", "x"]) | JSON, "params": JSON,
    "result": JSON, "error": JSON})


@settings(max_examples=400)
@given(sent=ENVELOPE | JSON, raw=st.booleans(), junk=st.binary(max_size=12))
def test_every_reply_is_an_error_the_sdk_reads_with_the_id_sent(sent: Any, raw: bool,
                                                                  junk: bytes) -> None:
    """Whatever the line, a reply made here is one line that the SDK's own reader takes for a
    JSON-RPC error, carrying the line's id when that is text or an integer; and a line the
    SDK reads as a request or a response gets none."""
    line = junk if raw else json.dumps(sent).encode()
    got = reply_to(line)
    try:
        read = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        read = None
    if read is not None and "id" in type(read).model_fields:
        assert got is None
    if got is None:
        return
    reply = jsonrpc_message_adapter.validate_json(got, by_name=False)
    assert isinstance(reply, JSONRPCError) and got.count(b"\n") == 1
    ident = sent.get("id") if not raw and isinstance(sent, dict) else None
    valid = isinstance(ident, (str, int)) and not isinstance(ident, bool)
    assert reply.id == (ident if valid else None)


def exchange(store: Path, lines: list[str], awaited: set[Any]) -> tuple[list[dict[str, Any]],
                                                                        str, int]:
    """Send `lines` to `runstore mcp`, read what it writes until the requests `awaited` are
    answered, close its stdin: (every line it wrote, parsed; its stderr; its exit status)."""
    with subprocess.Popen([sys.executable, "-m", "runstore", "--store", str(store), "mcp"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env={**clean_env(), "PYTHONPATH": str(REPO)}) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(line + "\n" for line in lines).encode())
        proc.stdin.flush()
        replies = []
        while awaited:  # a line cut by another would not parse here
            replies.append(json.loads(proc.stdout.readline()))
            awaited.discard(replies[-1].get("id"))
        out, err = proc.communicate(timeout=120)
    return replies + [json.loads(line) for line in out.splitlines()], err.decode(), \
        proc.returncode


def test_the_server_answers_each_line_and_its_long_answers_arrive_whole(
        shared_demo_store: Path) -> None:
    """Many lines the SDK would drop, sent between calls whose answers are long: every
    request gets exactly one reply, every line written is whole JSON, and the server ends
    when its input does, with status 0 and nothing on stderr."""
    bad = [c[0] for c in CASES if c[1] is not None]
    query = "select i, repeat('x', 60) as s from range(1000) t(i) order by i"
    calls = [json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                         "params": {"name": "sql", "arguments": {
                             "query": query, "limit": 1000, "max_chars": 100000}}})
             for i in range(6)]
    lines = [json.dumps(INIT), json.dumps({"jsonrpc": "2.0",
                                           "method": "notifications/initialized"})]
    for call in calls:
        lines += [call, *bad]
    replies, err, status = exchange(shared_demo_store, lines, {*range(100, 106)})
    assert status == 0 and err == "", err
    answers = {r["id"]: r for r in replies if r.get("id") is not None}
    assert sorted(answers, key=str) == sorted([1, 5, 6, 9, 11, *range(100, 106), "seven"],
                                              key=str)
    for i in range(100, 106):  # the long answers, whole
        text = answers[i]["result"]["content"][0]["text"]
        assert text.count("x" * 60) == 1000 and len(text) > 60000, text[-300:]
    nulls = [r for r in replies if r.get("id") is None]
    # Each call is followed by every bad line: as many replies without an id as those have.
    assert len(nulls) == 6 * sum(1 for c in CASES if c[1] is not None and c[1][1] is None)
    codes = sorted(r["error"]["code"] for r in replies if "error" in r)
    assert codes == sorted(6 * [c[1][0] for c in CASES if c[1] is not None])


def test_the_reply_docs_agents_md_shows_is_the_one_made() -> None:
    doc = (REPO / "docs" / "agents.md").read_text()
    sent, shown = re.search(r"To\n?\s*`(\{.*?\})` it answers:\n\n```json\n(.*?)\n```", doc,
                            re.S).groups()
    assert reply_to(sent.encode()) == shown.encode() + b"\n"


def test_requests_sent_before_stdin_closes_are_all_answered(shared_demo_store: Path) -> None:
    """`runstore mcp < requests.jsonl`: the client writes every request and closes stdin at
    once. Each request still gets its answer, the slow calls' too (the SDK cancels what runs
    when its input ends, so the end reaches it only once all are answered)."""
    slow = "select count(*) as n from range(30000000) t(i) where i % 7 = 3"
    calls = [{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
              "params": {"name": "sql", "arguments": {"query": slow}}} for i in range(3)]
    calls += [{"jsonrpc": "2.0", "id": "runs", "method": "tools/call",
               "params": {"name": "list_runs", "arguments": {}}},
              {"jsonrpc": "2.0", "id": "last", "method": "tools/list"}]
    lines = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *calls]
    done = subprocess.run([sys.executable, "-m", "runstore", "--store", str(shared_demo_store),
                           "mcp"], input="".join(json.dumps(m) + "\n" for m in lines).encode(),
                          capture_output=True, timeout=120,
                          env={**clean_env(), "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted((r["id"] for r in replies), key=str) == sorted(
        [1, 10, 11, 12, "runs", "last"], key=str)
    want = len(range(3, 30000000, 7))  # i % 7 == 3
    for r in replies:
        assert "error" not in r and not r["result"].get("isError"), r
        if r["id"] in (10, 11, 12):
            assert f"| {want} |" in r["result"]["content"][0]["text"]


def test_a_request_is_awaited_until_answered_or_cancelled() -> None:
    """The bookkeeping behind the end of input: a request is pending until a response with
    its id comes out, or the client cancels it; a request the server sends, a notification
    and a response with another id settle nothing."""
    from runstore.agents.wire import _Pending, _read

    pending = _Pending()
    for line in ['{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}',
                 '{"jsonrpc": "2.0", "id": "3", "method": "tools/list"}',
                 '{"jsonrpc": "2.0", "id": 4, "method": "ping"}',
                 '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                 '{"jsonrpc": "2.0", "id": 9, "result": {}}']:  # the client answering
        pending.sent(_read(line.encode())[1])
    assert pending.ids == {3, "3", 4}
    for line in [b'{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}',
                 b'{"jsonrpc":"2.0","method":"notifications/message","params":{}}',
                 b'{"jsonrpc":"2.0","id":5,"result":{}}', b"not json"]:
        pending.answered(line)
    assert pending.ids == {3, "3", 4}
    pending.answered(b'{"jsonrpc":"2.0","id":"3","result":{}}')
    pending.answered(b'{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"m"}}')
    assert pending.ids == {3}
    pending.sent(_read(b'{"jsonrpc": "2.0", "method": "notifications/cancelled", '
                       b'"params": {"requestId": 3}}')[1])
    assert pending.ids == set()
    pending.drained(timeout=0)  # returns at once: nothing is pending


def _idle(monkeypatch: pytest.MonkeyPatch, seconds: float) -> tuple[Any, threading.Event]:
    from runstore.agents import wire

    monkeypatch.setattr(wire, "IDLE_S", seconds)
    called = threading.Event()
    return wire._Idle(called.set), called


def test_a_quiet_session_calls_idle_once_quiet_and_never_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Quiet means no line either way for IDLE_S since the session began: lines that keep
    coming hold it off; once they stop, `idle()` comes."""
    from runstore.agents.wire import _read

    quiet, called = _idle(monkeypatch, 1.0)
    quiet.line(_read(json.dumps(INIT).encode())[1])
    assert not called.wait(1.5)  # no session yet: `initialize` alone begins none
    quiet.line(_read(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')[1])
    for _ in range(10):  # a line every 0.2 s for 2 s, either way: never quiet for 1 s
        time.sleep(0.2)
        quiet.line()
        assert not called.is_set()
    assert called.wait(10)
    assert quiet.then is None  # taken: a second `initialized` starts nothing


def test_a_session_whose_input_ends_never_calls_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that closes its input (`runstore mcp < requests.jsonl`) will send no call the
    warm-up could serve: it is not started."""
    from runstore.agents.wire import _read

    quiet, called = _idle(monkeypatch, 0.3)
    quiet.line(_read(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')[1])
    quiet.end()
    assert not called.wait(1.5)


def test_a_quiet_client_finds_the_store_opened_for_it(shared_demo_store: Path) -> None:
    """After the handshake and a quiet second, the server opens the store and runs list_runs
    (`--debug` says so), before any call; the first call then answers as ever."""
    with subprocess.Popen([sys.executable, "-m", "runstore", "--store", str(shared_demo_store),
                           "--debug", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env={**clean_env(), "PYTHONPATH": str(REPO)},
                          text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(json.dumps(INIT) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        proc.stdin.flush()
        seen = ""
        watchdog = threading.Timer(120, proc.kill)  # no warm-up: the read below ends, empty
        watchdog.start()
        try:
            while "runstore mcp: warmed" not in seen:  # the SDK's debug log, then the warm-up's
                line = proc.stderr.readline()
                assert line, seen[-2000:]
                seen += line
        finally:
            watchdog.cancel()
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "list_runs", "arguments": {"columns": ["run_label"]}}}
        proc.stdin.write(json.dumps(call) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        proc.stdin.close()
        proc.wait(timeout=120)
    text = reply["result"]["content"][0]["text"]
    assert not reply["result"].get("isError"), text
    labels = set(runstore.open(shared_demo_store).sql(
        "select run_label from run_summary")["run_label"].to_list())
    assert labels and all(f"| {label} |" in text for label in labels), text
