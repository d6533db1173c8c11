"""logs.log → `run_logs` rows, and the run's command line and last error for its `runs` row.

Contract: `logs.log` is what tinker-cookbook's `ml_log.configure_logging_module` writes: Python
logging text, each record `<logger>:<lineno> [<LEVEL>] <message>`, a multi-line message (a
rich table, a `Configuration:` block, a traceback) continuing on the lines after it. It is
appended to (a resumed run, or the next run of a sequential sweep that logs into the same
handler, adds to it), so it is read like every append-only file: the complete lines added
since the last read, numbered on from there.

Every line is one `run_logs` row: `line_no`, the `text` as written (decoded as UTF-8,
undecodable bytes replaced, a CR before the newline dropped), and the `level`, `logger` and
`record_line` (the number of its first line) of the record it belongs to: a record's header
line starts it, the lines after it up to the next header continue it. Lines before the first
header have none.

The ledger state carries, from read to read: the record being continued, whether a
traceback is open, the exception group whose frame is being read (`group`), and the two facts
the `runs` row keeps (read from the state by `ingest.run_facts`):

* `command`: the message of the first `Command line invocation: ...` record (`root` logs it
  when a process sets up logging; a resumed run's log has a second one, which does not
  replace the first);
* `last_error`: the exception line of the last traceback logged since the last command line
  — the first line at the left margin after a `Traceback (most recent call last):` line and
  its indented frames (`OSError: [Errno 28] No space left on device`); a chained exception's
  later traceback wins. An exception group's traceback (Python 3.11+, e.g. an
  `asyncio.TaskGroup` whose tasks failed) is drawn in a frame, each line behind a margin of
  spaces and `| ` (`+ ` on its header, `+-` on the separators): its last error is the
  group's exception line, then the exception lines of its first five sub-exceptions, one
  frame further in, and how many more there are (`ExceptionGroup: unhandled errors in a
  TaskGroup (2 sub-exceptions): OSError: [Errno 28] No space left on device; ValueError:
  bad`; `...; 59 more`); a group nested in it counts by its own exception line. A new
  command line (the process started again) clears it. A traceback cut short by the next log
  record leaves it as it was. Only a traceback in an `ERROR` or `CRITICAL` record (what
  `logger.exception` logs), or before the first record, counts: one in any other record is
  text the run logged (a warning of a retried call with its traceback, a tool's error shown
  in an `INFO` transcript of a rollout). Anything else — a sweep's next `Configuration:`
  block, tables, warnings — never sets it;
* `last_error_line`: the `record_line` of the record whose traceback set `last_error` (null
  with it, or when the traceback came before any record). When it is the log's last record,
  the process logged the exception and nothing after it: the doctor's `crashed` reads that.

Nothing here can fail on bad input: a log is text, every line is kept.
"""

from __future__ import annotations

import re
from typing import Any

from .base import Batch, Output

