"""docs/compare.md's example notification is what a real webhook server on 127.0.0.1
receives from `runstore check --notify` on the store `runstore demo` writes (the page's
commands and Python examples are run by tests/docs/test_doc_examples.py, as every page's are).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from runstore.demo.showcase import run_demo
from storekit import cli
from webhook import POLL_S

DOC = Path(__file__).resolve().parents[2] / "docs" / "compare.md"


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
    return cli(None, *shlex.split(cmd)[1:], catch_exceptions=True,
               env={"RUNSTORE_STORE": "runstore-demo/store", "COLUMNS": "100"})


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
    thread = threading.Thread(target=httpd.serve_forever, args=(POLL_S,), daemon=True)
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
