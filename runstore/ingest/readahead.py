"""Reading ahead: the per-file step of the next files runs in threads while one file is staged.

Contract: `ReadAhead(tasks, threads)` runs `process_file` for the tasks `tasks` yields, in
`threads` worker threads (none: inline), and hands the results over in that order
(`next()`); at most `READ_AHEAD_BYTES` of source files are in flight. Reading ahead changes
nothing of what is written: results are staged in discovery order.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterator

from ..waits import awaited
from . import changes
from .process import FileResult, FileTask, process_file

READ_AHEAD_BYTES = 64 << 20  # source bytes read ahead of the staged file, at most


class ReadAhead:
    """Runs `process_file` for the coming files in worker threads; hands results over in order.

    The per-file work shares nothing (see process.py) and its heavy parts (pyarrow's JSON reader, Arrow
    compute, numpy) release the GIL, so reading the next files overlaps the staging, the
    Python-bound normalizers and the Delta writes of a commit on the main thread. Files the
    ledger has seen as they are (`ledger.unchanged`) are planned inline: a no-op re-ingest stays a
    `stat` per file. At most `READ_AHEAD_BYTES` of source files are in flight (bounds memory).
    """

    def __init__(self, tasks: Iterator[FileTask], threads: int):
        self._tasks = tasks
        self._pending: deque[tuple[FileTask, Future[FileResult] | None]] = deque()
        self._in_flight = 0
        self._pool = (ThreadPoolExecutor(threads, thread_name_prefix="runstore-read")
                      if threads > 0 else None)

    def __enter__(self) -> "ReadAhead":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def next(self) -> tuple[FileTask, FileResult]:
        """The next task (in the order `tasks` yields them) and its result."""
        self._fill()
        task, fut = self._pending.popleft()
        if fut is None:
            return task, process_file(task)
        self._in_flight -= task.file.size
        self._fill()
        return task, awaited(fut)

    def _fill(self) -> None:
        while not self._pending or self._in_flight < READ_AHEAD_BYTES:
            task = next(self._tasks, None)
            if task is None:
                return
            if self._pool is None or _unchanged(task):
                self._pending.append((task, None))
            else:
                self._pending.append((task, self._pool.submit(process_file, task)))
                self._in_flight += task.file.size


def _unchanged(task: FileTask) -> bool:
    """Whether the ledger saw the file as it is now (so `process_file` only plans a skip)."""
    e = task.entry
    return e is not None and not e.state.get("reread") and changes.unchanged(e, task.file)
