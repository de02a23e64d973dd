"""Text that fits the terminal it is printed on: tables that fold their cells at word
boundaries (and leave out their least needed columns only when even folded they cannot
fit), lines wrapped at word boundaries, and colour only where it is wanted.

Written here rather than with rich: rich's table folds a cell mid-word once the widths
are tight, even where a word-boundary layout fits ("(wireguard-go-deb" / "ian)",
"0.03→0" / ".13" on the recorded runs at 80 columns), and the terminal's lines are
composed as plain text first so that colour never counts against the width.

The width is the terminal's (``COLUMNS`` overrides it, as in every POSIX tool); output
that goes to a file or a pipe has no terminal and gets :data:`FALLBACK_WIDTH`, so logs
stay readable without a terminal to ask.
"""

import os
import re
import shutil
import textwrap
from collections.abc import Sequence
from typing import TextIO

FALLBACK_WIDTH = 100
#: Narrower than this, nothing is left out or cut any more: a table of two columns at 30
#: characters helps nobody, and the reports hold everything anyway.
MIN_WIDTH = 40
ELLIPSIS = "…"
#: How far back :func:`cut` looks for a word boundary.
CUT_REACH = 24

BOLD, RED, GREEN, RESET = "\033[1m", "\033[31m", "\033[32m", "\033[0m"


def width() -> int:
    return max(MIN_WIDTH, shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns)


