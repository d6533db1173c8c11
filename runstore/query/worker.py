"""A process of its own for user SQL: answers queries over one store, capped in memory.

Contract: `python -m runstore.query.worker ROOT LIMIT IN_FD OUT_FD` is started by
`workers.Workers`, never by hand. It opens a `Session` over the store at ROOT (DuckDB's memory
limit set from LIMIT, in bytes), warms up — the imports, the snapshot's database, one query,
so that what the libraries and DuckDB's threads hold is counted before the cap — and then
caps its own data at what it holds plus LIMIT (`memory.capped`, hard: it can never raise it
again) and answers, one at a time, the queries the parent sends on IN_FD, on OUT_FD. Every
message either way is two frames of `multiprocessing.connection` (length-prefixed bytes): a
one-byte tag, then its payload.

* parent → worker: `Q` and a pickled `dict` (the parent is the only writer of that pipe): `sql`,
  `params`, `timeout`, `allow_read` (as `Session.fetch`), `skip_rows` (send none of the first
  that many rows, only count them: a page further down a result), `keep_rows`/`keep_bytes`
  (send only the first rows after those, up to that many rows and Arrow bytes, then only count
  the rest; None: all), `text` (see below) and `max_bytes` (a result whose batches pass that
  many bytes is an error: it would not fit the caller's memory either).
* worker → parent: `R` + JSON `{"cap": bytes or null}` once, when ready; then per query any
  number of `B` + an Arrow IPC stream holding one record batch (the first one always, so an
  empty result still has its schema), and last `D` + JSON `{"rows": N}` (all rows of the
  result, sent or not) or `E` + JSON `{"error": class, "message": text, "retire": bool}` (a
  `RunstoreError` subclass of `runstore.errors`, else a one-line internal error).

The query runs through `Session.fetch`: the guard, bound params, the sandbox and the time limit
(`deadline`) exactly as in the caller's process. With `text` (`"print"` or `"file"`,
`rows.AS_TEXT`) its rows are sent as `runstore sql` prints them or writes them to Parquet: a
value Python (or Arrow) cannot hold as DuckDB means it as DuckDB's text (`rows.as_text`),
columns that share a name named apart; without it, as DuckDB gives them. An allocation that
fails — at DuckDB's limit or at the cap, in DuckDB or in Python — is `memory.exceeded`'s error,
sent with `retire: true`, and the process then ends: the allocators keep the memory the query
took, mapped and so counted against the cap, and a fresh process (which the parent starts) has
all of it again. Should the process die instead (an abort inside a library), the parent replaces
it too. SIGINT is ignored (Ctrl-C on the parent's terminal reaches the whole process group; the
parent decides); the process ends when the parent closes IN_FD, and at once when the parent is
gone (a thread watches `getppid()`; the kernel's parent-death signal would fire when the
parent's *thread* that started it ends), so it never outlives its parent, not even in the middle
of a query.
"""

from __future__ import annotations

import json
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

from ..errors import QueryError, RunstoreError, one_line
from . import memory
from .rows import AS_TEXT, as_text

BATCH_ROWS = 65_536  # rows per Arrow batch sent to the parent


def send(conn: Connection, tag: bytes, payload: Any) -> None:
    """One message: its tag, then its payload (bytes, or a buffer such as pyarrow's)."""
    conn.send_bytes(tag)
    conn.send_bytes(payload)


def _error(e: BaseException, retire: bool = False) -> bytes:
    if isinstance(e, RunstoreError):
        report = {"error": type(e).__name__, "message": str(e)}
    else:
        report = {"error": "internal", "message": f"{type(e).__name__}: {one_line(e)}"}
    return json.dumps({**report, "retire": retire}).encode()


