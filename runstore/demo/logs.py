"""The text of a generated run's `logs.log`: what `ml_log.setup_logging` makes Python log.

Contract: `_LogText` builds the file line by line as tinker-cookbook 0.6.1's file handler
writes it (`<logger>:<lineno> [<LEVEL>] <message>`, a multi-line message continuing on the
lines after): `command` (the `root` record every process start logs), `info` / `warning` /
`error` records, `table` (a `PrettyPrintLogger` metrics table: a record with an empty message,
then the box-drawn rows), `traceback` (the lines Python's logging appends to an `exception`
record), `configuration` (the `Configuration:` block a sequential sweep's runner logs for its
next point, still into the previous run's file). `text()` is the file's content. Pure: no
I/O, no clock, no randomness.
"""

from __future__ import annotations

from typing import Any, Iterable


class _LogText:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def record(self, logger: str, lineno: int, level: str, message: str) -> None:
        self.lines.append(f"{logger}:{lineno} [{level}] {message}\n")

    def info(self, logger: str, lineno: int, message: str) -> None:
        self.record(logger, lineno, "INFO", message)

    def warning(self, logger: str, lineno: int, message: str) -> None:
        self.record(logger, lineno, "WARNING", message)

    def command(self, command: str) -> None:
        self.info("root", 791, f"Command line invocation: {command}")

    def table(self, title: str, items: Iterable[tuple[str, Any]]) -> None:
        """A rich metrics table, as `PrettyPrintLogger` logs it (keys padded to 34, values
        to 9 columns)."""
        out = self.lines
        out.append("tinker_cookbook.utils.ml_log:317 [INFO] \n")
        out.append(f"{title:^50}\n")
        out.append("\u250f" + "\u2501" * 36 + "\u2533" + "\u2501" * 11 + "\u2513\n")
        out.append(f"\u2503 {'Metric':<34} \u2503 {'Value':<9} \u2503\n")
        out.append("\u2521" + "\u2501" * 36 + "\u2547" + "\u2501" * 11 + "\u2529\n")
        for k, v in items:
            out.append(f"\u2502 {k:<34} \u2502 {v:<9.6g} \u2502\n")
        out.append("\u2514" + "\u2500" * 36 + "\u2534" + "\u2500" * 11 + "\u2518\n")

    def traceback(self, frames: Iterable[tuple[str, int, str, str]], exception: str) -> None:
        """`Traceback (most recent call last):`, the frames (file, line, function, source),
        then the exception line."""
        self.lines.append("Traceback (most recent call last):\n")
        for path, line, func, source in frames:
            self.lines.append(f'  File "{path}", line {line}, in {func}\n')
            self.lines.append(f"    {source}\n")
        self.lines.append(exception + "\n")

    def configuration(self, config: dict[str, Any]) -> None:
        """The `Configuration:` block logged for the next point of a sweep."""
        self.info("tinker_cookbook.utils.ml_log", 317, "")
        self.lines.append("Configuration:\n")
        for key, value in config.items():
            self.lines.append(f"  {key}: {value!r}\n")

    def text(self) -> str:
        return "".join(self.lines)
