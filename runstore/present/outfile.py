"""A file a command writes its answer to (`-o PATH`): replaced whole, never left half written.

Contract: `replace(path, parts)` writes the bytes of `parts` (an iterable of bytes, written
in order) as the file `path` and returns it as a Path. A regular file (or a new name) is
written beside itself, under a hidden temporary name in the same directory, and renamed over
`path` once complete: a reader (a browser reloading a chart) sees the old file or the new one,
and a failure (a full disk, an interrupt) leaves the old file as it was and no temporary
file behind. A new file gets the mode any new file gets (the umask applies), a replaced one
keeps its mode. Anything else is written in place, as an `open(path, "wb")` writes it: a
symbolic link (written through, the link kept), a device or a pipe (`/dev/stdout`), and a file
in a directory where no new name may be made. An OSError names `path`, not the
temporary name (`runstore.cli.common.writing_output` says what to do about it).

Why: `open(path, "wb")` empties the old file before the first byte of the new one is
written, so a failure part way (the disk filling with a 100-run report) left neither, and a
browser reloading the page could draw half of it. Writing aside and renaming costs a little
more than writing in place (python bench/bench_outfile.py; docs/benchmarks.md, "Command
latency").
"""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path
from typing import Iterable


def replace(path: str | Path, parts: Iterable[bytes]) -> Path:
    """Write `parts` as the file `path` (see the module) and return it."""
    out = Path(path)
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise _named(e, out)
    else:
        if not stat.S_ISREG(st.st_mode):  # a link, a device, a pipe, a directory
            return _in_place(out, parts)
        mode = stat.S_IMODE(st.st_mode)
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except PermissionError:  # a directory we may not add to, holding a file we may write
        return _in_place(out, parts)
    except OSError as e:
        raise _named(e, out)
    try:
        with open(fd, "wb") as f:
            for part in parts:
                f.write(part)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, out)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        raise _named(e, out) if isinstance(e, OSError) else e
    return out


def _in_place(out: Path, parts: Iterable[bytes]) -> Path:
    try:
        with open(out, "wb") as f:
            for part in parts:
                f.write(part)
    except OSError as e:
        raise _named(e, out)
    return out


def _named(e: OSError, out: Path) -> OSError:
    """`e` as an error about `out`, its errno and reason kept (itself when it names `out`
    or has no errno), the original as its cause."""
    if e.errno is None or (e.filename is not None
                           and os.path.abspath(e.filename) == os.path.abspath(out)):
        return e
    named = type(e)(e.errno, e.strerror, str(out))
    named.__cause__ = e
    return named
