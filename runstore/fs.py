"""Locations: a store (or a tree of runs) on local disk or on S3-compatible object storage.

Contract: `location(uri)` returns a `Local` for a path and an `S3` for `s3://bucket/prefix`.
Both offer the few operations runstore needs, with paths relative to the location and `/` as
separator: `list(dir)` (names directly inside), `walk()` (every file below, with size and a
change token), `read(rel)`, `write_new(rel, data)` — create a file that must not exist yet,
atomically (local: written aside then hard-linked; S3: a conditional `If-None-Match: *` put),
so two writers can never both publish the same snapshot — `put(rel, data)` (overwrite),
`delete(rel)`, and `uri(rel)` for engines. For S3 they also give what the engines need:
`storage_options()` for deltalake and polars, `filesystem()` (an fsspec filesystem) for
DuckDB's `register_filesystem`.

Credentials and endpoint come from the standard AWS environment and config
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for S3-compatible
services, `AWS_PROFILE`); nothing here prints them. S3 support needs the `s3` extra
(`pip install 'runstore[s3]'`, which brings s3fs).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .errors import RunstoreError


class AlreadyExists(RunstoreError):
    """`write_new` found the file already there."""


@dataclass(frozen=True)
class Entry:
    rel: str  # path relative to the location, `/`-separated
    size: int
    token: int  # changes when the content may have changed: mtime_ns, or a hash of the ETag


def is_remote(uri: str | os.PathLike[str]) -> bool:
    return isinstance(uri, str) and uri.startswith("s3://")


def location(uri: str | os.PathLike[str]) -> "Local | S3":
    return S3(str(uri)) if is_remote(uri) else Local(Path(uri))


class Local:
    """A directory on this machine."""

    remote = False

    def __init__(self, root: Path):
        self.root = Path(root)

    def __str__(self) -> str:
        return str(self.root)

    def uri(self, rel: str = "") -> str:
        return str(self.root / rel) if rel else str(self.root)

    def list(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.root / rel))
        except FileNotFoundError:
            return []

    def read(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def write_new(self, rel: str, data: bytes) -> None:
        final = self.root / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, final)  # fails if the name exists: never overwrite
        except FileExistsError as e:
            raise AlreadyExists(f"{final} exists already") from e
        finally:
            tmp.unlink(missing_ok=True)

    def put(self, rel: str, data: bytes) -> None:
        final = self.root / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, final)

    def delete(self, rel: str) -> None:
        (self.root / rel).unlink(missing_ok=True)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def storage_options(self) -> dict[str, str] | None:
        return None

    def filesystem(self) -> Any:
        return None


class S3:
    """A prefix in an S3 bucket (AWS or any S3-compatible service)."""

    remote = True

    def __init__(self, uri: str):
        if not uri.startswith("s3://") or len(uri) <= 5:
            raise RunstoreError(f"not an S3 URI: {uri!r} (expected s3://bucket/prefix)")
        self.base = uri.rstrip("/")
        self._fs: Any = None

    def __str__(self) -> str:
        return self.base

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

    def exists(self, rel: str) -> bool:
        return bool(self.filesystem().exists(self._key(rel)))

    def walk(self) -> Iterator[Entry]:
        fs = self.filesystem()
        base = self._key("")
        for path, info in sorted(fs.find(base, detail=True, withdirs=False).items()):
            rel = path[len(base):].lstrip("/")
            etag = str(info.get("ETag") or info.get("LastModified") or "")
            token = int.from_bytes(hashlib.sha1(etag.encode()).digest()[:7], "big")
            yield Entry(rel, int(info.get("size") or 0), token)
