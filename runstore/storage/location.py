"""S3 locations: a store, or a tree of runs, under an `s3://bucket/prefix`.

Contract: `S3(uri)` names a prefix; `S3 / "name"` a location below it (as `Path / name` does,
so store code builds paths the same way for both). It offers the few operations runstore
needs, with paths relative to the location and `/` as separator: `list(dir)` (names directly
inside), `walk()` (every object below, with its size and a change token), `read(rel)`,
`read_range(rel, start, end)`, `open(rel)` (a seekable file for Parquet footers),
`write_new(rel, data)` — a conditional `If-None-Match: *` put that fails with
`AlreadyExists` when the object exists, so two writers can never both publish the same
snapshot or both take the lock — `put(rel, data)` (overwrite), `delete(rel)`, `rmtree(rel)`,
`exists(rel)` and `uri(rel)`, plus the `Path` methods store code calls on either kind of
location: `read_text()`, `unlink(missing_ok=True)`, `exists()`. `listdir(where)` and
`rmtree(where)` take either kind. And what the engines need: `storage_options()` for
deltalake and polars (object_store), `filesystem()` (an fsspec filesystem) for DuckDB's
`register_filesystem` and pyarrow. Local stores use `pathlib.Path` directly (tables.py).

Credentials and endpoint come from the standard AWS environment and config
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for S3-compatible
services, `AWS_PROFILE`); nothing here prints them. S3 support needs the `s3` extra
(`pip install 'runstore[s3]'`, which brings s3fs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..errors import RunstoreError


class AlreadyExists(RunstoreError):
    """`write_new` found the file already there."""


@dataclass(frozen=True)
class Entry:
    rel: str  # path relative to the location, `/`-separated
    size: int
    # Stands in for a local file's mtime_ns: the object's last-modified time in whole seconds
    # (all S3 gives), with a hash of its ETag in the sub-second digits, so the ledger's
    # (size, mtime_ns) test notices an object rewritten within the same second.
    mtime_ns: int


def is_remote(uri: Any) -> bool:
    return isinstance(uri, S3) or (isinstance(uri, str) and uri.startswith("s3://"))


def location(where: Any) -> "Path | S3":
    """An `S3` for an `s3://` URI (or an `S3`), else a `Path`: what every place that accepts
    either kind of location turns its argument into."""
    if isinstance(where, S3):
        return where
    return S3(str(where)) if is_remote(where) else Path(where)


def listdir(where: "Path | S3") -> list[str]:
    """Sorted names directly inside a directory (an S3 prefix); empty when there is none."""
    if isinstance(where, S3):
        return where.list("")
    try:
        return sorted(os.listdir(where))
    except (FileNotFoundError, NotADirectoryError):
        return []


def rmtree(where: "Path | S3") -> None:
    """Remove a directory (every object under an S3 prefix) and all it holds."""
    if isinstance(where, S3):
        where.rmtree()
    else:
        shutil.rmtree(where)


def storage_options(where: Any) -> dict[str, str] | None:
    """deltalake/polars options for a location: None for a local path."""
    return where.storage_options() if isinstance(where, S3) else None


class S3:
    """A prefix in an S3 bucket (AWS or any S3-compatible service)."""

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

    def uri(self, rel: str = "") -> str:
        return f"{self.base}/{rel}" if rel else self.base

    def _key(self, rel: str) -> str:
        return self.uri(rel)[len("s3://"):]

    def filesystem(self) -> Any:
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

    def list(self, rel: str) -> list[str]:
        fs = self.filesystem()
        try:
            entries = fs.ls(self._key(rel), detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def read(self, rel: str) -> bytes:
        return self.filesystem().cat_file(self._key(rel))

    def read_text(self) -> str:
        return self.read("").decode()

    def write_new(self, rel: str, data: bytes) -> None:
        fs = self.filesystem()
        try:
            fs.pipe_file(self._key(rel), data, mode="create")
        except Exception as e:  # botocore's ClientError: PreconditionFailed when it exists
            if "PreconditionFailed" in str(e) or "412" in str(e) or isinstance(e, FileExistsError):
                raise AlreadyExists(f"{self.uri(rel)} exists already") from e
            raise

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

    def open(self, rel: str = "") -> Any:
        """A readable, seekable file object (for pyarrow's Parquet reader)."""
        return self.filesystem().open(self._key(rel), "rb")

    def read_range(self, rel: str, start: int, end: int | None = None) -> bytes:
        return self.filesystem().cat_file(self._key(rel), start=start, end=end)

    def rmtree(self, rel: str = "") -> None:
        try:
            self.filesystem().rm(self._key(rel), recursive=True)
        except FileNotFoundError:
            pass

    def walk(self) -> Iterator[Entry]:
        fs = self.filesystem()
        base = self._key("")
        try:
            found = fs.find(base, detail=True, withdirs=False)
        except FileNotFoundError:  # no such bucket
            return
        for path, info in sorted(found.items()):
            rel = path[len(base):].lstrip("/")
            etag = str(info.get("ETag") or "")
            modified = info.get("LastModified")
            seconds = int(modified.timestamp()) if hasattr(modified, "timestamp") else 0
            tag = int.from_bytes(hashlib.sha1(etag.encode()).digest()[:4], "big") % 1_000_000_000
            yield Entry(rel, int(info.get("size") or 0), seconds * 1_000_000_000 + tag)
