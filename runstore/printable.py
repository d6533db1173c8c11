"""Text for a terminal: control characters shown, never obeyed.

Contract: `printable(text)` is `text` with every control character written so that people see
it instead of their terminal acting on it: a newline as `⏎`, a tab as a space, a CR dropped,
NUL as `\\0`, DEL and every other C0 control as `\\xNN` (an ANSI escape would move the cursor
or recolour the terminal). It is the one rule of every line and cell written for people: the
table and markdown formats (present.render), `FIRED` lines and notification text
(health.firing), the doctor's findings (present.findings). A line stays one line, so a
`while read` loop reads one firing per line. Programs' formats (csv, json) keep the text as
it is.

>>> printable("a\\nb\\tc\\x1b[31m\\x00")
'a⏎b c\\\\x1b[31m\\\\0'
"""

from __future__ import annotations

CONTROLS = {c: f"\\x{c:02x}" for c in range(32) if chr(c) not in "\n\r\t"}
CONTROLS.update({ord("\n"): "⏎", ord("\r"): "", ord("\t"): " ", 0: "\\0", 0x7F: "\\x7f"})


def printable(text: str) -> str:
    """`text` with its control characters shown (see the module)."""
    return text.translate(CONTROLS)
