"""Start-up of `runstore mcp`: how soon a client's `initialize` is answered, against the MCP
SDK's own empty server as the floor.

    python bench/bench_mcp.py [--store DIR] [-n N]

Runs these processes N times each (default 9), interleaved round-robin so each sees the same
machine, and reports the median wall time from the process start to the reply read by this
script (raw JSON-RPC lines over stdin/stdout, as an MCP client sends them):

* python: `python -c pass`, the interpreter alone;
* sdk floor: an `MCPServer` of the official SDK with one trivial tool, answering `initialize`;
* runstore mcp: `python -m runstore --store DIR mcp` answering `initialize`
  (runstore's tools are built, the store is not opened: DuckDB, polars and pyarrow are
  imported on the first tool call);
* first call: the same process, `initialize` then `tools/call list_runs` at once (the store
  opened, the query stack imported, one query run), to show what the first call costs.

`--pause S` (with `--src LABEL=DIR`, repeatable, to compare checkouts) measures instead what
an agent feels: after `initialize` and `notifications/initialized`, S seconds pass (the model
deciding what to ask; default 2), then `tools/call list_runs` twice; the time from sending each
call to its answer, median over N processes a checkout, interleaved.

With no --store, `runstore demo` writes a store in a temporary directory. Prints a Markdown
table for docs/benchmarks.md with the ratios to the SDK floor and the machine's load average.
Nothing here writes to the store.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "list_runs", "arguments": {"limit": 3}}}
FLOOR = """
from mcp.server import MCPServer
server = MCPServer("floor")
@server.tool()
def echo(text: str) -> str:
    return text
server.run("stdio")
"""


def _env(src: Path = REPO) -> dict[str, str]:
    """The environment of a measured process: runstore from `src`, no RUNSTORE_ setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNSTORE_")}
    return {**env, "PYTHONPATH": str(src)}


def exchange(argv: list[str], messages: list[dict]) -> float:
    """Seconds from the process start to the reply to the last request of `messages`."""
    env = _env()
    started = time.perf_counter()
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, env=env) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for m in messages:
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            if "id" in m:
                reply = json.loads(proc.stdout.readline())
                assert "result" in reply, reply
        elapsed = time.perf_counter() - started
        proc.stdin.close()
        proc.wait(timeout=60)
    return elapsed


def paused_calls(argv: list[str], src: Path, pause: float) -> tuple[float, float]:
    """Seconds from sending the first and the second `tools/call` to their answers, the
    first sent `pause` s after the session began."""
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, env=_env(src), cwd=src) as proc:
        assert proc.stdin is not None and proc.stdout is not None

        def send(m: dict) -> float:
            started = time.perf_counter()
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            if "id" in m:
                reply = json.loads(proc.stdout.readline())
                assert "result" in reply, reply
            return time.perf_counter() - started

        send(INITIALIZE)
        send(INITIALIZED)
        time.sleep(pause)
        first = send(CALL)
        second = send({**CALL, "id": 3})
        proc.stdin.close()
        proc.wait(timeout=60)
    return first, second


def plain(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path)
    parser.add_argument("-n", type=int, default=9)
    parser.add_argument("--pause", type=float)
    parser.add_argument("--src", action="append", default=[], metavar="LABEL=DIR")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store
        if store is None:
            subprocess.run([sys.executable, "-m", "runstore", "demo"], cwd=tmp, check=True,
                           capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            store = Path(tmp) / "runstore-demo" / "store"
        mcp = [sys.executable, "-m", "runstore", "--store", str(store.resolve()), "mcp"]
        if args.pause is not None:
            paused(mcp, dict(s.split("=", 1) for s in args.src) or {"here": str(REPO)},
                   args.pause, args.n)
            return
        cases = {
            "python": lambda: plain([sys.executable, "-c", "pass"]),
            "sdk floor": lambda: exchange([sys.executable, "-c", FLOOR], [INITIALIZE]),
            "runstore mcp": lambda: exchange(mcp, [INITIALIZE]),
            "first call": lambda: exchange(mcp, [INITIALIZE, INITIALIZED, CALL]),
        }
        for case in cases.values():  # warm the page cache and __pycache__
            case()
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.n):
            for name, case in cases.items():
                times[name].append(case())
    floor = statistics.median(times["sdk floor"])
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; n = {args.n}\n")
    print("| process | median s | min s | ratio to the SDK floor |")
    print("|---|---:|---:|---:|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.3f} | {min(ts):.3f} | {med / floor:.2f}x |")


def paused(mcp: list[str], srcs: dict[str, str], pause: float, n: int) -> None:
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in srcs}
    for label, src in srcs.items():  # warm the page cache and __pycache__
        paused_calls(mcp, Path(src), 0.0)
    for _ in range(n):
        for label, src in srcs.items():
            times[label].append(paused_calls(mcp, Path(src), pause))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; n = {n}; "
          f"pause {pause} s\n")
    print("| checkout | first call, median s | second call, median s |")
    print("|---|---:|---:|")
    for label, ts in times.items():
        print(f"| {label} | {statistics.median(t[0] for t in ts):.3f} | "
              f"{statistics.median(t[1] for t in ts):.3f} |")


if __name__ == "__main__":
    main()
