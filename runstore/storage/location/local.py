"""A location on local disk: a `pathlib.Path` with the `Location` operations, publishing by
fsync + hard link (a link fails when the name exists) and replacing by rename.

The Delta library names a table's files by URL (`file_uris()`: a space is `%20`); they are
read back as paths (`relative_files`). It cannot write a table under some paths at all: it
reads `%41` as `A`, stops at `[`, `]`, `|` and `^` ("invalid object store URL", with a Rust
panic) and refuses `\\` and control characters, so `check_writable` says so before a writer
starts (tests/storage/test_store_paths.py holds the list to the library's own behaviour).
Nor can a store's files be written when the store's path leaves them less than
`LONGEST_INSIDE` bytes of the system's path limit: that too is refused before anything is made.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import PosixPath
from typing import Any, Iterable, Iterator
from urllib.parse import unquote

from ...errors import IOFailure, UsageError
from .base import CHUNK, AlreadyExists, Entry, Location, Tree

# What in a local path the Delta library cannot write a table under (see the module).
DELTA_REFUSES = re.compile(r"%[0-9A-Fa-f]{2}|[\[\]|^\\\x00-\x1f\x7f]")

# The longest path, in bytes, a writer makes inside a store (the deepest is a data file set
# aside by `repair`: `_runstore/quarantine/STAMP/tables/NAME/part-...-c000.snappy.parquet`,
# about 140), with room to spare; a store at the longest path this allows takes every writing
# command (tests/storage/test_store_paths.py).
LONGEST_INSIDE = 160


class Local(Location, PosixPath):
    """A local directory or file: a `pathlib.Path` with the `Location` operations."""

    __slots__ = ()

    def resolved(self) -> "Local":
        return self.expanduser().absolute()

    def uri(self, rel: str = "") -> str:
        return str(self / rel) if rel else str(self)

    def read(self, rel: str = "") -> bytes:
        return (self / rel).read_bytes() if rel else self.read_bytes()

    def read_range(self, rel: str, start: int, end: int | None = None) -> bytes:
        with open(os.path.join(self, rel) if rel else self, "rb") as f:
            f.seek(start)
            return f.read() if end is None else f.read(end - start)

    def read_ranges(self, rel: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        with open(os.path.join(self, rel) if rel else self, "rb") as f:
            out = []
            for start, end in ranges:
                f.seek(start)
                out.append(f.read(end - start))
            return out

    def chunks(self, rel: str) -> Iterator[bytes]:
        # Streamed: a large file is never held whole (hashlib releases the GIL on each chunk).
        with open(self / rel, "rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk

    def parquet_source(self, rel: str = "") -> str:
        return str(self / rel) if rel else str(self)

    def list(self, rel: str = "") -> list[str]:
        try:
            return sorted(os.listdir(self / rel if rel else self))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def walk_files(self, skip_dirs: tuple[str, ...] = ()) -> Iterator[Entry]:
        base = os.fspath(self)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
            for n in sorted(filenames):
                full = os.path.join(dirpath, n)
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                yield Entry(os.path.relpath(full, base).replace(os.sep, "/"), st.st_size,
                            st.st_mtime_ns)

    def tree(self) -> "Tree":
        return _LocalTree(os.path.abspath(self))

    def put(self, rel: str, data: bytes) -> None:
        """Replace `rel` atomically (written aside, then renamed over it)."""
        final = self / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

    def create(self, rel: str, data: bytes) -> None:
        """Create `rel` whole, once: written aside and fsynced, then hard-linked into place
        (a link fails when the name exists: nothing is ever overwritten)."""
        final = self / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.stem}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError as e:
                raise AlreadyExists(f"{final} exists already") from e
        finally:
            tmp.unlink(missing_ok=True)

    def write_unpublished(self, rel: str, data: bytes) -> None:
        """Write a file no snapshot lists yet: as `put` (aside, then renamed into place). Only
        the holder of the store's lock writes, so a file already there was left by a writer
        that died before publishing, and is replaced."""
        self.put(rel, data)

    def delete(self, rel: str) -> None:
        (self / rel).unlink(missing_ok=True)

    def rmtree(self, rel: str = "") -> None:
        shutil.rmtree(self / rel if rel else self)

    def sweep_temporaries(self, dirs: Iterable[str]) -> None:
        """Delete the half-written temporaries (`.NAME.UUID.tmp`) a killed writer left in
        `dirs`: no reader ever opens them, and only the lock holder (the caller) makes them."""
        for sub in dirs:
            d = self / sub
            try:
                names = os.listdir(d)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for n in names:
                if n.startswith(".") and n.endswith(".tmp"):
                    try:
                        (d / n).unlink()
                    except OSError:
                        pass

    def check_writable(self) -> None:
        paths = (str(self.resolved()), os.path.realpath(self))  # as given, and as linked to
        for path in paths:
            bad = DELTA_REFUSES.search(path)
            if bad:
                raise UsageError(
                    f"cannot write a store at {path!r}: its path holds {bad.group()!r}, under "
                    "which the Delta Lake library cannot write a table (nor under [ ] | ^ \\, "
                    "a control character or %XX); choose a --store path without them (a "
                    "store moved there can still be read)")
        _check_length(max(paths, key=lambda s: len(os.fsencode(s))))
        try:
            self.mkdir(parents=True, exist_ok=True)
            probe = self / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise IOFailure(
                f"cannot write the store at {self}: {e.strerror or e}. Choose another --store "
                "or fix the directory's permissions."
            ) from e

    def storage_options(self) -> None:
        return None

    def duckdb_register(self, con: Any) -> None:
        return None  # DuckDB reads local files itself

    def relative_files(self, uris: Iterable[str]) -> list[str]:
        base = str(self.resolve())
        out = []
        for uri in uris:
            p = unquote(uri[len("file://"):] if uri.startswith("file://") else uri)
            out.append(os.path.relpath(os.path.realpath(p), base))
        return sorted(out)


class _LocalTree(Tree):
    """`os.scandir` and `os.path` themselves."""

    def __init__(self, top: str):
        self.top = top

    def scandir(self, path: str) -> list[Any]:
        try:
            with os.scandir(path) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError:
            return []

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def relpath(self, path: str, start: str) -> str:
        return PosixPath(os.path.relpath(path, start)).as_posix()

    def join(self, path: str, name: str) -> str:
        return os.path.join(path, name)


def _check_length(path: str) -> None:
    """Refuse a store at `path` when it leaves its files no room under the system's limit."""
    existing = os.path.dirname(path)
    while existing and not os.path.isdir(existing):
        existing = os.path.dirname(existing)
    try:
        limit = os.pathconf(existing or "/", "PC_PATH_MAX")
    except (OSError, ValueError):
        limit = 4096
    # The limit counts the terminating NUL; a file is the store's path, "/", then its own.
    length = len(os.fsencode(path))
    if length + 1 + LONGEST_INSIDE > limit - 1:
        raise UsageError(
            f"cannot write a store at {path!r}: its path is {length} bytes long, and the "
            f"files inside it take up to {LONGEST_INSIDE + 1} more, past this system's "
            f"limit of {limit - 1} bytes; choose a shorter --store path")
