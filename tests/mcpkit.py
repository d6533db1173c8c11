"""A real MCP client session against `runstore mcp`, for synchronous tests.

`McpSession(store)` starts `python -m runstore --store STORE mcp` through the SDK's own stdio
client (`mcp.client.stdio.stdio_client`, the `mcp.Client` over it, the initialize handshake),
on an event loop in a background thread (anyio's blocking portal), so a test calls
`session.call(tool, args)` and gets a `Reply` (is_error, text). The server's stderr is kept in
a file (`session.stderr()`), so tests can say that nothing but what they expect reached it.

`table(text)` reads the first markdown table of an answer as (header, rows of cell text);
`csv_block(text)` the CSV table of an answer in CSV (its lines between the title line and
the notices); `notice_offset(text)` the offset a cut answer says continues it (None: none).
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Reply:
    is_error: bool
    text: str


class McpSession:
    """One `runstore mcp` process and an SDK client session with it (a context manager)."""

    def __init__(self, store: Path | str | None, *args: str, env: dict[str, str] | None = None,
                 cwd: Path | None = None):
        self.argv = [sys.executable, "-m", "runstore",
                     *(["--store", str(store)] if store is not None else []), "mcp", *args]
        self.env = {"PYTHONPATH": str(REPO), **(env or {})}
        self.cwd = cwd

    def __enter__(self) -> "McpSession":
        from anyio.from_thread import start_blocking_portal
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=self.argv[0], args=self.argv[1:], env=self.env,
                                       cwd=str(self.cwd) if self.cwd else None)
        self._err = tempfile.NamedTemporaryFile("w+", prefix="mcp-stderr-", suffix=".log")
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        try:
            client = Client(stdio_client(params, errlog=self._err), mode="legacy",
                            read_timeout_seconds=300)
            self._client_cm = self.portal.wrap_async_context_manager(client)
            self.client = self._client_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            print(self.stderr(), file=sys.stderr)  # why the server did not start
            self._err.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._client_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._err.close()

    def tools(self) -> list[Any]:
        return list(self.portal.call(self.client.list_tools).tools)

    def call(self, name: str, args: dict[str, Any] | None = None) -> Reply:
        result = self.portal.call(self.client.call_tool, name, args or {})
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        assert len(texts) == 1 and len(result.content) == 1, result
        assert result.structured_content is None, "answers are text, never JSON"
        return Reply(bool(result.is_error), texts[0])

    def ok(self, name: str, args: dict[str, Any] | None = None) -> str:
        reply = self.call(name, args)
        assert not reply.is_error, reply.text
        return reply.text

    def error(self, name: str, args: dict[str, Any] | None = None) -> str:
        """The error an answer is: `Error: ...` (the library's message: a SQL error keeps the
        lines that point at the place), never a traceback."""
        reply = self.call(name, args)
        assert reply.is_error, reply.text
        assert reply.text.startswith("Error: ") and "Traceback" not in reply.text, reply.text
        return reply.text.strip()

    def stderr(self) -> str:
        self._err.flush()
        return Path(self._err.name).read_text()


def _cells(line: str) -> list[str]:
    """The cells of one markdown table line (`\\|` is a pipe inside a cell)."""
    inner = line.strip()[1:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def table(text: str, index: int = 0) -> tuple[list[str], list[list[str]]]:
    """The `index`-th markdown table of an answer: (header, rows)."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text.split("\n"):
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    lines = blocks[index]
    assert set(lines[1].replace("|", "")) <= {"-"}, lines[:2]
    return _cells(lines[0]), [_cells(x) for x in lines[2:]]


def csv_block(text: str) -> str:
    """The CSV table of a one-table CSV answer (between its title line and its notices)."""
    lines = text.rstrip("\n").split("\n")[1:]
    while lines and lines[-1].startswith("("):
        lines.pop()
    return "\n".join(lines) + "\n"


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def notice_offset(text: str) -> int | None:
    """The offset a cut answer names to continue it, or None when the answer is whole."""
    hits = re.findall(r"with offset=(\d+)", text)
    return int(hits[-1]) if hits else None


def clean_env() -> dict[str, str]:
    """The environment a subprocess of these tests gets (no store chosen by the caller's)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RUNSTORE_")}
