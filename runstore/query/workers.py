"""The worker processes that run user SQL outside the caller's process: started, reused, replaced.

Contract: `Workers(root, limit)` keeps up to `SIZE` worker processes (query/worker.py) over the
store at `root`, each capped at `limit` bytes of data beyond what it holds once warmed up; one
is started at once, in the background, so the first query finds it ready. A query takes an
idle worker, or starts one while fewer than `SIZE` exist, else waits for one (its time limit
starts once a worker takes it).

`query(sql, params, timeout=, allow_read=, skip_rows=, keep_rows=, keep_bytes=, max_bytes=,
text=)` is a context manager over one query's `Answer` (`text="print"` or `"file"`: the
values as a caller printing them or writing them to a file needs them, query/worker.py):
`batches()` yields its Arrow record batches as they arrive (the first holds the schema,
maybe no rows), then `rows` is how many rows the
query gave in all (more than were sent when `skip_rows` skipped the first ones or
`keep_rows`/`keep_bytes` kept only the first ones after them; see query/worker.py).
`table(...)` (every row, at most `limit` bytes of them) and `head(...)` (the first rows from
`skip`, and the count) are the two common reads.

* Time: the worker stops the query at `timeout` itself (DuckDB's interrupt, `deadline`); if
  it still has not answered `GRACE_S` later (work the interrupt does not reach), it is killed
  and the query fails with the same time-limit error. A caller that does work of its own
  between batches (the web UI's CSV download) is stopped at `timeout` too: `batches()` checks
  the clock before each one.
* Death: a worker that dies while it runs a query (the kernel, an abort inside a library
  after an allocation failed, a kill) fails that query with an error naming the memory limit
  and how to raise it, and is replaced; so is one whose caller stopped reading before the
  last batch (its pipe still holds the rest). A replacement is started in the background, so
  the next query does not wait for a start-up. Errors the worker reports (`E` messages) are
  raised as the same `runstore.errors` class.
* Stopping: a caller that may give up on its queries runs them inside `stopping(stop)`
  (defined in query/deadline.py, which stops in-process queries so; `runstore mcp` does, for a
  call the client cancels). A query started there, and one still waiting for a worker, checks
  `stop()` every `STOP_POLL_S`; once it is true the worker is killed and replaced, and the
  query fails with `Stopped`.
* `close()` kills every worker (each also ends by itself when this process goes, even in the
  middle of a query: query/worker.py). Workers are only ever signalled by their own PID, and
  run this process's runstore (`PYTHONPATH` starts with the directory it was imported from).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .. import errors
from ..errors import QueryError, RunstoreError
from . import deadline, memory
from .request import checked as checked_request

if TYPE_CHECKING:
    import pyarrow as pa

    from ..storage.manifest import Root

SIZE = 2  # worker processes at most: queries that run at once (memory: SIZE x the limit)
GRACE_S = 2.0  # after its time limit, how long a query's worker may take to stop it
STARTUP_S = 120.0  # how long a worker may take to start (imports, the first database)
# How a caller gives its queries up, for worker and in-process queries alike (deadline.py).
STOP_POLL_S, Stopped, stopping = deadline.STOP_POLL_S, deadline.Stopped, deadline.stopping


class WorkerGone(QueryError):
    """The worker process ended while it ran the query (or before it was ready)."""


class Process:
    """One worker process and the two pipes to it."""

    def __init__(self, root: "Root", limit: int):
        from_parent, to_child = os.pipe()  # (read end, write end)
        from_child, to_parent = os.pipe()
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "runstore.query.worker", str(root), str(limit),
                 str(from_parent), str(to_parent)],
                pass_fds=(from_parent, to_parent), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self.stderr, env=_environment())
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self.pid = self.proc.pid
        self.requests = Connection(to_child, readable=False)
        self.answers = Connection(from_child, writable=False)
        self.cap: int | None = None

    def ready(self) -> None:
        """Wait until the process says it is ready (warmed up and capped)."""
        try:
            tag, payload = self.receive(time.monotonic() + STARTUP_S)
            if tag != b"R":
                raise WorkerGone(f"the query worker started wrongly (said {tag!r})")
        except BaseException:
            self.kill()
            raise
        self.cap = json.loads(payload)["cap"]

    def receive(self, until: float | None,
                stop: Callable[[], bool] | None = None) -> tuple[bytes, bytes]:
        """The next message (tag, payload); `Expired` past `until`, `Stopped` once `stop()`
        is true, `WorkerGone` at EOF."""
        parts = []
        for _ in range(2):
            self._wait(until, stop)
            try:
                parts.append(self.answers.recv_bytes())
            except (EOFError, OSError):
                raise WorkerGone(self.how_it_ended()) from None
        return parts[0], parts[1]

    def _wait(self, until: float | None, stop: Callable[[], bool] | None) -> None:
        """Until a message is there: `Expired` past `until`, `Stopped` once `stop()` is true
        (asked every `STOP_POLL_S`); with neither, at once (the read itself waits)."""
        while until is not None or stop is not None:
            left = None if until is None else max(0.0, until - time.monotonic())
            if stop is not None:
                left = STOP_POLL_S if left is None else min(left, STOP_POLL_S)
            if self.answers.poll(left):
                return
            if stop is not None and stop():
                raise Stopped()
            if until is not None and time.monotonic() >= until:
                raise Expired()

    def how_it_ended(self) -> str:
        """How the process ended, with the last line it wrote on stderr, if any."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit status {code}"
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - 2000))
        lines = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
        return f"{how}: {lines[-1].strip()}" if lines else how

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """End the process (by its PID) and free the pipes."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        for conn in (self.requests, self.answers):
            conn.close()
        self.stderr.close()


def _environment() -> dict[str, str]:
    """This process's environment, with the directory this runstore was imported from first on
    `PYTHONPATH`: the worker runs the same code, however the caller found it."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [here, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


