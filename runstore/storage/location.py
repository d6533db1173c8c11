"""Locations: a directory on local disk or a prefix in an S3 bucket, behind one interface.

Contract: `location(where)` is the one constructor: an `S3` for an `s3://bucket/prefix` URI,
else a `Local` (a `pathlib.Path`, so local code keeps os/pathlib speed and idioms). Both are
`Location`s and offer the operations runstore needs, with paths relative to the location and
`/` as separator, so code above `storage/` never asks which kind it holds:

* naming: `loc / "name"` (a location below), `.name`, `.parent`, `uri(rel)`, `str(loc)`;
  `resolved()` (a local path made absolute, `~` expanded);
* reading: `read(rel)`, `read_range(rel, start, end)`, `chunks(rel)` (for hashing),
  `parquet_source(rel)` (what pyarrow's Parquet reader opens), `list(rel)` (sorted names
  directly inside, empty when there is none), `walk_files(skip_dirs)` (every file below,
  with its size and change token), `tree()` (the directory walk discovery needs), and
  `exists()`, `is_file()`, `is_dir()`, `read_text()`;
* writing: `put(rel, data)` replaces an object atomically, `delete(rel)` and `rmtree(rel)`
  remove, `unlink(missing_ok=True)`, `check_writable()` says clearly when the store cannot
  be written;
* engines: `storage_options()` for deltalake and polars (object_store), `duckdb_register(con)`
  lets a DuckDB connection read it, `relative_files(uris)` turns a Delta table's file URIs
  into paths relative to the location.

They differ only where local disk and S3 really do, and each such method says so:
`create(rel, data)` makes a file that must appear whole and only once (a manifest, the
lease): locally written aside, fsynced and hard-linked into place, on S3 a conditional
`If-None-Match: *` put; either fails with `AlreadyExists` when the file is there.
`write_unpublished(rel, data)` writes a file no snapshot lists yet (a ledger): locally
renamed into place, replacing what a writer that died left; on S3 a conditional put, since a
writer whose lease was taken over must not overwrite the new holder's. `sweep_temporaries`
deletes the `.NAME.UUID.tmp` files a killed local writer left (S3 has none: an object
appears whole or not at all). The store's write lock is the other difference (a
process-lifetime `fcntl` lock against a lease object: `lock.py`).

Credentials and endpoint of S3 come from the standard AWS environment and config
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for
S3-compatible services, `AWS_PROFILE`); nothing here prints them. S3 support needs the `s3`
extra (`pip install 'runstore[s3]'`, which brings s3fs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import PosixPath
from typing import Any, Iterable, Iterator

from ..errors import RunstoreError, one_line

CHUNK = 1 << 20  # bytes read at a time when a local file is streamed (hashing)


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


def is_remote(where: Any) -> bool:
    """Whether `where` names an S3 location (an `S3`, or text starting with `s3://`)."""
    return isinstance(where, S3) or (isinstance(where, str) and where.startswith("s3://"))


def location(where: Any) -> "Location":
    """The location `where` names: an `S3` for an `s3://` URI (or an `S3`), else a `Local`."""
    if isinstance(where, Location):
        return where
    return S3(str(where)) if is_remote(where) else Local(where)


class Location:
    """What every location offers (see the module docstring); `Local` and `S3` implement it."""

    __slots__ = ()
    is_remote = False

    def resolved(self) -> "Location":
        raise NotImplementedError

    def uri(self, rel: str = "") -> str:
        raise NotImplementedError

    def read(self, rel: str = "") -> bytes:
        raise NotImplementedError

    def read_range(self, rel: str, start: int, end: int | None = None) -> bytes:
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
    `st_ctime_ns`); `realpath`, `relpath` and `join` work on its paths."""

    top: str

    def scandir(self, path: str) -> list[Any]:
        raise NotImplementedError

    def realpath(self, path: str) -> str:
        raise NotImplementedError

    def relpath(self, path: str, start: str) -> str:
        raise NotImplementedError

    def join(self, path: str, name: str) -> str:
        raise NotImplementedError


# -- local disk ---------------------------------------------------------------------------


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
        """Write a file no snapshot lists yet (aside, then renamed into place). Only the
        holder of the store's lock writes, so a file already there was left by a writer that
        died before publishing, and is replaced."""
        final = self / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

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
        try:
            self.mkdir(parents=True, exist_ok=True)
            probe = self / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise RunstoreError(
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
            p = uri[len("file://"):] if uri.startswith("file://") else uri
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


# -- S3 -----------------------------------------------------------------------------------


class S3(Location):
    """A prefix in an S3 bucket (AWS or any S3-compatible service), read through s3fs."""

    __slots__ = ("base", "_fs")
    is_remote = True

    def __init__(self, uri: str):
        if not uri.startswith("s3://") or len(uri) <= 5:
            raise RunstoreError(f"not an S3 URI: {uri!r} (expected s3://bucket/prefix)")
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
                raise RunstoreError(
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
        # The DuckDB wheel has no httpfs offline: s3:// files are read through fsspec.
        con.register_filesystem(self.filesystem())

    def list(self, rel: str = "") -> list[str]:
        fs = self.filesystem()
        try:
            entries = fs.ls(self._key(rel), detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def read(self, rel: str = "") -> bytes:
        return self.filesystem().cat_file(self._key(rel))

    def read_text(self) -> str:
        return self.read("").decode()

    def read_range(self, rel: str, start: int, end: int | None = None) -> bytes:
        return self.filesystem().cat_file(self._key(rel), start=start, end=end)

    def chunks(self, rel: str) -> Iterator[bytes]:
        yield self.read(rel)  # one request: a range request per chunk would cost more

    def parquet_source(self, rel: str = "") -> Any:
        """A readable, seekable file object (pyarrow reads the footer first)."""
        return self.filesystem().open(self._key(rel), "rb")

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

    def put(self, rel: str, data: bytes) -> None:
        self.filesystem().pipe_file(self._key(rel), data)

    def delete(self, rel: str) -> None:
        try:
            self.filesystem().rm_file(self._key(rel))
        except FileNotFoundError:
            pass

    def unlink(self, missing_ok: bool = False) -> None:
        """Delete this object (as `Path.unlink`; S3 cannot tell a missing one apart cheaply,
        so it is always ignored)."""
        self.delete("")

    def exists(self, rel: str = "") -> bool:
        return bool(self.filesystem().exists(self._key(rel)))

    def is_file(self) -> bool:
        return bool(self.filesystem().isfile(self._key("")))

    def is_dir(self) -> bool:
        return self.exists()  # a prefix exists when an object lies below it

    def rmtree(self, rel: str = "") -> None:
        try:
            self.filesystem().rm(self._key(rel), recursive=True)
        except FileNotFoundError:
            pass

    def sweep_temporaries(self, dirs: Iterable[str]) -> None:
        return None  # an object appears whole or not at all: no temporaries

    def check_writable(self) -> None:
        probe = f"_runstore/.write-probe-{uuid.uuid4().hex}"
        try:
            self.put(probe, b"")
            self.delete(probe)
        except Exception as e:  # botocore/s3fs errors: bad credentials, no bucket, no network
            raise RunstoreError(
                f"cannot write the store at {self}: {one_line(e, 200)}. Check the bucket "
                "exists and the AWS credentials and endpoint (AWS_ENDPOINT_URL) in the "
                "environment.") from e

    def relative_files(self, uris: Iterable[str]) -> list[str]:
        base = self.uri() + "/"
        return sorted(u[len(base):] if u.startswith(base) else u for u in uris)

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
