"""How much memory user SQL may use, and what holds a process to it.

Contract:

* `parse(value)` is a memory limit in bytes: an int (bytes), or text such as `4GB`, `1.5 GiB`,
  `512MB` (KB/MB/GB/TB are powers of 1000 and KiB/MiB/GiB/TiB of 1024, as DuckDB reads
  them), or `25%` (of `machine()`); anything else, or less than `MINIMUM`, is a `UsageError`
  that says what to write.
* `machine()` is this machine's memory: the physical memory, or the memory limit of the
  container (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`) when that is lower.
* `resolve(value)` is the limit in force: `value` when given, else `$RUNSTORE_MEMORY_LIMIT`,
  else `default()`, a quarter of `machine()`: the web UI runs at most two queries at a time
  (`workers.SIZE`), so even two runaway queries leave half the machine to everything else.
* `duckdb_setting(limit)` is what DuckDB's own `memory_limit` is set to on every query
  connection (`sandbox.confine`): three quarters of the limit, so that DuckDB's buffer
  manager (hash tables, sorts, which cannot spill: the sandbox allows no temporary
  directory) stops first, with its own accounting, and a quarter is left for what DuckDB
  does not account (strings being built, a result being converted). DuckDB's limit alone
  does not bound a process: `sum(length(repeat(run_id, 1000000)))` grows far past it.
* `capped(limit)` is what does: a context manager that holds this process's private
  writable memory (`RLIMIT_DATA`: the heap and anonymous mappings, which is where every
  query allocates) to what it has now plus `limit`, and restores the previous limit on exit.
  An allocation past it fails (DuckDB's out-of-memory error, Python's `MemoryError`) instead
  of growing until the kernel's OOM killer ends something. Only ever applied to a process
  runstore owns — `runstore sql` and `runstore runs` (a `--where` is user SQL) through
  `bounded(limit)`, which also raises a `MemoryError` as `exceeded`; the query workers —
  never to a caller's Python process.
  `RLIMIT_DATA` rather than `RLIMIT_AS`: the address space counts what libraries reserve
  and never use (glibc reserves 64 MB per thread arena, DuckDB's threads their stacks), so
  a runstore process that holds ~0.2 GB of data has ~1 GB of address space, and more the
  more cores the machine has; the data limit counts what was made writable, which is what
  a query's allocations grow. Where the OS has no `/proc` (not Linux), nothing is capped
  and DuckDB's own limit is the only one.
* `exceeded(limit)` is the error to raise when a query ran out: it names the limit and how
  to raise it. `exhausted(e)` says whether `e` is such a failure (DuckDB's out-of-memory
  error, also as the OSError it becomes through Arrow's C stream, `MemoryError`, pyarrow's
  `ArrowMemoryError`, or an error wrapping one).
* `show(n)` is a byte count for people (`4.2 GB`).
"""

from __future__ import annotations

import os
import re
import resource
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..errors import LimitReached, UsageError

ENV = "RUNSTORE_MEMORY_LIMIT"
SHARE = 0.25  # of the machine's memory, by default (see the module docstring)
DUCKDB_SHARE = 0.75  # of the limit, for DuckDB's own memory_limit
MINIMUM = 64 * 2**20  # less cannot even hold a query's set-up
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*|%)\s*", re.ASCII)  # digits 0-9 only
FORMS = "bytes, or a size such as 4GB, 512MB, 1.5GiB, or a share of the machine's memory (25%)"
_CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine() -> int:
    """This machine's memory in bytes (a container's limit when lower than the RAM)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for name in _CGROUP_FILES:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < physical:
            return int(text)
    return physical


def default() -> int:
    """The limit when none is given: a quarter of `machine()`."""
    return int(machine() * SHARE)


def parse(value: Any, what: str = "memory limit") -> int:
    """A memory limit as bytes (see the module docstring); a UsageError for anything else."""
    if isinstance(value, bool):
        raise UsageError(f"{what} must be {FORMS}; got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and (m := _SIZE.fullmatch(value)):
        number, unit = float(m.group(1)), m.group(2).lower()
        if unit == "%":
            if not 0 < number <= 100:
                raise UsageError(f"{what} {value!r}: a share of the machine's memory is above "
                                 "0% and at most 100%")
            n = int(machine() * number / 100)
        elif unit in _UNITS:
            n = int(number * _UNITS[unit])
        else:
            raise UsageError(f"{what} {value!r}: unknown unit {m.group(2)!r}; write {FORMS}")
    else:
        raise UsageError(f"{what} must be {FORMS}; got {value!r}")
    if n < MINIMUM:
        raise UsageError(f"{what} {value!r} is below the smallest usable limit, "
                         f"{show(MINIMUM)}")
    return n


def resolve(value: Any = None) -> int:
    """The limit in force: `value`, else `$RUNSTORE_MEMORY_LIMIT`, else `default()`."""
    if value is not None:
        return parse(value)
    env = os.environ.get(ENV, "").strip()
    if env:
        return parse(env, f"${ENV}")
    return default()


def duckdb_setting(limit: int) -> str:
    """DuckDB's `memory_limit` for a query connection under `limit` (bytes, as DuckDB reads
    them)."""
    return f"{int(limit * DUCKDB_SHARE)}B"


def show(n: int) -> str:
    """A byte count for people, in decimal units as `parse` reads them back."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _option(n: int) -> str:
    """`n` bytes as one writes it in `--memory-limit` (`8GB`, `1024MB`, else `12.6GB`)."""
    for unit, size in (("GB", 10**9), ("MB", 10**6)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return show(n).replace(" ", "")


def exceeded(limit: int) -> LimitReached:
    """The error for a query that needed more memory than `limit` (exit status 5, as a time
    limit's)."""
    more = _option(2 * limit)
    return LimitReached(
        f"the query needed more memory than its limit of {show(limit)}: narrow it (a WHERE, a "
        f"LIMIT, fewer or shorter values) or raise the limit (runstore sql --memory-limit "
        f"{more}; runstore ui --memory-limit {more}; ${ENV}; Python: "
        f"runstore.open(path, memory_limit='{more}'))")


def exhausted(e: BaseException | None) -> bool:
    """Whether `e` (or an error it wraps) is an allocation that failed."""
    import duckdb

    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, (MemoryError, duckdb.OutOfMemoryException)):
            return True
        # DuckDB's error, after crossing the Arrow C stream (a result read as Arrow batches),
        # is an OSError that keeps only its text, which starts with DuckDB's error class.
        if isinstance(e, OSError) and str(e).startswith("Out of Memory Error"):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def data_size() -> int | None:
    """This process's private writable memory in bytes (`VmData`: what `RLIMIT_DATA`
    counts), or None where /proc does not say."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@contextmanager
def capped(limit: int, *, hard: bool = False) -> Iterator[int | None]:
    """Hold this process's data to what it holds now plus `limit` (soft `RLIMIT_DATA`;
    `hard=True` also lowers the hard limit, for a process that must never raise it again);
    yields the cap in bytes, or None where it cannot be applied."""
    now = data_size()
    if now is None:
        yield None
        return
    soft, old_hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = now + limit
    if old_hard != resource.RLIM_INFINITY:
        cap = min(cap, old_hard)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap if hard else old_hard))
    try:
        yield cap
    finally:
        if not hard:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, old_hard))


@contextmanager
def bounded(limit: int) -> Iterator[None]:
    """`capped(limit)` for a command of runstore's own, an allocation failing inside it
    raised as `exceeded(limit)`."""
    with capped(limit):
        try:
            yield
        except MemoryError as e:
            raise exceeded(limit) from e
