"""Text for a terminal: control characters shown, never obeyed.

Contract: `printable(text)` is `text` with every control character written so that people see
it instead of their terminal acting on it: a newline as `⏎`, a tab as a space, a CR dropped,
NUL as `\\0`, DEL and every other C0 control as `\\xNN` (an ANSI escape would move the cursor
or recolour the terminal). It is the one rule of every line and cell written for people: the
table and markdown formats (present.render), `FIRED` lines and notification text
(health.firing), the doctor's findings (present.findings), the runs `forget` lists
(cli.maintain). A line stays one line, so a `while read` loop reads one firing per line.
Programs' formats (csv, json) keep the text as it is.

Text read from outside can also hold bytes that are not UTF-8 (a shell argument, a file name
from a Latin-1 file system): Python keeps each as a lone surrogate, which no stored value or
DuckDB string can hold. `not_utf8(text)` is where the first such character is (None when
`text` is UTF-8 text), `escaped(text)` shows each such byte as `\\xNN`: the one test and the
one rendering of them, for the CLI's arguments and the ingest's names alike.

>>> printable("a\\nb\\tc\\x1b[31m\\x00")
'a⏎b c\\\\x1b[31m\\\\0'
>>> import os
>>> name = os.fsdecode(b"caf\\xe9")
>>> not_utf8(name), escaped(name), not_utf8("café")
(3, 'caf\\\\xe9', None)
"""

from __future__ import annotations

CONTROLS = {c: f"\\x{c:02x}" for c in range(32) if chr(c) not in "\n\r\t"}
CONTROLS.update({ord("\n"): "⏎", ord("\r"): "", ord("\t"): " ", 0: "\\0", 0x7F: "\\x7f"})


def printable(text: str) -> str:
    """`text` with its control characters shown (see the module). Text Python calls
    printable holds none of them (each is one it does not), and is returned as it is."""
    return text if text.isprintable() else text.translate(CONTROLS)


def not_utf8(text: str) -> int | None:
    """The index of the first character of `text` UTF-8 cannot encode (a lone surrogate),
    else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


def escaped(text: str) -> str:
    """`text` with each byte a lone surrogate stands for as `\\xNN` (a surrogate no byte
    stands for as `\\udNNN`)."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")
