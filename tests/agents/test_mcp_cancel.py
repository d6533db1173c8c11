"""A tool call the client cancels stops its query (runstore/agents/calls.py, `Store.stopping`).

The SDK never answers a cancelled request, but it waits for the tool's thread, and so for a
query in a worker process, to end: two cancelled slow `sql` calls would hold both workers to
their time limit and every later query would wait. What must hold: after the cancels, a new
call is answered long before the cancelled calls' time limit, the cancelled ones get no
answer (MCP: a cancelled request is not answered), and the server ends when its input does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mcpkit import REPO, clean_env

from runstore.agents import calls

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}}
# 10^14 pairs: minutes of work, stopped here only by the cancel (or its 90 s time limit).
SLOW = "select count(*) as n from range(10000000) a, range(10000000) b where a.range + b.range = -1"
LIMIT_S = 90


def test_cancelled_calls_stop_their_queries(shared_demo_store: Path) -> None:
    with subprocess.Popen([sys.executable, "-m", "runstore", "--store", str(shared_demo_store),
                           "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE,
                          env={**clean_env(), "PYTHONPATH": str(REPO)}) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        replies: list[dict[str, Any]] = []
        arrived = threading.Condition()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                with arrived:
                    replies.append(json.loads(line))
                    arrived.notify_all()

        def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()

        def answer(ident: Any) -> dict[str, Any]:
            with arrived:
                assert arrived.wait_for(lambda: any(r.get("id") == ident for r in replies),
                                        timeout=LIMIT_S * 2), replies
                return next(r for r in replies if r.get("id") == ident)

        threading.Thread(target=read, daemon=True).start()
        send(INIT)
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for ident in (10, 11):  # one for each of the two worker processes
            send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                  "params": {"name": "sql", "arguments": {"query": SLOW, "timeout": LIMIT_S}}})
        time.sleep(3)  # both queries are running
        for ident in (10, 11):
            send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": ident, "reason": "too slow"}})
        asked = time.monotonic()
        send({"jsonrpc": "2.0", "id": 12, "method": "tools/call",
              "params": {"name": "sql", "arguments": {"query": "select 41 + 1 as n"}}})
        reply = answer(12)
        waited = time.monotonic() - asked
        assert "| 42 |" in reply["result"]["content"][0]["text"], reply
        assert waited < LIMIT_S / 3, waited  # not held until the cancelled queries' limit
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert proc.stderr is not None and proc.stderr.read() == b""
    assert [r.get("id") for r in replies] == [1, 12]  # the cancelled calls are not answered


def test_a_cancel_reaches_only_the_calls_in_flight() -> None:
    """A cancel for an id not in flight (answered already, not begun) is ignored, so an id
    used again starts afresh; every call in flight with the id is cancelled."""
    calls.cancel(7)  # nothing in flight: ignored
    with calls.running(7) as first, calls.running(7) as second, calls.running("7") as text:
        assert not first() and not second() and not text()
        calls.cancel(7)
        assert first() and second() and not text()
    with calls.running(7) as again:
        assert not again()
