"""What a tool answers: compact text with a row cap and a character cap, saying what it cut.

Contract: an agent reads every character of an answer, so answers are text (markdown tables by
default, or CSV with a header line; never JSON), rendered by `present.render` as the CLI
renders `-F markdown` / `-F csv` (NaN and ±Infinity as text, six significant digits in
markdown; long text cut at 200 characters but in the columns a table names `whole`, such as
the doctor's statements), and bounded twice:

* rows: a tool shows at most `limit` rows from `offset` (`Page`); the rest are named in a
  notice under the table: "rows 1–50 of 1,234 (limit=50): ask again with offset=50" (a table
  the tool's offset does not page says how else to get the rest, `UNPAGED`); a table
  without rows keeps its header (the columns) above "(no rows)"; a page that could hold none
  of the rows left (the next one alone is larger than a page) says so instead, and a first
  row larger than the whole answer is cut with a notice of how much it left out;
* characters: the whole answer holds at most `max_chars` characters (`DEFAULT_CHARS` unless
  the call or `runstore mcp --max-chars` says otherwise; `MIN_CHARS`..`MAX_CHARS`). A table
  keeps the whole rows that fit and says where it stopped and which offset continues it; a
  table whose header alone leaves no room for a row shows as much of the header as fits and
  says how to narrow it (short column names, fewer columns, a larger max_chars); any other
  text (`Answer.text`) is cut at the end with the count of characters left out. An error
  result is too (`error`): one that quotes a long query or value is cut likewise.

Every answer cut at `max_chars`, for whatever reason, says so in a notice that names the
"character cap" and how to ask for the rest or for less; an answer that fits whole has none.

`Answer` collects an answer's parts in order (`line`, `text`, `table`) and `render()` joins
them within the budget: the parts that fit whole, then as much of the next as fits (a table
keeps whole rows), then the notices. Notices are kept whole: room is made for them by
cutting the parts above. Only when the notices and notes alone pass the cap (no tool's do)
is the answer cut at its end, under one notice that says so (`_squeezed`). `note` adds a
line at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pyarrow as pa

    from ..store.base import Rows

Format = Literal["markdown", "csv"]
DEFAULT_CHARS = 16_000
MIN_CHARS = 1_000
MAX_CHARS = 200_000
ROOM = 400  # characters kept free for the notices under a cut answer
ROW_START = 40  # a first row cut to fit shows at least this many characters of it
# How to ask for the rest of a table that `offset` does not page (a tool without one, or a
# second table beside the one it pages): what its notice says instead of an offset.
UNPAGED = "raise max_chars"


@dataclass(frozen=True)
class Page:
    """Which rows a table shows: `limit` from `offset`, of `total` (None: not counted)."""

    offset: int
    limit: int
    total: int | None = None


@dataclass
class _Table:
    table: "Rows | pa.Table"  # the rows of the page only
    page: Page
    fmt: Format
    what: str  # what a row is, plural ("runs", "rows")
    more: str  # how to ask for the rest, with {offset} for the next offset
    whole: tuple[str, ...] = ()  # columns whose values markdown never cuts (besides render's)


@dataclass
class Answer:
    """An answer being put together (see the module)."""

    max_chars: int = DEFAULT_CHARS
    parts: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def line(self, text: str) -> "Answer":
        """A line of text (a title, a verdict) that is shown whole or not at all."""
        self.parts.append(("line", text))
        return self

    def text(self, text: str, *, more: str = "ask for less, or raise max_chars") -> "Answer":
        """Free text, cut at the budget with a count of what was left out and `more`, how to
        ask for the rest."""
        self.parts.append(("text", (text, more)))
        return self

    def table(self, table: "Rows | pa.Table", page: Page, *, fmt: Format = "markdown",
              what: str = "rows", more: str = "ask again with offset={offset}",
              whole: tuple[str, ...] = ()) -> "Answer":
        """The page's rows (`table` holds only them) as a markdown or CSV table; `whole`
        names columns whose values are never cut (as `render`'s identifying columns)."""
        self.parts.append(("table", _Table(table, page, fmt, what, more, whole)))
        return self

    def note(self, text: str) -> "Answer":
        self.notes.append(text)
        return self

    def render(self) -> str:
        """The answer within `max_chars`: whole when it fits, else cut (see the module)."""
        budget = self.max_chars - sum(len(n) + 1 for n in self.notes)
        text, cut = self._render(budget)
        if cut or len(text) > self.max_chars:  # cut: make room for the notice that says so
            budget -= ROOM
            text, _ = self._render(budget)
        # Notices longer than ROOM (one with a long `more` or `what`): cut more of the
        # parts above them, a few times (a notice's numbers change with what is cut).
        for _ in range(3):
            if len(text) <= self.max_chars or budget <= 0:
                break
            budget -= len(text) - self.max_chars
            text, _ = self._render(budget)
        if len(text) > self.max_chars:  # the notices and notes alone overflow the cap
            text = _squeezed(text, self.max_chars)
        return text

    def _render(self, budget: int) -> tuple[str, bool]:
        """The parts within `budget` characters, then their notices; whether any was cut."""
        out: list[str] = []
        notices: list[str] = []
        used, cut = 0, False
        for i, (kind, part) in enumerate(self.parts):
            left = budget - used
            later = len(self.parts) - i - 1
            rest = f"; {later} later part{'s' if later != 1 else ''} left out" if later else ""
            if kind != "table" and not later and not self.notes:
                # The answer's last line breaks are dropped (below), so they take no room.
                part = (part.rstrip("\n") if kind == "line"
                        else (part[0].rstrip("\n"), part[1]))
            if kind == "line":
                if len(part) + 1 > left:
                    notices.append(f"(the answer reached its character cap here{rest}; ask for "
                                   "less: a smaller limit, fewer runs or columns)")
                    cut = True
                    break
                out.append(part)
            elif kind == "text":
                text, more = part
                if len(text) + 1 > left:
                    keep = max(left - 1, 0)
                    out.append(text[:keep] + "…")
                    notices.append(f"(the answer reached its character cap: {len(text) - keep:,} "
                                   f"of this part's {len(text):,} characters left out{rest}; "
                                   f"{more})")
                    cut = True
                    break
                out.append(text)
            else:
                text, notice, full = _render_table(part, left)
                if notice:  # under its table
                    notice = notice if full or not rest else notice[:-1] + rest + ")"
                    text = f"{text}\n{notice}" if text else notice
                out.append(text)
                if not full:
                    cut = True
                    break
            used += len(out[-1]) + 1
        return "\n".join(out + notices + self.notes).rstrip("\n") + "\n", cut


def error(text: str, max_chars: Any = None, default: int = DEFAULT_CHARS) -> str:
    """An error result's text within the call's `max_chars` (`default`, the server's cap,
    when the call gives none that is a valid cap): an error echoing a long query or value is
    cut like any answer, its cause (which comes first) kept, and says so."""
    cap = (max_chars if isinstance(max_chars, int) and not isinstance(max_chars, bool)
           and MIN_CHARS <= max_chars <= MAX_CHARS else default)
    return Answer(max_chars=cap).text(
        text, more="the error quotes a long argument; send a shorter one").render().rstrip("\n")


def _squeezed(text: str, cap: int) -> str:
    """`text` cut to `cap` characters, ending with a notice of how much was left out: the
    last resort, when the notices and notes alone are longer than the cap (one of them may be
    cut with the rest, so this notice says how to ask for less)."""
    def notice(left: int) -> str:
        return (f"(the answer reached its character cap: {left:,} of its {len(text):,} "
                "characters left out; ask for less, or raise max_chars)")

    keep = max(cap - len(notice(len(text))) - 3, 0)  # "…\n" and "\n" around the notice
    return text[:keep] + "…\n" + notice(len(text) - keep) + "\n"


def _render_table(t: _Table, room: int) -> tuple[str, str | None, bool]:
    """(the table's text within `room` characters, its notice, whether every row fitted)."""
    lines = _lines(t.table, t.fmt, t.whole)
    head, rows = lines[:2 if t.fmt == "markdown" else 1], lines[2 if t.fmt == "markdown" else 1:]
    page, n = t.page, len(rows)
    if n == 0 and page.total and page.offset >= page.total:
        return _empty(t, head)  # past the last page: a notice only
    # The header and what must fit below it: the start of the first row, or "(no rows)"
    # (a page whose rows were too large to send has only its notice, outside `room`).
    below = ROW_START + 1 if n else 0 if page.total else len(f"(no {t.what})") + 1
    if sum(len(h) + 1 for h in head) + below > room:
        return _header_only(t, head, n, room)
    if n == 0:
        return _empty(t, head)
    shown, size = 0, sum(len(h) + 1 for h in head)
    for row in rows:
        if size + len(row) + 1 > room and shown:
            break
        size += len(row) + 1
        shown += 1
    body = head + rows[:shown]
    first, last = page.offset + 1, page.offset + shown
    total = page.total
    of = f" of {total:,}" if total is not None else ""
    more = t.more.replace("{offset}", str(page.offset + shown))
    if shown == 1 and size > room:  # one row larger than the room: cut it, say so
        whole = len(body[-1])
        body[-1] = body[-1][:room - size + whole] + "…"  # ROW_START or more: the header fits
        then = f"; the next {t.what}: {more}" if shown < n or (total or 0) > last else ""
        return "\n".join(body), (
            f"(row {first:,} cut at the answer's character cap: {whole - len(body[-1]) + 1:,} "
            f"of its {whole:,} characters left out; ask for fewer or shorter columns, e.g. "
            f"left(text, 1000), or raise max_chars{then})"), False
    if shown < n:
        notice = (f"({t.what} {first:,}–{last:,}{of} shown: the answer reached its character "
                  f"cap; {more}, or ask for fewer rows or columns)")
    elif total is not None and last < total:
        notice = (f"({t.what} {first:,}–{last:,}{of} shown (limit={page.limit}); "
                  f"{more})")
    elif total is None and n >= page.limit:
        notice = (f"({t.what} {first:,}–{last:,} shown (limit={page.limit}); more may follow: "
                  f"{more})")
    else:
        notice = None
    return "\n".join(body), notice, shown == n


def _header_only(t: _Table, head: list[str], n: int, room: int) -> tuple[str, str, bool]:
    """A table whose header alone leaves no room below it within `room`: as much of the
    header as fits (it names the columns to shorten) and a notice saying how to narrow it;
    asking again with the same offset gives the same, so the notice names no offset."""
    text = "\n".join(head)
    keep = room - 2  # the ellipsis, and the line break after the part
    shown = text[:keep] + "…" if keep > 0 else ""
    page, total = t.page, t.page.total
    if n:
        of = f" of {total:,}" if total is not None else ""
        rows = f"{t.what} {page.offset + 1:,}–{page.offset + n:,}{of} not shown:"
    elif total:
        rows = f"{t.what} {page.offset + 1:,}–{total:,} of {total:,} not shown:"
    else:
        rows = f"no {t.what};"
    return shown, (
        f"({rows} the table's header alone is {len(text):,} characters, more than the "
        "answer's character cap leaves room for; give long columns short names (expr AS "
        "name), ask for fewer columns, or raise max_chars)"), False


def _empty(t: _Table, head: list[str]) -> tuple[str, str | None, bool]:
    """A table without rows: its header (the columns, as the CLI prints them) and `(no rows)`;
    past the last page, only the notice saying so; a page that holds none of the rows that
    remain (the first is larger than a page may be: `sql`'s `PAGE_BYTES`), the header and
    a notice that says so, never `(no rows)`."""
    total, offset = t.page.total, t.page.offset
    if total and offset >= total:
        return "", (f"(offset={offset} is past the last of the {total:,} {t.what}: "
                    f"ask with an offset below {total:,})"), True
    columns = head if t.table.column_names else []
    if total:
        return "\n".join(columns), (
            f"({t.what} {offset + 1:,}–{total:,} of {total:,} not shown: the first of them "
            "alone is larger than a page of an answer may be; ask for fewer or shorter "
            "columns, e.g. left(text, 1000))"), True
    return "\n".join([*columns, f"(no {t.what})"]), None, True


def _lines(table: "Rows | pa.Table", fmt: Format, whole: tuple[str, ...] = ()) -> list[str]:
    """The header line(s) then one line per row. Markdown rows are one line each (render
    escapes line breaks); a CSV row with a line break in a value spans several lines, so CSV
    rows are rendered one at a time."""
    from ..present.render import render

    if fmt == "markdown":
        return render(table, "markdown", whole=whole).rstrip("\n").split("\n")
    head = render(table.slice(0, 0), "csv").rstrip("\n")
    rows = [render(table.slice(i, 1), "csv")[len(head) + 1:].rstrip("\n")
            for i in range(table.num_rows)]
    return [head, *rows]
