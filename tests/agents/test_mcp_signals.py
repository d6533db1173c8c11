"""`runstore mcp` stopped by a signal while a tool call runs: it ends at once, as any command.

A client (or a supervisor) that stops the server with SIGINT or SIGTERM while an agent's
call is still in flight (here a `sql` call whose cross join would run for hours, in the
worker process) gets `interrupted` on stderr and status 130 within seconds, with the
client's end of stdin still open. The server used to wait for the thread running the call
(Python's exit waits for every thread that is not a daemon) and said nothing.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpkit import REPO
from signals import sigint_not_ignored  # noqa: F401 - autouse: the children get SIGINT

ENDLESS = "select count(*) from range(100000000) a, range(100000000) b"


def message(**fields: object) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **fields}) + "\n").encode()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_tool_call_ends_the_server_at_once(
        ui_demo: tuple[Path, Path], signum: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-m", "runstore", "--store", str(ui_demo[1]), "mcp"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            proc.stdin.write(message(id=1, method="initialize", params={
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}))
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 1
            proc.stdin.write(message(method="notifications/initialized"))
            proc.stdin.write(message(id=2, method="tools/call", params={
                "name": "sql", "arguments": {"query": ENDLESS}}))
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 2.0)
            assert not ready, proc.stdout.readline()  # the call is still running
            proc.send_signal(signum)
            started = time.monotonic()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail("the server did not end after the signal")
            took = time.monotonic() - started
            err = proc.stderr.read().decode()
            assert proc.returncode == 130, (proc.returncode, err)
            assert err.strip().splitlines()[-1:] == ["interrupted"], err
            assert "Traceback" not in err, err
            assert took < 30, took
        finally:
            if proc.poll() is None:
                proc.kill()
