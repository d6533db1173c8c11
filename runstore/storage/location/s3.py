"""A location in an S3 bucket (AWS or any S3-compatible service) through s3fs: publishing by
conditional put (`If-None-Match: *`), listing through one recursive listing per walk.

What the service, or the way to it, refuses — no credentials, access denied, no such bucket,
an endpoint that does not answer — is an `IOFailure` naming the location and what to check
(`_refused`), from every method that calls the service; a missing object stays
`FileNotFoundError`, as callers read it.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import inspect
import os
import re
import threading
import uuid
import weakref
from typing import Any, Callable, Iterable, Iterator, TypeVar

from ...errors import IOFailure, RunstoreError, UsageError, one_line
from .base import AlreadyExists, Entry, Location, Tree

F = TypeVar("F", bound=Callable[..., Any])
# Where the errors of the service and of the way to it come from (s3fs maps some to OSError).
_SERVICE_MODULES = ("botocore", "aiobotocore", "s3fs", "aiohttp")


def _from_service(e: BaseException) -> bool:
    return isinstance(e, OSError) or any(
        (c.__module__ or "").startswith(_SERVICE_MODULES) for c in type(e).__mro__)


def _refused(location: "S3", e: BaseException) -> IOFailure:
    return IOFailure(f"cannot use {location}: {one_line(e, 200)}. Check the bucket exists "
                     "and the AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                     "or AWS_PROFILE) and endpoint (AWS_ENDPOINT_URL) in the environment.")


def _service(method: F) -> F:
    """`method` (a plain function or a generator) with the service's refusals as `_refused`."""
    def reraise(self: "S3", e: Exception) -> None:
        if isinstance(e, (FileNotFoundError, AlreadyExists, RunstoreError)) \
                or not _from_service(e):
            raise e
        raise _refused(self, e) from e

    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def each(self: "S3", *args: Any, **kwargs: Any) -> Any:
            try:
                yield from method(self, *args, **kwargs)
            except Exception as e:
                reraise(self, e)
        return each  # type: ignore[return-value]

    @functools.wraps(method)
    def call(self: "S3", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as e:
            reraise(self, e)
    return call  # type: ignore[return-value]


class S3(Location):
    """A prefix in an S3 bucket (AWS or any S3-compatible service), read through s3fs."""

    __slots__ = ("base", "_fs")
    is_remote = True
    requests_at_once = 8

    def __init__(self, uri: str):
        if not uri.startswith("s3://") or not uri[len("s3://"):].split("/", 1)[0]:
            raise UsageError(f"not an S3 URI: {uri!r} (expected s3://bucket/prefix)")
        self.base = uri.rstrip("/")
        self._fs: Any = None

    def __str__(self) -> str:
        return self.base

    def __repr__(self) -> str:
        return f"S3({self.base!r})"

    def __truediv__(self, rel: str) -> "S3":
        """The location `rel` below this one (sharing its connection), as `Path / name` is."""
        sub = S3(self.uri(str(rel).strip("/")))
        sub._fs = self._fs
        return sub

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3) and other.base == self.base

    def __hash__(self) -> int:
        return hash(self.base)

    @property
    def name(self) -> str:
        return self.base.rsplit("/", 1)[-1]

    @property
    def parent(self) -> "S3":
        head = self.base.rsplit("/", 1)[0]
        sub = S3(head if len(head) > len("s3:/") else self.base)
        sub._fs = self._fs
        return sub

    def resolved(self) -> "S3":
        return self

    def uri(self, rel: str = "") -> str:
        return f"{self.base}/{rel}" if rel else self.base

    def _key(self, rel: str) -> str:
        return self.uri(rel)[len("s3://"):]

    def filesystem(self) -> Any:
        """The fsspec filesystem (s3fs) the location is read and written through."""
        if self._fs is None:
            try:
                import s3fs
            except ImportError as e:
                raise UsageError(
                    "an s3:// location needs the s3 extra: pip install 'runstore[s3]'") from e
            kwargs: dict[str, Any] = {}
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            if endpoint:
                kwargs["endpoint_url"] = endpoint
            self._fs = s3fs.S3FileSystem(use_listings_cache=False, **kwargs)
        return self._fs

    def storage_options(self) -> dict[str, str]:
        """deltalake/polars (object_store) options: the environment supplies credentials."""
        opts: dict[str, str] = {}
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            opts["AWS_ENDPOINT_URL"] = endpoint
            if endpoint.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            opts["AWS_REGION"] = region
        # Delta commits use S3's conditional put (If-None-Match), which AWS and most
        # S3-compatible services support, instead of a DynamoDB lock table.
        opts["AWS_CONDITIONAL_PUT"] = "etag"
        return opts

    def duckdb_register(self, con: Any) -> None:
        # The DuckDB wheel has no httpfs offline: s3:// files are read through fsspec, with
        # what a table's data file is (its size, that it exists) asked once: DuckDB asks
        # again at each open, a round trip each.
        con.register_filesystem(_query_filesystem(self.filesystem()))

    @_service
    def list(self, rel: str = "") -> list[str]:
        fs = self.filesystem()
        try:
            entries = fs.ls(self._key(rel), detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries)

    @_service
    def read(self, rel: str = "") -> bytes:
        # One GET. Left to itself s3fs first asks the object's size (a HEAD: a round trip
        # more) to fetch a large one in parts at once; what is read whole here is small (a
        # manifest, the ledger, a Delta log entry, a lease). `chunks` keeps the parts.
        return self.filesystem().cat_file(self._key(rel), max_concurrency=1)

    def read_text(self) -> str:
        return self.read("").decode()

    @_service
    def read_range(self, rel: str, start: int, end: int | None = None) -> bytes:
        return self.filesystem().cat_file(self._key(rel), start=start, end=end)

    @_service
    def read_ranges(self, rel: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        # Concurrent range requests (fsspec's async batch): the sampled blocks of a grown
        # file cost about one round trip, not one each.
        key = self._key(rel)
        return self.filesystem().cat_ranges([key] * len(ranges), [s for s, _ in ranges],
                                            [e for _, e in ranges], on_error="raise")

    @_service
    def chunks(self, rel: str) -> Iterator[bytes]:
        # The whole object at once (a data file being hashed: large ones in parts at once),
        # not a range request per chunk, which would cost more.
        yield self.filesystem().cat_file(self._key(rel))

    @_service
    def parquet_source(self, rel: str = "") -> Any:
        """A readable, seekable file object (pyarrow reads the footer first)."""
        return self.filesystem().open(self._key(rel), "rb")

    @_service
    def _create(self, rel: str, data: bytes) -> None:
        """A conditional put: fails with `AlreadyExists` when the object exists, so two
        writers can never both publish the same snapshot or both take the lock."""
        fs = self.filesystem()
        try:
            fs.pipe_file(self._key(rel), data, mode="create")
        except Exception as e:  # botocore's ClientError: PreconditionFailed when it exists
            if "PreconditionFailed" in str(e) or "412" in str(e) or isinstance(e, FileExistsError):
                raise AlreadyExists(f"{self.uri(rel)} exists already") from e
            raise

    def create(self, rel: str, data: bytes) -> None:
        self._create(rel, data)

    def write_unpublished(self, rel: str, data: bytes) -> None:
        self._create(rel, data)

    @_service
    def put(self, rel: str, data: bytes) -> None:
        self.filesystem().pipe_file(self._key(rel), data)

    @_service
    def delete(self, rel: str) -> None:
        try:
            self.filesystem().rm_file(self._key(rel))
        except FileNotFoundError:
            pass

    def unlink(self, missing_ok: bool = False) -> None:
        """Delete this object (as `Path.unlink`; S3 cannot tell a missing one apart cheaply,
        so it is always ignored)."""
        self.delete("")

    @_service
    def exists(self, rel: str = "") -> bool:
        return bool(self.filesystem().exists(self._key(rel)))

    @_service
    def is_file(self) -> bool:
        return bool(self.filesystem().isfile(self._key("")))

    def is_dir(self) -> bool:
        return self.exists()  # a prefix exists when an object lies below it

    @_service
    def rmtree(self, rel: str = "") -> None:
        try:
            self.filesystem().rm(self._key(rel), recursive=True)
        except FileNotFoundError:
            pass

    def sweep_temporaries(self, dirs: Iterable[str]) -> None:
        return None  # an object appears whole or not at all: no temporaries

    def check_writable(self) -> None:
        probe = f"_runstore/.write-probe-{uuid.uuid4().hex}"
        self.put(probe, b"")  # a refusal: `_refused`'s IOFailure
        self.delete(probe)

    def relative_files(self, uris: Iterable[str]) -> list[str]:
        base = self.uri() + "/"
        return sorted(u[len(base):] if u.startswith(base) else u for u in uris)

    @_service
    def walk_files(self, skip_dirs: tuple[str, ...] = ()) -> Iterator[Entry]:
        fs = self.filesystem()
        base = self._key("")
        try:
            found = fs.find(base, detail=True, withdirs=False)
        except FileNotFoundError:  # no such bucket
            return
        for path, info in sorted(found.items()):
            rel = path[len(base):].lstrip("/")
            if skip_dirs and any(part in skip_dirs for part in rel.split("/")[:-1]):
                continue
            etag = str(info.get("ETag") or "")
            modified = info.get("LastModified")
            seconds = int(modified.timestamp()) if hasattr(modified, "timestamp") else 0
            tag = int.from_bytes(hashlib.sha1(etag.encode()).digest()[:4], "big") % 1_000_000_000
            yield Entry(rel, int(info.get("size") or 0), seconds * 1_000_000_000 + tag)

    def tree(self) -> "Tree":
        return _S3Tree(self)


class _S3Stat:
    """What `stat()` gives of an object: a regular file, its size and change token."""

    __slots__ = ("st_size", "st_mtime_ns")
    st_mode = 0o100644  # a regular file
    st_ctime_ns = None  # objects have no ctime
    st_ino = None  # nor an inode: a put replaces the whole object, and its token says so

    def __init__(self, size: int, mtime_ns: int):
        self.st_size, self.st_mtime_ns = size, mtime_ns


class _S3Entry:
    """One child of a prefix, as an `os.DirEntry` would describe it."""

    __slots__ = ("name", "path", "_stat", "_dir")

    def __init__(self, name: str, path: str, stat: _S3Stat | None, is_dir: bool):
        self.name, self.path, self._stat, self._dir = name, path, stat, is_dir

    def is_dir(self) -> bool:
        return self._dir

    def is_file(self) -> bool:
        return self._stat is not None

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> _S3Stat:
        if self._stat is None:
            raise IsADirectoryError(self.path)
        return self._stat


class _S3Tree(Tree):
    """Directories of a prefix from one listing of everything below it (`walk_files`): a
    walk costs one request however deep the tree, and `scandir` is a dictionary lookup."""

    def __init__(self, top: S3):
        self.top = top.uri()
        self.children: dict[str, dict[str, _S3Entry]] = {}
        for e in top.walk_files():
            parts = e.rel.split("/")
            if not all(parts):  # a "directory marker" object (`a/`): not a file
                continue
            for i in range(len(parts)):
                parent = "/".join([self.top, *parts[:i]])
                path = f"{parent}/{parts[i]}"
                last = i == len(parts) - 1
                kids = self.children.setdefault(parent, {})
                known = kids.get(parts[i])
                if last:
                    kids[parts[i]] = _S3Entry(parts[i], path, _S3Stat(e.size, e.mtime_ns),
                                              known is not None and known.is_dir())
                elif known is None or not known.is_dir():
                    kids[parts[i]] = _S3Entry(parts[i], path, known._stat if known else None,
                                              True)

    def scandir(self, path: str) -> list[Any]:
        return sorted(self.children.get(path.rstrip("/"), {}).values(), key=lambda e: e.name)

    def realpath(self, path: str) -> str:
        return path.rstrip("/")

    def relpath(self, path: str, start: str) -> str:
        rel = path.rstrip("/")[len(start.rstrip("/")):].strip("/")
        return rel or "."

    def join(self, path: str, name: str) -> str:
        return f"{path.rstrip('/')}/{name}"


# A table's data file (`tables/NAME/part-NNNNN-UUID-cNNN.snappy.parquet`, as deltalake names
# them): written once under a fresh name, never rewritten (a rewrite, compaction or vacuum
# writes new names and deletes old ones).
_DATA_FILE = re.compile(r"/tables/[^/]+/part-\d{5}-[0-9a-f-]{36}-c\d{3}(\.\w+)?\.parquet$")
_REMEMBERING: dict[type, type] = {}  # a filesystem class -> its remembering subclass
# A data file up to this size is fetched whole, in one request, the first time a query opens
# it, and its bytes kept: DuckDB opens a file again for each scan of it and asks for its
# footer and each column chunk apart, a round trip each (~10 opens and ~7 requests per file
# for one small query). Up to `KEPT_BYTES` of them in all, the least recently opened going:
# room for the small tables of hundreds of runs, well inside the web UI's 500 MB (docs/ui.md).
WHOLE_FILE_BYTES = 8 << 20
KEPT_BYTES = 64 << 20
_QUERY_FILESYSTEMS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _query_filesystem(fs: Any) -> Any:
    """The filesystem queries read `fs`'s objects through, one per `fs` (so a process that
    queries again, the web UI say, asks no more): `fs`'s class and settings, but a data
    file's details are kept once asked (its size, that it exists; only for the files
    `_DATA_FILE` matches, which never change), and so are the bytes of a data file up to
    `WHOLE_FILE_BYTES`, fetched whole in one request when first opened (`KEPT_BYTES` of them
    at most). Everything else is asked each time, as `fs` does. The writers keep `fs`, which
    remembers nothing (a deleted file reads as deleted)."""
    qfs = _QUERY_FILESYSTEMS.get(fs)
    if qfs is not None:
        return qfs
    base = type(fs)
    cls = _REMEMBERING.get(base)
    if cls is None:
        class Remembering(base):  # type: ignore[misc, valid-type]
            cachable = False  # fsspec's instance cache would hand this one to other callers

            def __init__(self, *args: Any, **kwargs: Any):
                super().__init__(*args, **kwargs)
                self.runstore_details: dict[str, dict] = {}
                self.runstore_kept = _Kept(KEPT_BYTES)

            def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
                key = self._strip_protocol(path)
                if mode != "rb" or not _DATA_FILE.search("/" + key):
                    return super()._open(path, mode, **kwargs)
                data = self.runstore_kept.get(key)
                if data is None:
                    if self.info(key)["size"] > WHOLE_FILE_BYTES:
                        return super()._open(path, mode, **kwargs)
                    data = self.cat_file(key)
                    self.runstore_kept.put(key, data)
                return super()._open(path, mode, **{**kwargs, "cache_type": "all",
                                                    "cache_options": {"data": data},
                                                    "size": len(data)})

            async def _info(self, path: str, *args: Any, **kwargs: Any) -> dict:
                key = self._strip_protocol(path)
                if key in self.runstore_details:
                    return dict(self.runstore_details[key])
                info = await super()._info(path, *args, **kwargs)
                if _DATA_FILE.search("/" + key):
                    self.runstore_details[key] = dict(info)
                return info

            async def _exists(self, path: str, **kwargs: Any) -> bool:
                if self._strip_protocol(path) in self.runstore_details:
                    return True
                return await super()._exists(path, **kwargs)

        cls = _REMEMBERING[base] = Remembering
    qfs = _QUERY_FILESYSTEMS[fs] = cls(*fs.storage_args, **fs.storage_options)
    return qfs


class _Kept:
    """Bytes of files by key, at most `limit` bytes in all, the least recently used dropped
    first; safe to use from DuckDB's threads."""

    def __init__(self, limit: int):
        self.limit, self.size = limit, 0
        self.items: "collections.OrderedDict[str, bytes]" = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self.lock:
            data = self.items.get(key)
            if data is not None:
                self.items.move_to_end(key)
            return data

    def put(self, key: str, data: bytes) -> None:
        with self.lock:
            if key in self.items:
                return
            self.items[key] = data
            self.size += len(data)
            while self.size > self.limit and len(self.items) > 1:
                _, old = self.items.popitem(last=False)
                self.size -= len(old)
