"""What every location offers (the `Location` and `Tree` interfaces, `Entry`, `AlreadyExists`);
`local.py` and `s3.py` implement them. The package docstring states the contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, TypeVar

from ...errors import RunstoreError

CHUNK = 1 << 20  # bytes read at a time when a local file is streamed (hashing)
T = TypeVar("T")
R = TypeVar("R")


class AlreadyExists(RunstoreError):
    """`create` (or `write_unpublished` on S3) found the file already there."""


@dataclass(frozen=True)
class Entry:
    rel: str  # path relative to the location, `/`-separated
    size: int
    # A local file's mtime_ns. On S3: the object's last-modified time in whole seconds (all
    # S3 gives), with a hash of its ETag in the sub-second digits, so the ledger's
    # (size, mtime_ns) test notices an object rewritten within the same second.
    mtime_ns: int



class Location:
    """What every location offers (see the module docstring); `Local` and `S3` implement it."""

    __slots__ = ()
    is_remote = False
    # How many independent writes or reads (of different tables, say) are worth running at
    # once: where each request is a round trip (S3), many; on a local disk, one.
    requests_at_once = 1

    def each(self, fn: Callable[[T], R], items: Iterable[T], at_least: int = 1) -> list[R]:
        """`fn` of each item, in order: `requests_at_once` of them at a time (`at_least` where
        the work is the caller's more than the location's), in threads when that is more than
        one (independent work against this location)."""
        items = list(items)
        at_once = min(max(self.requests_at_once, at_least), len(items))
        if at_once <= 1:
            return [fn(item) for item in items]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(at_once, thread_name_prefix="runstore-io") as pool:
            return list(pool.map(fn, items))

    def resolved(self) -> "Location":
        raise NotImplementedError

    def uri(self, rel: str = "") -> str:
        raise NotImplementedError

    def read(self, rel: str = "") -> bytes:
        raise NotImplementedError

    def read_range(self, rel: str, start: int, end: int | None = None) -> bytes:
        raise NotImplementedError

    def read_ranges(self, rel: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        raise NotImplementedError

    def chunks(self, rel: str) -> Iterator[bytes]:
        raise NotImplementedError

    def parquet_source(self, rel: str = "") -> Any:
        raise NotImplementedError

    def list(self, rel: str = "") -> list[str]:
        raise NotImplementedError

    def walk_files(self, skip_dirs: tuple[str, ...] = ()) -> Iterator[Entry]:
        raise NotImplementedError

    def tree(self) -> "Tree":
        raise NotImplementedError

    def put(self, rel: str, data: bytes) -> None:
        raise NotImplementedError

    def create(self, rel: str, data: bytes) -> None:
        raise NotImplementedError

    def write_unpublished(self, rel: str, data: bytes) -> None:
        raise NotImplementedError

    def delete(self, rel: str) -> None:
        raise NotImplementedError

    def rmtree(self, rel: str = "") -> None:
        raise NotImplementedError

    def sweep_temporaries(self, dirs: Iterable[str]) -> None:
        raise NotImplementedError

    def check_writable(self) -> None:
        raise NotImplementedError

    def storage_options(self) -> dict[str, str] | None:
        raise NotImplementedError

    def duckdb_register(self, con: Any) -> None:
        raise NotImplementedError

    def relative_files(self, uris: Iterable[str]) -> list[str]:
        raise NotImplementedError


class Tree:
    """A walk over a location's directories, in the shape of `os.scandir`: `top` is the
    location's own path (local: absolute; S3: its URI), `scandir(path)` gives the entries
    directly inside `path` sorted by name, each with `name`, `path`, `is_dir()`,
    `is_file()`, `is_symlink()` and `stat()` (`st_mode`, `st_size`, `st_mtime_ns`,
    `st_ctime_ns`, `st_ino`: None on S3); `realpath`, `relpath` and `join` work on its paths."""

    top: str

    def scandir(self, path: str) -> list[Any]:
        raise NotImplementedError

    def realpath(self, path: str) -> str:
        raise NotImplementedError

    def relpath(self, path: str, start: str) -> str:
        raise NotImplementedError

    def join(self, path: str, name: str) -> str:
        raise NotImplementedError
