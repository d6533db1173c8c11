"""`runstore mcp`'s stdio: every line the client sends is answered, by the SDK or here.

Contract: `wire()` is a context manager. While it lasts, fd 0 and fd 1 are pipes between the
client's stdin and stdout and the SDK's stdio transport, each served by a thread; on exit
they are the client's again, and all the SDK wrote has reached the client (unless the client
stopped reading).

- In: each line the client sends is `mended` (stdin.py) and read with the SDK's own reader
  (`mcp_types.jsonrpc_message_adapter`). A line it reads as a message goes to the SDK. A
  line it refuses the SDK would drop without a word, leaving the client waiting for a reply:
  such a line is answered here with the JSON-RPC 2.0 error (`reply_to`): -32700 "Parse
  error" when it is not JSON, -32600 "Invalid Request" when it is JSON but no message (a
  batch, which MCP no longer has; a number; a `jsonrpc` other than "2.0"; a `method` that
  is not text; `params` that are not an object; an object that is neither a request, a
  notification nor a response). The reply carries the line's `id` when it is text or an
  integer, else null, and its `data` says what is wrong. A line the SDK would read as a
  notification although it has an `id` (null, true, 1.5: MCP's ids are text or integers)
  is answered -32600 too, rather than dropped as a notification. Blank lines are skipped.
- Out: the SDK's lines are copied to the client's stdout one whole line at a time, and a
  reply made here is written between two of them, never inside one. A client that stopped
  reading is not written to again; the SDK's lines are still taken, so it never blocks.

- End: when the client closes stdin, the SDK's input is closed only once every request the
  client sent has its answer (`_Pending`): the SDK cancels what is still running when its
  input ends, so `runstore mcp < requests.jsonl` would lose the answers of slow calls. A
  request the client cancels (`notifications/cancelled`) is not waited for (and its queries
  are stopped: calls.py), and none for longer than `DRAIN_S` (past the `sql` tool's longest
  time limit).
- Idle: once the client has said its session has begun (`notifications/initialized`, after
  `initialize` is answered), `idle()` (the caller's) is called the first time no line has
  then passed either way for `IDLE_S` seconds with the client's input still open: the
  server then opens its store while the client's agent decides what to ask. A client that
  sends its calls at once, or closes its input, does not wait for that, nor share the CPU
  with it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, BinaryIO, Callable, Iterator

from . import calls
from .stdin import mended

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
INITIALIZED = "notifications/initialized"
IDLE_S = 1.0
DRAIN_S = 900.0
# The line that ends the copying of the SDK's output. The SDK never closes its copy of fd 1,
# so the pipe never reads to its end; it writes JSON, in which a NUL byte cannot stand bare.
_END = b"\0\n"


def reply_to(line: bytes) -> bytes | None:
    """The error reply to a client's `line` the SDK would drop (see the module), as a line;
    None when the SDK reads it (or it is blank)."""
    return _read(line)[0]


def _read(line: bytes) -> tuple[bytes | None, Any]:
    """(`reply_to(line)`, the message the SDK reads in it, or None)."""
    from mcp_types import jsonrpc_message_adapter

    if not line.strip():
        return None, None
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:  # pydantic's ValidationError is a ValueError
        return _refused(line), None
    if "id" not in type(message).model_fields and b'"id"' in line:  # read as a notification
        try:
            sent = json.loads(line)
        except (ValueError, RecursionError):
            sent = None
        if isinstance(sent, dict) and "id" in sent:
            return _error(None, INVALID_REQUEST, "Invalid Request",
                          f"id must be text or an integer, got {json.dumps(sent['id'])[:80]}"), None
    return None, message


class _Pending:
    """The ids of the client's requests not answered yet (see the module's End)."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self.changed = threading.Condition()

    def sent(self, message: Any) -> None:
        """Note a message the client sent to the SDK."""
        from mcp_types import JSONRPCNotification, JSONRPCRequest

        with self.changed:
            if isinstance(message, JSONRPCRequest):
                self.ids.add(message.id)
            elif (isinstance(message, JSONRPCNotification)
                  and message.method == "notifications/cancelled"
                  and isinstance(message.params, dict)):
                self._settle(message.params.get("requestId"))
                calls.cancel(message.params.get("requestId"))

    def answered(self, line: bytes) -> None:
        """Note a line the SDK wrote: a response settles its request."""
        if not self.ids:
            return
        try:
            sent = json.loads(line)
        except (ValueError, RecursionError):
            return
        if isinstance(sent, dict) and "method" not in sent and ("result" in sent
                                                                 or "error" in sent):
            with self.changed:
                self._settle(sent.get("id"))

    def _settle(self, ident: Any) -> None:
        if isinstance(ident, (str, int)) and not isinstance(ident, bool):
            self.ids.discard(ident)
            self.changed.notify_all()

    def drained(self, timeout: float) -> None:
        """Wait until every request is answered (at most `timeout` seconds)."""
        with self.changed:
            self.changed.wait_for(lambda: not self.ids, timeout=timeout)