class Expired(Exception):
    """No answer before the query's hard deadline."""


class Answer:
    """One query's answer as it arrives (see the module docstring)."""

    def __init__(self, worker: Process, limit: int, timeout: float | None, started: float,
                 stop: Callable[[], bool] | None = None):
        self._worker = worker
        self._stop = stop
        self._limit = limit
        self.timeout = timeout
        self.started = started
        self.rows: int | None = None
        self.reusable = False  # the worker answered in full and may take the next query

    def _fail(self, e: BaseException) -> RunstoreError:
        if isinstance(e, Expired):
            return deadline.stop_error(self.timeout)
        if isinstance(e, WorkerGone):
            return WorkerGone(f"the process running the query ended ({e}); most likely "
                              f"{memory.exceeded(self._limit)}")
        assert isinstance(e, RunstoreError)
        return e

    def batches(self) -> Iterator["pa.RecordBatch"]:
        import pyarrow as pa

        soft = None if self.timeout is None else self.started + self.timeout
        hard = None if soft is None else soft + GRACE_S
        while True:
            if soft is not None and time.monotonic() > soft:
                raise deadline.stop_error(self.timeout)
            try:
                tag, payload = self._worker.receive(hard, self._stop)
            except (Expired, WorkerGone) as e:
                raise self._fail(e) from None
            if tag == b"B":
                yield from pa.ipc.open_stream(payload)
            elif tag == b"D":
                self.rows = json.loads(payload)["rows"]
                self.reusable = True
                return
            else:
                report = json.loads(payload)
                self.reusable = not report.get("retire")  # it ends after a memory failure
                raise _raised(report)

    def table(self) -> "pa.Table":
        """Every batch as one table."""
        import pyarrow as pa

        return pa.Table.from_batches(list(self.batches()))


def _end(processes: set[Process]) -> None:
    for process in list(processes):
        process.kill()


def _raised(report: dict[str, Any]) -> RunstoreError:
    kind = getattr(errors, str(report.get("error")), None)
    message = str(report.get("message"))
    if isinstance(kind, type) and issubclass(kind, RunstoreError):
        return kind(message)
    return QueryError(f"the query failed in its worker process: {message}")


