"""A command's output file (runstore.present.outfile): replaced whole, or written in place.

Each promise of the module is tried on real files: a reader in the middle of a write finds
the old file; a write that fails part way (an error, an interrupt) leaves the old file and no
temporary file; modes, links, devices, pipes and an unwritable directory; errors name the
file the user gave. The CLI's `-o` goes through it (`plot`, `sql`, `trace`).
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

from runstore.present.outfile import replace


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_new_file_and_a_replaced_one(tmp_path: Path) -> None:
    out = tmp_path / "chart.html"
    old_umask = os.umask(0o027)
    try:
        assert replace(out, [b"one ", b"two"]) == out
    finally:
        os.umask(old_umask)
    assert out.read_bytes() == b"one two"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # 0o666 under the umask, as open() makes
    out.chmod(0o604)
    inode = out.stat().st_ino
    replace(str(out), [b"three"])
    assert out.read_bytes() == b"three"
    assert stat.S_IMODE(out.stat().st_mode) == 0o604  # a replaced file keeps its mode
    assert out.stat().st_ino != inode  # a new file took the name: the old one was never cut
    assert leftovers(tmp_path) == []


def test_a_reader_during_the_write_sees_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    out.write_bytes(b"old page")
    seen = []

    def parts() -> Iterator[bytes]:
        yield b"new "
        seen.append(out.read_bytes())  # another process reading now
        yield b"page"

    replace(out, parts())
    assert seen == [b"old page"] and out.read_bytes() == b"new page"


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_write_that_fails_part_way_leaves_the_old_file(tmp_path: Path,
                                                         failure: BaseException) -> None:
    out = tmp_path / "trace.json"
    out.write_bytes(b"[1, 2, 3]")

    def parts() -> Iterator[bytes]:
        yield b"[4, "
        raise failure

    with pytest.raises(type(failure)) as raised:
        replace(out, parts())
    assert out.read_bytes() == b"[1, 2, 3]"
    assert leftovers(tmp_path) == []
    if isinstance(failure, OSError):  # the error names the user's file, not the temporary one
        assert raised.value.errno == 28 and raised.value.filename == str(out)


def test_a_link_is_written_through_and_kept(tmp_path: Path) -> None:
    target = tmp_path / "real.html"
    target.write_bytes(b"old")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    replace(link, [b"new"])
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new"


def test_a_device_and_a_pipe_are_written_in_place(tmp_path: Path) -> None:
    replace("/dev/null", [b"nothing"])  # not replaced by a regular file
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    replace(fifo, [b"through ", b"the pipe"])
    reader.join(timeout=30)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_directory_that_takes_no_new_name_gets_the_file_in_place(tmp_path: Path) -> None:
    """A file the user may write in a directory where no file may be added (here made
    immutable, which holds for root too): written in place, as before."""
    folder = tmp_path / "fixed"
    folder.mkdir()
    out = folder / "chart.html"
    out.write_bytes(b"old")
    made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is refused here: {made.stderr.decode().strip()}")
    try:
        with pytest.raises(PermissionError):
            (folder / "probe").write_bytes(b"")
        replace(out, [b"new"])
        assert out.read_bytes() == b"new"
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert sorted(p.name for p in folder.iterdir()) == ["chart.html"]


def test_errors_name_the_file_given(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "out.html"
    with pytest.raises(FileNotFoundError) as raised:
        replace(missing, [b"x"])
    assert raised.value.filename == str(missing)
    folder = tmp_path / "a_dir"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as raised:
        replace(folder, [b"x"])
    assert raised.value.filename == str(folder)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("args", [
    ["sql", "select run_name from runs order by 1", "-o", "{out}.csv"],
    ["plot", "metric", "env/all/reward/total", "-o", "{out}.html"],
    ["report", "-o", "{out}.html"],
])
def test_the_commands_replace_their_output_file(shared_demo_store: Path, tmp_path: Path,
                                               args: list[str]) -> None:
    """`-o` over an existing file: the command's answer under a new inode (the old file was
    renamed over, never truncated), with the old file's mode, and nothing else left."""
    from storekit import cli

    args = [a.format(out=tmp_path / "answer") for a in args]
    out = Path(args[-1])
    out.write_text("the answer before")
    out.chmod(0o640)
    inode = out.stat().st_ino
    r = cli(shared_demo_store, *args)
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert text != "the answer before" and out.stat().st_ino != inode
    head = "run_name\n" if out.suffix == ".csv" else "<!doctype html>"
    assert text.lower().startswith(head)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]