def _refused(line: bytes) -> bytes:
    """The reply to a line the SDK's reader refused."""
    try:
        sent = json.loads(line)
    except (ValueError, RecursionError) as bad:
        return _error(None, PARSE_ERROR, "Parse error", f"the line is not JSON: {bad}"[:200])
    if not isinstance(sent, dict):
        what = ("a batch (a JSON array); MCP takes one message a line"
                if isinstance(sent, list) else f"{json.dumps(sent)[:40]} is not a JSON object")
        return _error(None, INVALID_REQUEST, "Invalid Request", what)
    given = sent.get("id")
    ident = given if isinstance(given, (str, int)) and not isinstance(given, bool) else None
    why = "not a JSON-RPC 2.0 request, notification or response"
    if sent.get("jsonrpc") != "2.0":
        why = f'"jsonrpc" must be "2.0", got {json.dumps(sent.get("jsonrpc"))[:40]}'
    elif "method" in sent and not isinstance(sent["method"], str):
        why = f'"method" must be text, got {json.dumps(sent["method"])[:40]}'
    elif "params" in sent and not isinstance(sent["params"], dict):
        why = f'"params" must be an object, got {json.dumps(sent["params"])[:40]}'
    return _error(ident, INVALID_REQUEST, "Invalid Request", why)


def _error(ident: Any, code: int, message: str, data: str) -> bytes:
    reply = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message,
                                                       "data": data}}
    return json.dumps(reply).encode() + b"\n"


class _Out:
    """The client's stdout, written one whole line at a time from either thread."""

    def __init__(self, fd: int):
        self.file: BinaryIO = open(fd, "wb", buffering=0, closefd=False)
        self.lock = threading.Lock()
        self.broken = False

    def write(self, line: bytes) -> None:
        with self.lock:
            if self.broken:
                return
            try:
                view = memoryview(line)
                while view:  # a pipe may take part of a long line at a time
                    n = self.file.write(view)
                    if n is None:  # a stdout the client made non-blocking, full for now
                        time.sleep(0.01)
                    view = view[n or 0:]
            except OSError:  # the client stopped reading: the rest goes nowhere
                self.broken = True


class _Idle:
    """Calls `then()` once the session, begun, has been quiet `IDLE_S` seconds with the
    client's input open (see the module's Idle)."""

    def __init__(self, then: Callable[[], None] | None):
        self.then = then
        self.heard = threading.Condition()
        self.last = 0.0
        self.ended = False

    def line(self, message: Any = None) -> None:
        """Note a line, either way (the client's message, or None)."""
        with self.heard:
            self.last = time.monotonic()
            self.heard.notify_all()
            then = None
            if getattr(message, "method", None) == INITIALIZED:
                then, self.then = self.then, None  # taken once, whoever says it again
        if then is not None:
            threading.Thread(target=self._wait, args=(then,), name="runstore-mcp-idle",
                             daemon=True).start()

    def end(self) -> None:
        with self.heard:
            self.ended = True
            self.heard.notify_all()

    def _wait(self, then: Callable[[], None]) -> None:
        with self.heard:
            while not self.ended:
                quiet = time.monotonic() - self.last
                if quiet >= IDLE_S:
                    break
                self.heard.wait(IDLE_S - quiet)
            if self.ended:
                return
        then()


@contextmanager
def wire(idle: Callable[[], None] | None = None) -> Iterator[None]:
    """fd 0 and fd 1 served as the module says, while it lasts; `idle()` is called as the
    module's Idle says."""
    client_in, saved_in = os.dup(0), os.dup(0)
    saved_out = os.dup(1)
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.dup2(in_read, 0)
    os.dup2(out_write, 1)
    os.close(in_read)
    os.close(out_write)
    out = _Out(saved_out)
    pending = _Pending()
    quiet = _Idle(idle)

    def pump_in() -> None:
        with open(client_in, "rb") as source, open(in_write, "wb", buffering=0) as sink:
            try:
                for line in source:
                    line = mended(line)
                    reply, message = _read(line)
                    quiet.line(message)
                    if reply is not None:
                        out.write(reply)
                        continue
                    if message is not None:
                        pending.sent(message)
                    sink.write(line)
                quiet.end()
                pending.drained(DRAIN_S)
            except OSError:  # the server stopped reading (it is ending): nothing to say
                pass
            finally:
                quiet.end()

    def pump_out() -> None:
        with open(out_read, "rb") as source:
            for line in source:
                if line == _END:
                    return
                pending.answered(line)
                out.write(line)
                quiet.line()

    threading.Thread(target=pump_in, name="runstore-mcp-in", daemon=True).start()
    copier = threading.Thread(target=pump_out, name="runstore-mcp-out", daemon=True)
    copier.start()
    try:
        yield
    finally:
        os.dup2(saved_in, 0)
        os.close(saved_in)
        # Once the SDK is done, fd 1 is the pipe again: the copier copies all before the end.
        os.set_blocking(1, False)  # a client that reads nothing more cannot hold the exit
        try:
            os.write(1, _END)
        except OSError:
            pass
        else:
            copier.join(timeout=30)
        os.dup2(saved_out, 1)
        out.file.close()
        os.close(saved_out)