class Workers:
    """Up to `size` worker processes over one store (see the module docstring)."""

    def __init__(self, root: "Root", limit: int, size: int = SIZE):
        self.root, self.limit, self.size = root, limit, size
        self._idle: list[Process] = []
        self._all: set[Process] = set()
        self._starting = 0  # start-up threads under way
        self._waiting = 0  # queries waiting for a worker
        self._busy = 0  # workers running a query
        self._failure: BaseException | None = None
        self._closed = False
        self._cond = threading.Condition()
        # A Store dropped without `close()` still ends its workers (not only at exit).
        weakref.finalize(self, _end, self._all)
        self._start_in_background()

    def pids(self) -> list[int]:
        """The PIDs of the running workers (for tests and status pages)."""
        with self._cond:
            return sorted(p.pid for p in self._all if p.alive())

    def _start_in_background(self) -> None:
        """Start one more worker in a thread (called with the lock held)."""
        self._starting += 1
        threading.Thread(target=self._start, name="runstore-query-worker-start",
                         daemon=True).start()

    def _start(self) -> None:
        process: Process | None = None
        try:
            process = Process(self.root, self.limit)
            with self._cond:
                if self._closed:
                    raise QueryError("the store was closed")
                self._all.add(process)  # `close()` ends it even while it starts
            process.ready()
            failure = None
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits
            failure = e
        with self._cond:
            self._starting -= 1
            if failure is None and process is not None and not self._closed:
                self._idle.append(process)
                self._failure = None
            else:
                if process is not None:
                    self._drop(process)
                if not self._closed:
                    self._failure = failure
            self._cond.notify_all()

    def _take(self, stop: Callable[[], bool] | None = None) -> Process:
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    if self._closed:
                        raise QueryError("the store was closed")
                    if stop is not None and stop():
                        raise Stopped("the query was stopped before a worker took it: its "
                                      "caller gave it up")
                    while self._idle:
                        process = self._idle.pop()
                        if process.alive():
                            self._busy += 1
                            return process
                        self._drop(process)
                    if self._failure is not None and not self._starting:
                        failure, self._failure = self._failure, None
                        raise QueryError(f"cannot start a process for the query: {failure}")
                    # One more worker for each query waiting beyond those already starting.
                    if self._starting < self._waiting and \
                            self._busy + self._starting < self.size:
                        self._start_in_background()
                    self._cond.wait(None if stop is None else STOP_POLL_S)
            finally:
                self._waiting -= 1

    def _drop(self, process: Process) -> None:
        self._all.discard(process)
        threading.Thread(target=process.kill, daemon=True).start()

    def _give_back(self, process: Process, reusable: bool) -> None:
        with self._cond:
            self._busy -= 1
            if reusable and not self._closed and process.alive():
                self._idle.append(process)
            else:
                self._drop(process)
                if not self._closed and not self._idle and not self._starting:
                    self._start_in_background()  # the next query finds one ready
            self._cond.notify_all()

    @contextmanager
    def query(self, sql: str, params: dict[str, Any] | None = None, *,
              timeout: float | None = None, allow_read: list[str] | None = None,
              skip_rows: int = 0, keep_rows: int | None = None,
              keep_bytes: int | None = None, max_bytes: int | None = None,
              text: str | None = None) -> Iterator[Answer]:
        """One query in a worker (see the module docstring)."""
        timeout = deadline.checked(timeout)
        params = checked_request(sql, params)
        request = pickle.dumps({"sql": sql, "params": params, "timeout": timeout,
                                "allow_read": allow_read, "skip_rows": skip_rows,
                                "keep_rows": keep_rows, "keep_bytes": keep_bytes,
                                "max_bytes": max_bytes, "text": text})
        stop = deadline.caller_stop()
        process = self._take(stop)
        answer = Answer(process, self.limit, timeout, time.monotonic(), stop)
        try:
            try:
                process.requests.send_bytes(b"Q")
                process.requests.send_bytes(request)
            except OSError:
                raise answer._fail(WorkerGone(process.how_it_ended())) from None
            yield answer
        finally:
            self._give_back(process, answer.reusable)

    def table(self, sql: str, params: dict[str, Any] | None = None, *,
              timeout: float | None = None,
              allow_read: list[str] | None = None) -> "pa.Table":
        """Every row of the query's result (at most `limit` bytes of it) as one table."""
        with self.query(sql, params, timeout=timeout, allow_read=allow_read,
                        max_bytes=self.limit) as answer:
            return answer.table()

    def head(self, sql: str, params: dict[str, Any] | None = None, *,
             timeout: float | None = None, rows: int, nbytes: int,
             skip: int = 0, text: str | None = None) -> tuple["pa.Table", int]:
        """The first `rows` rows of the result after the first `skip` (at most `nbytes` of
        them) and the result's row count."""
        with self.query(sql, params, timeout=timeout, skip_rows=skip, keep_rows=rows,
                        keep_bytes=nbytes, text=text) as answer:
            table = answer.table()
        assert answer.rows is not None
        return table, answer.rows

    def close(self) -> None:
        """Kill every worker; queries still running fail."""
        with self._cond:
            self._closed = True
            processes, self._idle = list(self._all), []
            self._all.clear()
            self._cond.notify_all()
        for process in processes:
            process.kill()
