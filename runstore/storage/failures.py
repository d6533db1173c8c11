"""Failed writes: what a store write that went wrong says, and what to do about it.

Contract: `writing(root, what)` wraps one write to the store (`what`: the path inside it, or
a phrase); an I/O failure inside (an OSError, an Arrow error, a deltalake error, a panic in
deltalake's Rust code) comes out as `write_error(root, what, e)`: a `RunstoreError` that names
what was being written and says what to do: a full disk (free space; the unfinished snapshot
is rolled back), a read-only or unwritable store (fix permissions, or choose another
--store), a store file missing under a write (`StoreCorrupt`: run `runstore repair`), else a
plain failure (run it again). Errors runstore raised itself pass through as they are, and so
does anything that is not an I/O failure (a bug must not hide behind a store message).
Nothing published before the failure is touched.
"""

from __future__ import annotations

import errno
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import IOFailure, RunstoreError, StoreCorrupt, one_line

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use
    from ..lazy import pyarrow as pa

_DISK_FULL = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")
_READ_ONLY = ("Read-only file system", "os error 30", "Permission denied", "os error 13",
              "Operation not permitted", "os error 1)")
_MISSING = ("No such file or directory", "os error 2)", "not found", "NotFound", "missing file")


def _is_io_failure(e: BaseException) -> bool:
    """True for the errors a failed store read/write raises (OS, Arrow, deltalake, a panic in
    deltalake's Rust code), as opposed to a bug in runstore."""
    if isinstance(e, (OSError, pa.ArrowException)):
        return True
    if type(e).__name__ == "PanicException":
        return True
    try:
        from deltalake.exceptions import DeltaError
    except ImportError:  # pragma: no cover - deltalake is a dependency
        return False
    return isinstance(e, DeltaError)


def write_error(root: Any, what: str, e: BaseException) -> RunstoreError:
    """A failure to write `what` (a path inside the store) as an error that says what to do."""
    detail = one_line(e)
    code = getattr(e, "errno", None)
    where = f"{root / what}"
    if code in (errno.ENOSPC, errno.EDQUOT) or any(t in detail for t in _DISK_FULL):
        return IOFailure(
            f"the disk holding the store is full (writing {where}: {detail}). Free some space, "
            "then run the command again: the unfinished snapshot is rolled back and nothing "
            "already committed is lost.")
    if code in (errno.EROFS, errno.EACCES, errno.EPERM) or any(t in detail for t in _READ_ONLY):
        return IOFailure(
            f"cannot write the store at {root} (writing {where}: {detail}). Fix the directory's "
            "permissions or mount, or choose another --store; nothing committed was lost.")
    if code == errno.ENOENT or any(t in detail for t in _MISSING):
        return StoreCorrupt(
            f"a file of the store is missing (while writing {where}: {detail}). Run "
            "`runstore repair` to drop it from the store, then `runstore ingest` to re-read "
            "the sources whose rows it held.")
    return IOFailure(
        f"writing {where} failed: {detail}. Nothing committed was lost; run the command "
        "again, and `runstore repair` if it keeps failing.")


@contextmanager
def writing(root: Any, what: str) -> Iterator[None]:
    """Run a store write; turn an I/O failure into `write_error(root, what, ...)`."""
    try:
        yield
    except RunstoreError:
        raise
    except BaseException as e:
        if not _is_io_failure(e):
            raise
        raise write_error(root, what, e) from e
