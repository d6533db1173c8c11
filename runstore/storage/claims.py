"""Claims: work that one process of many must do once, recorded under the store.

Contract: `Claims(root, area)` keeps, under `area` of the store at `root` (a directory of
small files beside the snapshots, which vacuum and repair do not touch), a record per *key*
(an opaque name: letters, digits, `_`, `-`) of a piece of work that must be done once
whichever process comes to it first, e.g. posting one firing to one webhook
(health/notify.py). No store lock is taken: the records are made with the location's own
"create once" (`Location.create`: a hard link locally, a conditional put on S3), so two
processes can never both hold one.

* `take(key, note)` claims the work: `None` when it is done already, or when a live process
  holds it; else a `Claim`. It creates `KEY.N.claim` for the first attempt N that no process
  holds (attempt 1, or the next one after an attempt whose holder released it or died); a
  process that loses that race looks again. After winning, it looks at `KEY.done` once more
  (the work may have been done meanwhile) and then lets the claim go and returns None.
* `Claim.done(note)` records the work as done (`KEY.done`, a JSON object: `note` plus
  `done_at`), then drops the key's claim files; `Claim.release()` gives it back
  (`KEY.N.released`), for the next process; `Claim.renew()` tells others it is still alive.
* Whether a holder is alive: locally, the holder keeps an `fcntl` lock on its claim file
  from before the file appears (it is locked while still a temporary, then hard-linked into
  place) until it is done or released, and the kernel drops the lock when the process dies;
  a claim whose lock can be taken belongs to no one. On S3, where no such lock exists, a
  claim holds an expiry (`RUNSTORE_CLAIM_SECONDS`, default `TTL_S`), pushed on by
  `renew()`; past it, the holder is taken for dead.
* `forget(keys)` removes every record of those keys (the work may be done again);
  `keys()` lists the keys that have any record (one listing).

So work is done at least once: it is done twice only when a holder dies (or cannot write
`KEY.done`) after doing the work and before recording it. A store that cannot be written
(read-only, no permission) raises the location's `OSError` from `take`: no claim, no work.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable

from .location import AlreadyExists, Local, Location

TTL_S = 300.0
_KEY = re.compile(r"[A-Za-z0-9_-]+")
_FILE = re.compile(r"(?P<key>[A-Za-z0-9_-]+)\.(?:done|(?P<n>\d+)\.(?:claim|released))")


def _ttl() -> float:
    return float(os.environ.get("RUNSTORE_CLAIM_SECONDS") or TTL_S)


class Claims:
    """The records of one area of the store (see the module)."""

    def __init__(self, root: Location, area: str):
        self.root, self.area = root, area.strip("/")
        self.local = isinstance(root, Local)

    def _rel(self, name: str) -> str:
        return f"{self.area}/{name}"

    def _exists(self, name: str) -> bool:
        return (self.root / self._rel(name)).exists()

    def is_done(self, key: str) -> bool:
        return self._exists(f"{_checked(key)}.done")

    def take(self, key: str, note: dict[str, Any] | None = None) -> "Claim | None":
        """A claim on `key`'s work, or None (see the module)."""
        key = _checked(key)
        if self.is_done(key):
            return None
        n = 1
        while True:
            claim = self._create(key, n, note or {})
            if claim is None:  # attempt n exists: held by a live process, or over
                if not self._released(key, n) and self._alive(key, n):
                    return None
                n += 1
                continue
            if self.is_done(key):  # done while this process looked
                claim.release()
                return None
            return claim

    def _create(self, key: str, n: int, note: dict[str, Any]) -> "Claim | None":
        rel = self._rel(f"{key}.{n}.claim")
        body = json.dumps({**note, "pid": os.getpid(), "host": os.uname().nodename,
                           "token": uuid.uuid4().hex,
                           "expires": time.time() + _ttl()}).encode()
        if not self.local:
            try:
                self.root.create(rel, body)
            except AlreadyExists:
                return None
            return Claim(self, key, n, None, body)
        # Locked while still a temporary, then linked into place: there is no moment at which
        # the claim exists and looks abandoned.
        final = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = os.path.join(os.path.dirname(final), f".{key}.{n}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, body)
            os.fsync(fd)
            os.link(tmp, final)
        except FileExistsError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return Claim(self, key, n, fd, body)

    def _released(self, key: str, n: int) -> bool:
        return self._exists(f"{key}.{n}.released")

    def _alive(self, key: str, n: int) -> bool:
        """Whether the holder of attempt n is alive (see the module)."""
        rel = self._rel(f"{key}.{n}.claim")
        if not self.local:
            try:
                expires = json.loads(self.root.read(rel)).get("expires")
            except FileNotFoundError:
                return False
            except ValueError:
                return False  # not a claim this code wrote
            return isinstance(expires, (int, float)) and expires > time.time()
        try:
            fd = os.open(os.path.join(self.root, rel), os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return True  # its holder has it locked: alive
            raise
        finally:
            os.close(fd)  # closing drops the probe's own lock
        return False

    def forget(self, keys: Iterable[str]) -> None:
        """Remove every record of `keys` (see the module)."""
        wanted = {_checked(k) for k in keys}
        if not wanted:
            return
        for name in self.root.list(self.area):
            m = _FILE.fullmatch(name)
            if m and m.group("key") in wanted:
                self.root.delete(self._rel(name))

    def keys(self) -> set[str]:
        """Every key with a record."""
        return {m.group("key") for name in self.root.list(self.area)
                if (m := _FILE.fullmatch(name))}

    def done_keys(self) -> set[str]:
        """Every key recorded as done."""
        return {name[:-len(".done")] for name in self.root.list(self.area)
                if name.endswith(".done") and _FILE.fullmatch(name)}


class Claim:
    """One process's claim on one key's work (see the module)."""

    def __init__(self, claims: Claims, key: str, n: int, fd: int | None, body: bytes):
        self.claims, self.key, self.n, self.fd, self.body = claims, key, n, fd, body

    def renew(self) -> None:
        """Push the claim's expiry on (S3; locally its lock says it is alive)."""
        if self.fd is None:
            body = {**json.loads(self.body), "expires": time.time() + _ttl()}
            self.body = json.dumps(body).encode()
            self.claims.root.put(self.claims._rel(f"{self.key}.{self.n}.claim"), self.body)

    def done(self, note: dict[str, Any] | None = None) -> None:
        """Record the work as done, then drop the key's claim files."""
        c = self.claims
        body = {**(note or {}), "done_at": datetime.now(timezone.utc).isoformat()}
        try:
            c.root.create(c._rel(f"{self.key}.done"), json.dumps(body).encode())
        except AlreadyExists:
            pass  # done by another process too (a forced repeat): one record is enough
        for i in range(1, self.n + 1):
            for kind in ("claim", "released"):
                c.root.delete(c._rel(f"{self.key}.{i}.{kind}"))
        self._unlock()

    def release(self) -> None:
        """Give the work back for the next process (this attempt is over)."""
        c = self.claims
        try:
            c.root.create(c._rel(f"{self.key}.{self.n}.released"), b"")
        except AlreadyExists:
            pass
        finally:
            self._unlock()

    def _unlock(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _checked(key: str) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(f"a claim key is letters, digits, _ and -, got {key!r}")
    return key