def colour_wanted(stream: TextIO) -> bool:
    """Colour on a terminal only, and never when ``NO_COLOR`` is set to anything
    (https://no-color.org) or the terminal says it cannot (``TERM=dumb``)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


def paint(text: str, code: str, on: bool) -> str:
    return f"{code}{text}{RESET}" if on and text else text


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, an ellipsis marking what was cut: at the
    last word boundary within :data:`CUT_REACH` characters of the end, so a figure or a
    word is never shown in part ("at 100.2% of the…", not "at 100.2% of the lin…")."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - 1)]
    space = head.rfind(" ")
    if space > 0 and len(head) - space <= CUT_REACH:
        head = head[:space]
    return head.rstrip(" ,;:(") + ELLIPSIS


#: A figure and the unit after it ("956.4 Mbit/s", "5 s") stay on one line.
_FIGURE_UNIT = re.compile(r"(?<=\d) (?=(?:[kMG]bit/s|[kMG]?pps|ms|µs|s|[KMG]i?B|bytes)(?![\w/]))")
#: What holds them together while textwrap breaks the rest: no space to it.
_GLUE = "\ue000"


def wrap(text: str, limit: int, *, indent: str = "", hanging: str = "") -> list[str]:
    """``text`` as lines of at most ``limit`` characters: the first starts with
    ``indent``, the others with ``hanging``; a figure is never parted from its unit. A
    word longer than a line (a path, a command) is kept whole on a line of its own:
    cut, it could not be copied."""
    lines = textwrap.wrap(
        _FIGURE_UNIT.sub(_GLUE, text),
        width=max(limit, len(hanging) + 10),
        initial_indent=indent,
        subsequent_indent=hanging,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [indent.rstrip()]
    return [line.replace(_GLUE, " ") for line in lines]


#: The continuation of a folded first cell (a configuration's name) is indented by this,
#: so that it does not read as the name of another row.
HANG = "  "
#: A heading this short is kept on one line ("% base", "LAN MTU"): folded, its pieces
#: ("%", "base") say less than the characters saved.
WHOLE_HEADING = 8


def _least(cell: str, first: bool) -> int:
    """The narrowest a column can be for ``cell`` without cutting a word."""
    words = cell.split()
    if not words:
        return 0
    hang = len(HANG) if first else 0
    return max([len(words[0]), *(len(w) + hang for w in words[1:])])


def _folded_cell(cell: str, room: int, first: bool) -> list[str]:
    if len(cell) <= room:
        return [cell]
    return textwrap.wrap(
        cell,
        width=room,
        subsequent_indent=HANG if first else "",
        break_on_hyphens=False,
        break_long_words=False,
    ) or [""]


def folded(
    header: Sequence[str],
    body: Sequence[Sequence[str]],
    numeric: set[int],
    limit: int,
    *,
    whole_headings: bool = False,
) -> list[str] | None:
    """The table in at most ``limit`` characters a line, its cells folded onto more lines
    at spaces (a figure or a word is never split), or None if even folded it cannot fit.
    ``whole_headings``: headings of up to :data:`WHOLE_HEADING` characters stay whole.

    The widest column that can still give is narrowed first, one character at a time,
    so that the columns fold evenly rather than one of them into a tall ribbon.
    """
    rows = [header, *body]
    count = len(header)
    widths = [max(len(r[i]) for r in rows) for i in range(count)]
    least = [max(_least(r[i], i == 0) for r in rows) for i in range(count)]
    if whole_headings:
        short = [len(h) if len(h) <= WHOLE_HEADING else 0 for h in header]
        least = [max(pair) for pair in zip(least, short, strict=True)]
    gaps = 2 * (count - 1)
    if sum(least) + gaps > limit:
        return None
    while sum(widths) + gaps > limit:
        give = max((i for i in range(count) if widths[i] > least[i]), key=lambda i: widths[i])
        widths[give] -= 1

    def lines(cells: Sequence[str]) -> list[str]:
        pairs = enumerate(zip(cells, widths, strict=True))
        parts = [_folded_cell(c, w, i == 0) for i, (c, w) in pairs]
        height = max(map(len, parts))
        out = []
        for k in range(height):
            at = [p[k] if k < len(p) else "" for p in parts]
            out.append(
                "  ".join(
                    c.rjust(w) if i in numeric else c.ljust(w)
                    for i, (c, w) in enumerate(zip(at, widths, strict=True))
                ).rstrip()
            )
        return out

    rule = "  ".join("-" * w for w in widths)
    return [*lines(header), rule, *(line for r in body for line in lines(r))]


def aligned(header: Sequence[str], body: Sequence[Sequence[str]], numeric: set[int]) -> list[str]:
    """A plain-text table: the header, a rule, the rows; ``numeric`` columns (by index)
    right-aligned, the others left-aligned."""
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in body)]


def fitted(
    header: Sequence[str],
    body: Sequence[Sequence[str]],
    numeric: set[int],
    limit: int,
    droppable: Sequence[str],
    *,
    fold: bool = False,
) -> tuple[list[str], list[str]]:
    """The table in at most ``limit`` characters a line, and the headings it left out.

    ``fold``: the cells fold first (:func:`folded`, short headings whole if that fits,
    else folded too), and only a table that cannot fit even folded leaves out columns.
    Columns named in ``droppable`` go, in that order, until the table fits; then the
    first column (the configurations' names) is cut, down to a third of the width.
    """
    keep = list(range(len(header)))
    left_out: list[str] = []

    def render(rows: Sequence[Sequence[str]]) -> list[str] | None:
        picked = {n for n, i in enumerate(keep) if i in numeric}
        shown = [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
        if not fold:
            lines = aligned(*shown, picked)
            return lines if max(map(len, lines)) <= limit else None
        # Short headings are folded too before a column goes.
        return folded(*shown, picked, limit, whole_headings=True) or folded(*shown, picked, limit)

    lines = render(body)
    for name in droppable:
        if lines is not None:
            break
        if name in header and header.index(name) in keep:
            keep.remove(header.index(name))
            left_out.append(name)
            lines = render(body)
    if lines is None and keep and keep[0] == 0:
        full = aligned(
            [header[i] for i in keep],
            [[row[i] for i in keep] for row in body],
            {n for n, i in enumerate(keep) if i in numeric},
        )
        first = max(len(row[0]) for row in [header, *body])
        excess = max(map(len, full)) - limit
        room = max(limit // 3, len(header[0]), first - excess if not fold else 0)
        body = [[cut(row[0], room), *row[1:]] for row in body]
        lines = render(body)
    if lines is None:  # narrower than any table can be: as it is
        lines = aligned(
            [header[i] for i in keep],
            [[row[i] for i in keep] for row in body],
            {n for n, i in enumerate(keep) if i in numeric},
        )
    return lines, left_out


def wrapped(lines: Sequence[str], limit: int) -> list[str]:
    """Each line of at most ``limit`` characters as it is; a longer one wrapped, its
    continuation indented four more than the line's own indent."""
    out: list[str] = []
    for line in lines:
        if len(line) <= limit:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out += wrap(line.strip(), limit, indent=indent, hanging=indent + "    ")
    return out
