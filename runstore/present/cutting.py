"""Text in terminal columns, for the table format (`present.render`): measured and cut.

Contract: `text_width(text)` is the columns `text` takes on a terminal: two for a wide or
full-width character (`unicodedata.east_asian_width` W or F: CJK, most emoji), none for a
combining mark (`unicodedata.combining`), one for any other (control characters are
escaped before text gets here: `printable`). ASCII text is measured by `len` alone.
`shorten(text, limit)` cuts text to at most `limit` columns in the middle, at `/` where it
is a path, so both ends stay readable.

Headers are cut so that none reads as another: a cut header (text with one `…`) reads as a
header that starts with the text before its `…` and ends with the text after.
`header_widths(header, others)` is how narrow a header may be cut and read as no other:
keeping its start (`smooth_me…`), and at all, below that in the middle as `shorten` cuts
(`sweep/…/lr_1e-5`). `cut_header(header, limit, start)` is the header in `limit` columns:
whole when it fits, its start while `limit` is at least the first width, else cut in the
middle. Two headers so cut, each to at least its second width, never show the same text: a
header holding `…` is never cut, so each shown header has at most one `…`, and two that
showed the same text would each read as the other. Pure functions of `str`: nothing here
knows tables.
"""

from __future__ import annotations

import unicodedata
from typing import Callable, Sequence

_WIDE = frozenset({"W", "F"})  # East Asian widths a terminal gives two columns


def _char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in _WIDE else 1


def text_width(text: str) -> int:
    """The columns `text` takes on a terminal (see the module).

    >>> text_width("lr_4e-5"), text_width("uni-🧪-ключ"), text_width("日本"), text_width("e\\u0301")
    (7, 11, 4, 1)
    """
    return len(text) if text.isascii() else sum(map(_char_width, text))


def _start(text: str, cols: int) -> str:
    """The longest start of `text` that takes at most `cols` columns."""
    if text.isascii():
        return text[:max(cols, 0)]
    used = 0
    for i, char in enumerate(text):
        used += _char_width(char)
        if used > cols:
            return text[:i]
    return text


def _end(text: str, cols: int) -> str:
    """The longest end of `text` that takes at most `cols` columns, less a combining mark it
    would start with (whose letter is cut off)."""
    if text.isascii():
        return text[len(text) - cols:] if cols > 0 else ""
    at, used = len(text), 0
    while at and used + _char_width(text[at - 1]) <= cols:
        at -= 1
        used += _char_width(text[at])
    while at < len(text) and not _char_width(text[at]):
        at += 1
    return text[at:]


def shorten(text: str, limit: int | None) -> str:
    """`text` cut to `limit` columns in the middle, at `/` when it is a path of 3 or more
    parts and its first and last parts fit (names differ at their ends: the seed, the lr).

    >>> shorten("math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5", 25)
    'math_rl_sweep/…/lr_4e-5'
    >>> shorten("meta-llama/Llama-3.1-8B-Instruct", 14), shorten("実験/日本語のモデル/lr_4e-5", 14)
    ('meta-l…nstruct', '実験/…/lr_4e-5')
    """
    if limit is None:
        return text
    width: Callable[[str], int] = len if text.isascii() else text_width
    if width(text) <= limit:
        return text
    if limit < 2:
        return "…"[:limit]
    parts = text.split("/")
    head, tail = parts[0] + "/", "/" + parts[-1]
    if len(parts) >= 3 and parts[0] and parts[-1] and width(head) + 1 + width(tail) <= limit:
        i, j = 1, len(parts) - 2
        grew = True
        while grew and i <= j:  # whole parts, from the end first, then from the start
            grew = False
            if width(head) + 2 + width(parts[j]) + width(tail) <= limit:
                tail, j, grew = "/" + parts[j] + tail, j - 1, True
            if i <= j and width(head) + width(parts[i]) + 2 + width(tail) <= limit:
                head, i, grew = head + parts[i] + "/", i + 1, True
        return head + "…" + tail
    back = limit // 2
    return _start(text, limit - 1 - back) + "…" + _end(text, back)


def _shared_start(a: str, b: str) -> int:
    """How many characters `a` and `b` share at their start (as `os.path.commonprefix`, by
    halving: tables' names often share most of their length)."""
    shared, most = 0, min(len(a), len(b))
    while shared < most:  # a[:shared] is shared, a[:most + 1] is not
        mid = (shared + most + 1) // 2
        if a[shared:mid] == b[shared:mid]:
            shared = mid
        else:
            most = mid - 1
    return shared


def header_widths(header: str, others: Sequence[str], floor: int = 2) -> tuple[int, int]:
    """How narrow `header` may be cut and read as no other header: keeping its start (its
    start and `…`: one character past the longest start it shares with another), and at all
    (not below `floor`): narrower than the first while each cut in the middle (`shorten`)
    down to there reads as none.

    >>> header_widths("smooth_mean", ["smooth_min", "smooth_n", "n"])
    (10, 4)
    >>> header_widths("sweep/llama-3.1-8b/lr_1e-5", ["sweep/llama-3.1-8b/lr_4e-5", "key"])
    (24, 8)
    >>> header_widths("learning_rate", ["step"]), header_widths("n", ["n_nan"])
    ((2, 2), (1, 1))
    """
    full = text_width(header)
    if "…" in header:
        return full, full
    # The characters `header` shares with each other header at its start and at its end: a
    # middle cut (a start of `header`, `…`, an end of it) reads as a header sharing both.
    starts = [_shared_start(header, o) for o in others]
    start = min(full, text_width(header[:max(starts, default=0) + 1]) + 1)
    backwards = header[::-1]
    ends = [_shared_start(backwards, o[::-1]) for o in others]
    # Only the pairs no other pair beats at both ends matter.
    frontier: list[tuple[int, int]] = []
    for s, e in sorted(zip(starts, ends), reverse=True):
        if not frontier or e > frontier[-1][1]:
            frontier.append((s, e))
    width = start
    while width > floor:
        head, _, tail = shorten(header, width - 1).partition("…")
        if any(s >= len(head) and e >= len(tail) for s, e in frontier):
            break
        width -= 1
    return start, width


def cut_header(header: str, limit: int, start: int) -> str:
    """`header` in `limit` columns: whole when it fits; else its start and `…` when `limit`
    is at least `start` (the first of its `header_widths`: people know a name by how it
    begins); else cut in the middle (`shorten`), where names that share their start differ.

    >>> cut_header("smooth_mean", 10, 10), cut_header("sweep/llama-3.1-8b/lr_1e-5", 16, 24)
    ('smooth_me…', 'sweep/…/lr_1e-5')
    """
    if text_width(header) <= limit:
        return header
    if limit >= start:
        return _start(header, limit - 1) + "…"
    return shorten(header, limit)
