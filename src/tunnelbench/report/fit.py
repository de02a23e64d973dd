"""Text that fits the terminal it is printed on: tables that leave out their least
needed columns, lines wrapped or cut to the width, and colour only where it is wanted.

The width is the terminal's (``COLUMNS`` overrides it, as in every POSIX tool); output
that goes to a file or a pipe has no terminal and gets :data:`FALLBACK_WIDTH`, so logs
stay readable without a terminal to ask.
"""

import os
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


def wrap(text: str, limit: int, *, indent: str = "", hanging: str = "") -> list[str]:
    """``text`` as lines of at most ``limit`` characters: the first starts with
    ``indent``, the others with ``hanging``. A word longer than a line (a path, a
    command) is kept whole on a line of its own: cut, it could not be copied."""
    return textwrap.wrap(
        text,
        width=max(limit, len(hanging) + 10),
        initial_indent=indent,
        subsequent_indent=hanging,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [indent.rstrip()]


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
) -> tuple[list[str], list[str]]:
    """The table in at most ``limit`` characters a line, and the headings it left out.

    Columns named in ``droppable`` go first, in that order, until the table fits; then
    the first column (the configurations' names) is cut, down to a third of the width.
    """
    keep = list(range(len(header)))
    left_out: list[str] = []

    def render() -> list[str]:
        return aligned(
            [header[i] for i in keep],
            [[row[i] for i in keep] for row in body],
            {n for n, i in enumerate(keep) if i in numeric},
        )

    lines = render()
    for name in droppable:
        if max(map(len, lines)) <= limit:
            break
        if name in header and header.index(name) in keep:
            keep.remove(header.index(name))
            left_out.append(name)
            lines = render()
    excess = max(map(len, lines)) - limit
    if excess > 0 and keep and keep[0] == 0:
        first = max(len(row[0]) for row in [header, *body])
        room = max(first - excess, limit // 3, len(header[0]))
        body = [[cut(row[0], room), *row[1:]] for row in body]
        lines = render()
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
