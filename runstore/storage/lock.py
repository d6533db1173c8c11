"""The store's write lock: one writing process at a time, on local disk and on S3.

Contract: `lock_for(root)` is the lock of the store at `root`, with `acquire(timeout)` and
`release()`. Local disk and S3 differ here as nowhere else, because only local disk has a
lock that dies with its holder:

* `Lock` (local disk): an `fcntl` lock on `_runstore/lock`, held for the process's lifetime
  and released by the kernel when it dies; the holder writes its PID into the file, which the
  message of a waiter that gives up quotes. A lock path that is not a regular file (a
  directory, a symbolic link) is a `StoreCorrupt` that says to run `runstore repair`.
* `Lease` (S3, where no such lock exists): a lease object created with a conditional put (so
  two writers cannot both create it), holding the owner and an expiry; the holder renews it at
  every commit (`renew`, which stops a writer whose lease was taken over), a lease past its
  expiry is taken over.

Waiting past `timeout` is a `StoreLocked` naming the holder. `timeout` is 0 (do not wait) or
a finite number of seconds above it (`wait_limit`): anything else (NaN, which would wait for
ever; a negative number; text) is a `UsageError` naming `lock_timeout`, before any waiting.
`acquire(timeout, stop=)` also polls `stop` while it waits: a reason from it ends the wait at
once with `KeyboardInterrupt(reason)` (a watch in a thread, which no signal reaches, asked to
end).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
import uuid
from typing import Any, Callable

from ..errors import IOFailure, StoreCorrupt, StoreLocked, UsageError
from ..numbers import seconds
from .location import AlreadyExists, Local, Location, S3

LOCK = "_runstore/lock"


# What a holder is doing: any writing command (an ingest, compact, forget, migrate, repair,
# a settings change) holds the lock, so the message does not guess which.
HELD = "a runstore command writing to it: an ingest, compact, forget, migrate or repair"


def lock_for(root: Location) -> "Lock | Lease":
    """The write lock of the store at `root`: a lease on S3, an `fcntl` lock on local disk."""
    return Lease(root) if isinstance(root, S3) else Lock(root)  # type: ignore[arg-type]


def wait_limit(timeout: Any) -> float:
    """`timeout` as the seconds `acquire` waits: 0 or a finite number above it, no longer than
    Python can wait (`threading.TIMEOUT_MAX`); else a `UsageError` naming `lock_timeout`."""
    checked = seconds(timeout, zero=True)
    if checked is None:
        raise UsageError(f"lock_timeout must be a number of seconds, 0 or above (e.g. 60), got "
                         f"{timeout!r}")
    return checked


class Lock:
    """An exclusive, process-lifetime lock on the store (released by the kernel on death)."""

    def __init__(self, root: Local):
        self.path = root / LOCK
        self.fd: int | None = None

    def acquire(self, timeout: float, *, stop: "Callable[[], str | None] | None" = None) -> None:
        """Take the lock, waiting up to `timeout` s; `stop` (polled while waiting) saying a
        reason ends the wait with KeyboardInterrupt(reason): a watch thread asked to end."""
        timeout = wait_limit(timeout)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise IsADirectoryError(errno.EISDIR, "not a regular file")
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise IOFailure(
                    f"cannot take the store's write lock {self.path}: {e.strerror}. Fix the "
                    "file's permissions or mount, or choose another --store.") from e
            what = ("it is a directory, not a file" if isinstance(e, IsADirectoryError)
                    else "it is a symbolic link" if e.errno == errno.ELOOP
                    else e.strerror or str(e))
            raise StoreCorrupt(
                f"cannot take the store's write lock {self.path}: {what}. Run `runstore "
                "repair`: it sets the path aside and makes a new lock file.") from e
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                why = stop() if stop is not None else None
                if why:
                    os.close(fd)
                    raise KeyboardInterrupt(why)
                if time.monotonic() >= deadline:
                    holder = self._holder(fd)
                    os.close(fd)
                    raise StoreLocked(
                        f"store is locked by PID {holder} ({HELD}); waited {timeout:g} s. "
                        "Try again when it finishes, or raise --lock-timeout."
                    )
                time.sleep(0.1)
        try:  # who holds it, for the message above; best effort (a full disk refuses it)
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError:
            pass
        self.fd = fd

    @staticmethod
    def _holder(fd: int) -> str:
        """The PID the holder wrote (it writes it just after taking the lock: wait a moment
        for it rather than report an empty file)."""
        for _ in range(20):
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
            if text:
                return text
            time.sleep(0.05)
        return "?"

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


class Lease:
    """The write lock of a store on S3, where no process-lifetime lock exists: a lease object
    `_runstore/lock` created with a conditional put (so two writers cannot both create it),
    holding the owner and an expiry. The holder renews it at every commit; a lease past its
    expiry belongs to a writer that died and is taken over (the takeover deletes it and
    races through the same conditional put, so only one taker wins)."""

    TTL_S = 600.0  # $RUNSTORE_LEASE_SECONDS overrides it

    def __init__(self, root: S3):
        self.root = root
        self.token: str | None = None
        self.ttl = float(os.environ.get("RUNSTORE_LEASE_SECONDS") or self.TTL_S)

    def _body(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "token": self.token,
                           "expires": time.time() + self.ttl}).encode()

    def _current(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.root.read(LOCK))
        except FileNotFoundError:
            return None
        except ValueError:
            return {}  # being written, or garbage: treat as held until it expires

    def acquire(self, timeout: float, *, stop: "Callable[[], str | None] | None" = None) -> None:
        """As `Lock.acquire`."""
        timeout = wait_limit(timeout)
        deadline = time.monotonic() + timeout
        self.token = uuid.uuid4().hex
        unreadable_since: float | None = None
        while True:
            try:
                self.root.create(LOCK, self._body())
                return
            except AlreadyExists:
                pass
            held = self._current()
            if held is not None:
                expires = held.get("expires")
                if isinstance(expires, (int, float)) and expires < time.time():
                    self.root.delete(LOCK)  # the holder died; the conditional put decides
                    continue
                if not isinstance(expires, (int, float)):
                    # Unreadable lease: give it one TTL from when first seen.
                    if unreadable_since is None:
                        unreadable_since = time.monotonic()
                    elif time.monotonic() - unreadable_since > self.ttl:
                        self.root.delete(LOCK)
                        continue
            why = stop() if stop is not None else None
            if why:
                self.token = None
                raise KeyboardInterrupt(why)
            if time.monotonic() >= deadline:
                who = (held or {}).get("pid", "?")
                host = (held or {}).get("host")
                raise StoreLocked(
                    f"store is locked by PID {who}{f' on {host}' if host else ''} ({HELD}); "
                    f"waited {timeout:g} s. Try again when it finishes, or raise "
                    "--lock-timeout.")
            time.sleep(0.2)

    def renew(self) -> None:
        """Extend the lease before publishing; stop if another writer took it over meanwhile
        (this one stalled past its expiry): its unpublished work is then rolled back by the
        next writer, and the conditional put of manifests keeps the two from both publishing."""
        if self.token is None:
            return
        held = self._current()
        if held is None or held.get("token") != self.token:
            who = (held or {}).get("pid", "?")
            raise StoreLocked(
                f"this writer's lease on {self.root} expired and PID {who} took the store over; "
                "nothing of this run was published. Run the command again (and raise "
                "$RUNSTORE_LEASE_SECONDS if writes can stall that long).")
        self.root.put(LOCK, self._body())

    def release(self) -> None:
        if self.token is None:
            return
        held = self._current()
        if held is not None and held.get("token") == self.token:
            self.root.delete(LOCK)
        self.token = None
