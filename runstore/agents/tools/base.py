"""What every toolbox shares: the store it reads, the answer budget, and error handling.

Contract: a `Toolbox` is built with the server's `State` (the store location, opened as a
`Store` on first use, the default character cap, `--debug`). Its tools are methods marked
`@tool(title)`; `tools()` lists them in definition order. A tool returns text (an `Answer`
rendered); a `RunstoreError` it raises becomes an error result `Error: <message>` (the
message says what to send instead, as on the command line), and anything else an error result
`Error: unexpected <type>: <message> (a runstore bug...)` with the traceback on stderr only
under `--debug`, so the agent always gets one clear line and the server keeps serving. An
error result is held to the call's character cap as any answer is (`answer.error`).
"""

from __future__ import annotations

import functools
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ...errors import RunstoreError, one_line
from ..answer import DEFAULT_CHARS, Answer, error

if TYPE_CHECKING:
    from ...store import Store

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """What the server's tools share: the store (opened once, on the first call) and bounds."""

    store_path: str | None
    max_chars: int = DEFAULT_CHARS
    debug: bool = False
    memory_limit: int | None = None  # of the user-SQL workers (None: the Store's default)
    _store: "Store | None" = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def opened(self) -> bool:
        """Whether the store has been opened (by a call, or by the server's warm-up)."""
        return self._store is not None

    @property
    def store(self) -> "Store":
        # Imported here: the server answers `initialize` before runstore's query stack (DuckDB,
        # polars, pyarrow) is loaded, on the first tool call.
        with self._lock:
            if self._store is None:
                from ...store import Store

                self._store = Store(self.store_path, memory_limit=self.memory_limit)
            return self._store


def tool(title: str) -> Callable[[F], F]:
    """Mark a toolbox method as a tool, with its human-readable title (see the module)."""

    def mark(fn: F) -> F:
        @functools.wraps(fn)
        def run(self: "Toolbox", *args: Any, **kwargs: Any) -> Any:
            from mcp_types import CallToolResult, TextContent

            try:
                return fn(self, *args, **kwargs)
            except RunstoreError as e:
                text = self.error_text(fn.__name__, e)
            except Exception as e:  # noqa: BLE001 - the agent gets one line, the server lives
                if self.state.debug:
                    traceback.print_exc(file=sys.stderr)
                text = (f"Error: unexpected {type(e).__name__}: {one_line(e)} (a runstore bug, "
                        "or a fault of the machine; run `runstore --debug mcp` for the "
                        "traceback and report it)")
            text = error(text, kwargs.get("max_chars"), self.state.max_chars)
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

        run.__runstore_tool__ = title  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return mark


class Toolbox:
    """A group of tools over one `State` (see the module)."""

    def __init__(self, state: State):
        self.state = state

    @property
    def store(self) -> "Store":
        return self.state.store

    def tools(self) -> list[tuple[Callable[..., Any], str]]:
        """(bound method, title) of each tool, in definition order."""
        found = []
        for name, member in vars(type(self)).items():
            title = getattr(member, "__runstore_tool__", None)
            if title is not None:
                found.append((getattr(self, name), title))
        return found

    def answer(self, max_chars: int | None) -> Answer:
        return Answer(max_chars=max_chars or self.state.max_chars)

    def error_text(self, tool: str, error: RunstoreError) -> str:
        """The error result's text (a toolbox may add what its command line would do)."""
        return f"Error: {error}"
