"""`runstore ingest`'s progress bar, on a real terminal (a pseudo-terminal of a set width).

The bar is drawn only on a terminal and rewritten in place with `\\r`; a line wider than the
terminal wraps, and `\\r` then rewrites only its last part, so every update would leave
another line behind. So on a narrow terminal every drawn line fits, the last one says every
run was read, and the ingest's summary starts on a line of its own.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from oracle import eval_stores, run_dirs


def ingest_on_terminal(tree: Path, store: Path, columns: int) -> str:
    """What `runstore ingest` writes to a terminal `columns` wide (stdout and stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "runstore", "--store", str(store),
                             "ingest", str(tree)],
                            stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=300) == 0, out.decode(errors="replace")
    return out.decode()


@pytest.mark.parametrize("columns", [50, 70])
def test_bar_fits_a_narrow_terminal(demo_tree: Path, tmp_path: Path, columns: int) -> None:
    text = ingest_on_terminal(demo_tree, tmp_path / f"store{columns}", columns)
    # The bar counts runs, as the summary does (eval stores are not runs: said apart).
    runs, evals = len(run_dirs(demo_tree)), len(eval_stores(demo_tree))
    assert evals > 0 and f"; eval stores: {evals}; " in text
    pieces = [p for p in re.split(r"\r\n|\r|\n", text) if p.strip()]
    bars = [p for p in pieces if p.lstrip().startswith("[")]
    assert bars, text
    too_wide = [p for p in bars if len(p) >= columns]
    assert not too_wide, too_wide
    assert bars[-1].strip().startswith(f"[{'#' * 24}] {runs}/{runs} runs, "), bars[-1]
    # The bar's last drawing ends its line: what follows starts a line of its own.
    last = text.rindex(bars[-1]) + len(bars[-1])
    assert text[last:].lstrip(" ").startswith(("\r\n", "\n")), repr(text[last:last + 40])
