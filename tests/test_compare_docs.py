"""docs/compare.md runs as written against the store `runstore demo` writes.

Every ```console block holding one `runstore ...` command is run (with RUNSTORE_STORE set as
the page says) and its output compared with the Markdown table or ```text block right after
it; the verdict line shown after the check example is compared with that command's stderr;
every ```python block is a doctest; the example notification is compared with what a real
webhook server on 127.0.0.1 receives.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import shlex
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from runstore.cli import main
from runstore.demo.showcase import run_demo

DOC = Path(__file__).resolve().parents[1] / "docs" / "compare.md"
CONSOLE = re.compile(r"```console\n\$ (runstore [^\n]*)\n```\n\n?(?P<out>(\|[^\n]*\n)+|```text\n.*?```\n)?",
                     re.S)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("compare_docs")
    run_demo(base / "runstore-demo", echo=lambda text: None)
    cwd = os.getcwd()
    os.chdir(base)
    try:
        yield base
    finally:
        os.chdir(cwd)


def run(cmd: str) -> Any:
    return CliRunner().invoke(main, shlex.split(cmd)[1:],
                              env={"RUNSTORE_STORE": "runstore-demo/store", "COLUMNS": "100"})


def commands(text: str) -> list[tuple[str, str | None]]:
    out = []
    for m in CONSOLE.finditer(text):
        shown = m.group("out")
        if shown is not None and shown.startswith("```text"):
            shown = shown[len("```text\n"):-len("```\n")]
        out.append((m.group(1), shown))
    return out


def test_every_command_prints_what_the_page_shows(demo_dir: Path) -> None:
    text = DOC.read_text()
    found = commands(text)
    assert len(found) >= 10
    checked = 0
    for cmd, shown in found:
        if cmd.startswith("runstore demo") or "--watch" in cmd:
            continue  # the page's setup step (the fixture ran it) and a live watch
        r = run(cmd)
        assert "Traceback" not in r.output, cmd
        printed = r.stdout or r.stderr
        if shown is None:
            assert r.exit_code == 0 and printed == "", (cmd, printed)
            out = re.search(r"-o (\S+)", cmd)
            assert out and (demo_dir / out.group(1)).stat().st_size > 0, cmd
        else:
            assert printed == shown, cmd
        checked += 1
        if cmd.startswith("runstore check"):
            verdict = re.search(r"The verdict line goes to standard error:\n\n```text\n(.*?)\n```",
                                text, re.S)
            assert verdict and r.stderr.strip().splitlines()[-1] == verdict.group(1), cmd
            assert r.exit_code == 1
    assert checked >= 8


def test_python_examples(demo_dir: Path) -> None:
    text = re.sub(r"(?m)^```.*$", "", DOC.read_text())
    test = doctest.DocTestParser().get_doctest(text, {}, "compare.md", str(DOC), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted >= 15


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.bodies.append(json.loads(body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_example_notification_is_what_a_webhook_receives(demo_dir: Path) -> None:
    shown = re.search(r"```json\n(.*?)```", DOC.read_text(), re.S)
    assert shown
    example = json.loads(shown.group(1))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    httpd.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = httpd.server_address[:2]
        r = run(f"runstore check --notify http://{host}:{port}/hook")
        assert r.exit_code == 1
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
    got = [b for b in httpd.bodies if b["run"] == example["run"]]  # type: ignore[attr-defined]
    assert len(got) == 1
    store = got[0].pop("store")
    assert store.endswith("runstore-demo/store")
    assert got[0] == {k: v for k, v in example.items() if k != "store"}
