"""The `runstore ui` command: what it prints, how it fails, and the demo's pointer to it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from runstore.cli import main
from ui_harness import UiServer, http


def run_ui(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runstore", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_no_store_is_an_error_with_a_next_step(tmp_path: Path) -> None:
    r = run_ui("--store", str(tmp_path / "none"), "ui", "--port", "0")
    assert r.returncode == 3
    assert r.stderr.startswith("Error: no store at") and "runstore ingest" in r.stderr
    assert "Traceback" not in r.stderr


def test_watch_needs_paths(tmp_path: Path) -> None:
    r = run_ui("--store", str(tmp_path / "s"), "ui", "--watch", "5", "--port", "0")
    assert r.returncode != 0 and "--watch needs PATHS" in r.stderr and "Traceback" not in r.stderr


def test_a_port_in_use_says_so(ui_demo: tuple[Path, Path]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = run_ui("--store", str(ui_demo[1]), "ui", "--port", str(port))
    assert r.returncode != 0 and f"cannot listen on 127.0.0.1:{port}" in r.stderr
    assert "--port 0" in r.stderr and "Traceback" not in r.stderr


def test_an_empty_token_is_refused(ui_demo: tuple[Path, Path]) -> None:
    r = run_ui("--store", str(ui_demo[1]), "ui", "--port", "0", "--token", " ")
    assert r.returncode != 0 and "--token is empty" in r.stderr


def test_paths_without_watch_are_ingested_once_before_serving(small_tree: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with UiServer(store, str(small_tree)) as s:
        runs = http(s.url, "GET", "/api/runs").json()
        assert len(runs["rows"]) == 3
    out, err = s.stop()
    assert "runs: 3 new" in err


def test_the_demo_ends_with_the_ui_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    last = result.output.rstrip().splitlines()[-1]
    assert last == f"Browse it:    runstore --store {tmp_path / 'd' / 'store'} ui   " \
                   "(then open http://127.0.0.1:8765)"
