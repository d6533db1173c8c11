"""`runstore mcp`: a stdio MCP server whose tools read a store, typed, bounded and read-only.

Contract: `build(store, max_chars=, debug=)` makes the server (the official `mcp` SDK's
`MCPServer`) with every tool of `tools.TOOLBOXES`, each published
with its title, its description (the method's docstring), an input schema whose arguments
carry descriptions, bounds and examples and that admits no other argument
(`additionalProperties: false`), and the annotations `readOnlyHint`, `idempotentHint`, not
destructive, not open-world. `serve(...)` runs it over stdin/stdout until the client closes
them (through `wire.wire`: a line the SDK would drop unanswered is mended or answered).

A call is checked before it runs (`CallCheck`): an unknown tool or argument name, `arguments`
that are not an object (null reads as none, as when omitted), or a value the schema refuses,
is an error result that names what is wrong and what to send instead (the closest tool or
argument name; the values the argument takes), never the SDK's generic message. A string
argument is the text sent: the SDK decodes one that is JSON text of a list or an object
(clients send lists so), but not one that spells a scalar (`"null"`, `"true"` stay text, so
`like="null"` searches for "null" rather than dropping the filter). Tools run on worker
threads, so one slow query does not stop the server from reading the next message; all of
them share one `Store`, kept: every query reads the newest snapshot, so an ingest that
commits while the server runs is seen by the next call. `initialize` is answered before
DuckDB, polars or pyarrow are imported; the store is opened by the first call or, when the
client is quiet first (wire.py's Idle: its session begun, a second without a message), on a
thread of its own that runs `list_runs` once (`warm`), so that a first call made once the
client's agent has decided what to ask finds the query stack imported and the store open.

Nothing here writes: no tool has a writing method to call, the store is only read through
`Store`'s query paths (the read-only guard and DuckDB's sandbox), and run directories are
never opened.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from . import calls
from .answer import DEFAULT_CHARS, error
from .tools import TOOLBOXES, State

if TYPE_CHECKING:
    from mcp.server import MCPServer
    from mcp.server.mcpserver.tools import Tool

NAME = "runstore"
INSTRUCTIONS = """\
runstore holds training runs written by tinker-cookbook (metrics, config, checkpoints,
rollouts and their transcripts, timing spans), joined by run and step, and answers in SQL.
Start with list_runs (which runs exist, their status, rewards and KL), doctor (what went
wrong in each run, with evidence and what to try) or check (which runs went unstable). describe_run gives one run at a glance; metric_keys then metric_history show
curves; rollouts and search_transcripts show what the model said; slowest_spans and
step_timeline show where time went; sql answers anything else (views documents the tables).
Runs are named by run_id or run_name; GLOBs such as 'math_rl_sweep/*' select several.
Answers are bounded: a cut answer says how to ask for the rest (offset, a narrower range)."""


def tools(state: State) -> list["Tool"]:
    """Every tool this runstore offers, published as the module says."""
    from mcp.server.mcpserver.tools import Tool
    from mcp_types import ToolAnnotations

    hints = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
    out = []
    for box in TOOLBOXES:
        for method, title in box(state).tools():
            made = Tool.from_function(method, name=method.__name__, title=title,
                                      description=inspect.cleandoc(method.__doc__ or ""),
                                      annotations=hints, structured_output=False)
            made.parameters["additionalProperties"] = False
            made.fn_metadata = _text_stays_text(made.fn_metadata)
            out.append(made)
    return out


def _text_stays_text(metadata: Any) -> Any:
    """`metadata` (the SDK's `FuncMetadata`) reading arguments as the module says."""
    from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

    return _reader()(**{k: getattr(metadata, k) for k in FuncMetadata.model_fields})


@functools.cache
def _reader() -> type:
    """The SDK's `FuncMetadata` but for strings: of those it decodes as JSON, only a list or
    an object replaces the string sent (a class made on first use: mcp is imported late)."""
    from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

    class TextStaysText(FuncMetadata):
        def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
            decoded = super().pre_parse_json(data)
            return {k: v if isinstance(v, (list, dict)) else data[k] for k, v in decoded.items()}

    return TextStaysText


class CallCheck:
    """Middleware: a `tools/call` naming no tool, with `arguments` that are not an object (null
    is none, as omitted), an unknown argument or a value the schema refuses is answered with an
    error result saying what to send (see the module); a call the client cancels stops its
    queries, in this process or in a worker (`Store.stopping`)."""

    def __init__(self, published: list["Tool"], max_chars: int = DEFAULT_CHARS):
        self.tools = {t.name: t for t in published}
        self.max_chars = max_chars  # the server's cap, for a call that gives none

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            # Omitted or null: none (MCP lets a call omit them; the SDK reads null so too).
            # Only those: `or {}` would pass [], 0, "" and false on as no arguments, for the
            # SDK to refuse with its bare "Invalid request parameters".
            arguments = ctx.params.get("arguments")
            arguments = {} if arguments is None else arguments
            problem = self.problem(ctx.params.get("name"), arguments)
            if problem is not None:
                from mcp_types import CallToolResult, TextContent

                cap = arguments.get("max_chars") if isinstance(arguments, dict) else None
                return CallToolResult(content=[TextContent(
                    type="text", text=error(problem, cap, self.max_chars))], is_error=True)
            # The SDK waits for a tool's thread even when the client cancels the call: the
            # call's queries stop instead of running to their time limit.
            from ..store import Store

            with calls.running(ctx.request_id) as cancelled, Store.stopping(cancelled):
                return await call_next(ctx)
        return await call_next(ctx)

    def problem(self, name: Any, arguments: Any) -> str | None:
        """What is wrong with a call, as the error result says it (None: nothing)."""
        from pydantic import ValidationError

        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            close = difflib.get_close_matches(str(name), list(self.tools), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}? " if close else ""
            return f"Error: no tool {name!r}; {hint}(tools: {', '.join(self.tools)})"
        # Said as the tool says its other errors (check and doctor add the exit status).
        said = functools.partial(_said_by, tool, name)
        if not isinstance(arguments, dict):
            import json

            sent = json.dumps(arguments, ensure_ascii=False, default=repr)  # as the client wrote it
            return said(f"{name}'s arguments are an object of named values, got {sent}")
        known = list(tool.parameters.get("properties", {}))
        for arg in arguments:
            if arg not in known:
                close = difflib.get_close_matches(arg, known, n=1, cutoff=0.5)
                hint = f"did you mean {close[0]}? " if close else ""
                return said(f"{name} has no argument {arg!r}; {hint}(its arguments: "
                            f"{', '.join(known)})")
        try:
            tool.fn_metadata.validate_arguments(arguments)
        except ValidationError as e:
            return said(f"{name}: " + "; ".join(_said(err) for err in e.errors())
                        + " (the tool's input schema says what each argument takes)")
        return None


def _said_by(tool: "Tool", name: str, message: str) -> str:
    """`message` as the error result of tool `name` says it (`Toolbox.error_text`)."""
    from ..errors import UsageError

    return tool.fn.__self__.error_text(name, UsageError(message))


def _said(err: Any) -> str:
    """One pydantic error as `argument: what it should be (got X)`."""
    where = ".".join(str(p) for p in err.get("loc", ()) if not isinstance(p, int)) or "arguments"
    given = err.get("input")
    got = "" if err.get("type") == "missing" else f" (got {given!r:.80})"
    return f"{where}: {err.get('msg', 'invalid')}{got}"


def build(store: str | None = None, *, max_chars: int = DEFAULT_CHARS,
          memory_limit: int | None = None, debug: bool = False,
          state: State | None = None) -> "MCPServer":
    """The MCP server over the store at `store` (else $RUNSTORE_STORE, else ./.runstore);
    `memory_limit` caps the worker processes of user SQL (`Store`'s). `state`, when given,
    is the tools' shared state instead (and the other arguments are its)."""
    from mcp.server import MCPServer

    from .. import __version__

    if state is None:
        state = State(store_path=store, max_chars=max_chars, debug=debug,
                      memory_limit=memory_limit)
    max_chars, debug = state.max_chars, state.debug
    published = tools(state)
    return MCPServer(NAME, title="runstore", version=__version__, instructions=INSTRUCTIONS,
                     tools=published, middleware=[CallCheck(published, max_chars)],
                     log_level="DEBUG" if debug else "WARNING")


def serve(store: str | None = None, *, max_chars: int = DEFAULT_CHARS,
          memory_limit: int | None = None, debug: bool = False) -> None:
    """Serve over stdio until the client closes stdin, every line answered (wire.py: a
    lone surrogate the SDK would refuse reads as U+FFFD; a line that is no message gets
    JSON-RPC's error rather than silence)."""
    from .wire import wire

    state = State(store_path=store, max_chars=max_chars, debug=debug,
                  memory_limit=memory_limit)
    server = build(state=state)
    with wire(idle=lambda: warm(state)):
        server.run("stdio")


def warm(state: State) -> threading.Thread:
    """Open the store and run `list_runs` once on a daemon thread (see the module): what the
    first call would import, open and plan. Its answer, or error, goes nowhere: a real call
    gives its own."""

    def run() -> None:
        if state.opened:  # a call has opened it: the query stack is warm
            return
        started = time.perf_counter()
        from .tools.runs import RunTools

        RunTools(state).list_runs(limit=1)
        if state.debug:
            print(f"runstore mcp: warmed (the store opened, list_runs run) in "
                  f"{time.perf_counter() - started:.2f} s", file=sys.stderr, flush=True)

    thread = threading.Thread(target=run, name="runstore-mcp-warm", daemon=True)
    thread.start()
    return thread