def _ipc(batch: Any) -> Any:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def answer(session: Any, request: dict[str, Any], out: Connection) -> int:
    """Run one query and send its batches; the number of rows of its result."""
    keep_rows, keep_bytes = request.get("keep_rows"), request.get("keep_bytes")
    skip_rows = request.get("skip_rows") or 0
    max_bytes = request.get("max_bytes")

    def convert(result: Any) -> int:
        relation = result.relation()
        if request.get("text"):
            relation = as_text(relation, AS_TEXT[request["text"]])
        reader = relation.to_arrow_reader(BATCH_ROWS)
        total = sent_rows = sent_bytes = 0
        first, cut = True, False
        for batch in reader:
            skipped = min(max(skip_rows - total, 0), batch.num_rows)
            total += batch.num_rows
            part = batch.slice(0, 0) if cut else batch.slice(skipped)
            if keep_rows is not None:
                part = part.slice(0, max(0, keep_rows - sent_rows))
            if keep_bytes is not None:
                # Halve the rows until they fit what is left of the budget (a row larger
                # than all of it is not sent: the caller learns of it from the count).
                # Once a batch was cut, no later row is sent: what is sent stays the
                # result's first rows, without a gap.
                wanted = part.num_rows
                while part.num_rows and part.nbytes > keep_bytes - sent_bytes:
                    part = part.slice(0, part.num_rows // 2)
                cut = cut or part.num_rows < wanted
            if part.num_rows or first:
                data = _ipc(part)
                sent_rows += part.num_rows
                sent_bytes += part.nbytes
                if max_bytes is not None and sent_bytes > max_bytes:
                    raise QueryError(
                        f"the result is larger than the memory limit of {memory.show(max_bytes)}"
                        ": select fewer rows or columns (a LIMIT, a WHERE, an aggregate), or "
                        "raise the limit (runstore.open(path, memory_limit=...))")
                send(out, b"B", data)
                first = False
        if first:  # no batch at all: still the schema
            import pyarrow as pa

            send(out, b"B", _ipc(pa.RecordBatch.from_pylist([], schema=reader.schema)))
        return total

    return session.fetch(request["sql"], request.get("params"),
                         allow_read=request.get("allow_read"), convert=convert,
                         timeout=request.get("timeout"))


def serve(session: Any, limit: int, inp: Connection, out: Connection) -> None:
    """Answer queries until the parent closes the pipe, or until one ran out of memory."""
    while True:
        try:
            inp.recv_bytes()  # the tag: Q
            request = pickle.loads(inp.recv_bytes())
        except (EOFError, OSError):
            return
        retire = False
        try:
            rows = answer(session, request, out)
        except BaseException as e:  # noqa: BLE001 - every failure goes back as an answer
            retire = memory.exhausted(e)
            reply = b"E", _error(memory.exceeded(limit) if retire else e, retire)
            del e
        else:
            reply = b"D", json.dumps({"rows": rows}).encode()
        try:
            send(out, *reply)
        except (BrokenPipeError, OSError):
            return
        if retire:
            # The allocators keep what the failed query took (mapped, so counted against the
            # cap) for reuse by themselves: little would be left for the next query. A fresh
            # process has all of it; the parent starts one.
            return


def _warm_up(session: Any) -> None:
    import pyarrow  # noqa: F401 - held before the cap, like DuckDB's database

    try:
        session.fetch("select count(*) from runs", None, allow_read=None,
                      convert=lambda result: result.fetchall())
    except RunstoreError:
        pass  # no store yet, say: each query will say so itself


def _watch_parent(parent: int) -> None:
    """End this process as soon as its parent is gone, even in the middle of a query (the
    request pipe's end is only seen between queries)."""
    import os
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="runstore-worker-parent", daemon=True).start()


def main(argv: list[str]) -> None:
    import os

    from ..storage.location import location
    from ..storage.snapshot import current
    from .session import Session

    _watch_parent(os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    root_text, limit_text, in_fd, out_fd = argv
    limit = int(limit_text)
    inp = Connection(int(in_fd), writable=False)
    out = Connection(int(out_fd), readable=False)
    root = location(root_text).resolved()
    session = Session(root, lambda: current(root), limit)
    _warm_up(session)
    with memory.capped(limit, hard=True) as cap:
        send(out, b"R", json.dumps({"cap": cap}).encode())
        serve(session, limit, inp, out)


if __name__ == "__main__":
    main(sys.argv[1:])