HEADER = re.compile(r"^(\S+):(\d+) \[([A-Z]+)\] ?(.*)$")
COMMAND = "Command line invocation: "
TRACEBACK = "Traceback (most recent call last):"
# Lines between the tracebacks of a chained exception.
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
# An exception group's traceback: its header, and a line of its frame (the margin, then the
# line behind `| ` or `+ `, or a `+-` separator between its sub-exceptions).
GROUP_TRACEBACK = "Exception Group Traceback (most recent call last):"
FRAMED = re.compile(r"^( *)[|+](?: (.*)|-.*)$")
SUBS_SHOWN = 5  # a group's sub-exceptions named in its last error; the rest are counted
# The levels of a record whose traceback is an error the run met (`logger.exception`,
# `logger.error(..., exc_info=True)`, `logger.critical`): a traceback in any other record is
# text it logged (a warning of a retried call, a tool's output in a transcript).
ERROR_LEVELS = ("ERROR", "CRITICAL")


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline ending the last complete line
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def normalize(data: bytes, first_line: int, state: dict[str, Any]) -> dict[str, list[Any]]:
    """Columns of the `run_logs` rows of `data` (complete lines from `first_line` on),
    moving `state` on (see the module)."""
    level, logger = state.get("level"), state.get("logger")
    record = state.get("record_line")
    in_tb = bool(state.get("in_traceback"))
    cols: dict[str, list[Any]] = {"line_no": [], "level": [], "logger": [], "record_line": [],
                                  "text": []}
    for i, line in enumerate(_lines(data)):
        line_no = first_line + i
        head = HEADER.match(line)
        if head is not None:
            logger, level, record = head.group(1), head.group(3), line_no
            message = head.group(4)
            # A traceback cut short by a record ends here.
            in_tb = message == TRACEBACK and level in ERROR_LEVELS
            state["group"] = None
            if message.startswith(COMMAND):
                if state.get("command") is None:
                    state["command"] = message[len(COMMAND):]
                state["last_error"] = state["last_error_line"] = None  # a new process
        elif line == TRACEBACK:
            in_tb = level is None or level in ERROR_LEVELS
            state["group"] = None  # a line outside a group's frame ends it
        elif in_tb and line and not line[0].isspace() and line not in CHAINED:
            # the exception line closes the traceback
            state["last_error"], state["last_error_line"] = line, record
            in_tb = False
            state["group"] = None
        elif level is None or level in ERROR_LEVELS:
            in_tb = _in_group(line, in_tb, state, record)
        cols["line_no"].append(line_no)
        cols["level"].append(level)
        cols["logger"].append(logger)
        cols["record_line"].append(record)
        cols["text"].append(line)
    state.update(level=level, logger=logger, record_line=record, in_traceback=in_tb)
    return cols


def _in_group(line: str, in_tb: bool, state: dict[str, Any], record: int | None) -> bool:
    """A line that is neither a record's header nor a traceback's first or exception line:
    opens, follows or closes an exception group's frame, moving `state["group"]` (the frame's
    margin, its exception line, those of its sub-exceptions) and `last_error` on (set in the
    record `record`). Returns whether a traceback is still open."""
    framed = FRAMED.match(line)
    group = state.get("group")
    if framed is None:
        state["group"] = None  # the frame ends where its margin does
        return in_tb
    margin, body = len(framed.group(1)), framed.group(2)
    if group is None:
        if body == GROUP_TRACEBACK:
            state["group"] = {"margin": margin, "error": None, "subs": [], "more": 0}
        return in_tb
    if (body is None or not body or body[0].isspace() or margin < group["margin"]
            or body in (TRACEBACK, GROUP_TRACEBACK) or body in CHAINED):
        return in_tb  # a separator, a frame of a traceback, a traceback's header
    # A new dict each time: a ledger state's values are never changed in place.
    if margin == group["margin"] and group["error"] is None:
        group = {**group, "error": body}  # the group's own line: its traceback is closed
        in_tb = False
    elif margin == group["margin"] + 2 and group["error"] is not None:
        # A sub-exception's line (or a nested group's): the first SUBS_SHOWN, then a count.
        group = ({**group, "subs": [*group["subs"], body]} if len(group["subs"]) < SUBS_SHOWN
                 else {**group, "more": group["more"] + 1})
    else:
        return in_tb
    state["group"] = group
    subs = "; ".join(group["subs"]) + (f"; {group['more']} more" if group["more"] else "")
    state["last_error"] = group["error"] + (f": {subs}" if subs else "")
    state["last_error_line"] = record
    return in_tb


class Logs:
    """logs.log → `run_logs`; its ledger state keeps the run's command line and last error
    (`runs.command`, `runs.last_error`, `runs.last_error_line`, ingest/run_facts.py)."""

    kinds = ("logs",)
    tables = ("run_logs",)

    def normalize(self, batch: Batch) -> Output:
        import pyarrow as pa

        from ...storage import schema

        cols = normalize(batch.data, batch.first_line, batch.state)
        n = len(cols["line_no"])
        out = Output()
        if n:
            out.add("run_logs", pa.table({
                "run_id": pa.array([batch.ctx.run_id] * n, pa.string()),
                **{name: pa.array(values) for name, values in cols.items()},
                "source_id": pa.array([batch.ctx.source_id] * n, pa.int64()),
            }).cast(schema.schema("run_logs")))
        return out
