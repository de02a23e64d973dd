"""The forum post (:mod:`tunnelbench.report.forum`) in BBCode, for phpBB forums such as
MikroTik's, where a post is BBCode and there are no Markdown tables.

phpBB's default BBCodes are ``[b]``, ``[i]``, ``[u]``, ``[quote]``, ``[code]``,
``[list]``/``[*]``, ``[url]``, ``[img]``, ``[color]`` and ``[size]``: a table
(``[table]``) exists only where a board's administrator added it, so the results are a
monospaced table in ``[code]``, which every phpBB board shows as it is. There is no
collapsed block either (``[spoiler]`` is an extension), so the environment comes last
under its own heading. The image is not linked: phpBB shows only an uploaded
attachment or an image on a web server, and the poster attaches it by hand.

The post is the forum Markdown converted line by line, so the two cannot drift apart:
that Markdown is this package's own (headings, pipe tables, one-line list items, one
fenced block), not Markdown at large.
"""

import re

from tunnelbench.report import forum
from tunnelbench.report.view import RunView

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_IMAGE = re.compile(r"^!\[.*\]\(.*\)$")
_SUMMARY = re.compile(r"^<summary>(.*)</summary>$")


def _unescape(text: str) -> str:
    """Undo :func:`tunnelbench.report.markdown.escape` (``\\|`` and ``\\\\``)."""
    return re.sub(r"\\([\\|])", r"\1", text)


def _inline(text: str) -> str:
    return _BOLD.sub(r"[b]\1[/b]", _unescape(text))


def _cells(line: str) -> list[str]:
    """A pipe table line's cells, padding kept (the table is already aligned)."""
    inner = line[2:-2]
    return [_unescape(c) for c in re.split(r"(?<!\\) \| ", inner)]


def _plain_row(line: str) -> str:
    cells = _cells(line)
    if all(set(c.strip()) <= set("-:") for c in cells):  # the alignment rule
        cells = ["-" * len(c) for c in cells]
    return "  ".join(cells).rstrip()


def _is_results(line: str) -> bool:
    """A line of the results: a table row, a group's heading or the blank between."""
    return line.startswith("| ") or line == "" or bool(re.fullmatch(r"\*\*.+\*\*", line))


def convert(markdown: str) -> str:
    """The forum Markdown as BBCode."""
    lines = markdown.splitlines()
    out: list[str] = []
    i = 0
    depth = 0  # open [list]s

    def close_lists(to: int = 0) -> None:
        nonlocal depth
        while depth > to:
            out.append("[/list]")
            depth -= 1

    while i < len(lines):
        line = lines[i]
        if line.startswith("| ") or (
            _is_results(line) and line.startswith("**") and i + 2 < len(lines)
            and lines[i + 2].startswith("| ")
        ):  # fmt: skip
            # The results: every table of them in one monospaced block.
            close_lists()
            block: list[str] = []
            while i < len(lines) and _is_results(lines[i]):
                row = lines[i]
                block.append(_plain_row(row) if row.startswith("| ") else _unescape(row))
                i += 1
            while block and not block[-1]:
                block.pop()
                i -= 1
            out += ["[code]", *(b.replace("**", "") for b in block), "[/code]"]
            continue
        if line.startswith("```"):
            close_lists()
            end = lines.index("```", i + 1) if "```" in lines[i + 1 :] else len(lines)
            out += ["[code]", *lines[i + 1 : end], "[/code]"]
            i = end + 1
            continue
        item = re.match(r"^( *)- (.*)$", line)
        if item:
            level = len(item.group(1)) // 2 + 1
            if level > depth:
                out += ["[list]"] * (level - depth)
                depth = level
            close_lists(level)
            out.append(f"[*]{_inline(item.group(2))}")
        elif line.startswith("#"):
            close_lists()
            out.append(f"[b]{_inline(line.lstrip('#').strip())}[/b]")
        elif _IMAGE.match(line) or line in ("<details>", "</details>"):
            close_lists()
        elif summary := _SUMMARY.match(line):
            close_lists()
            out.append(f"[b]{_inline(summary.group(1))}[/b]")
        else:
            close_lists()
            out.append(_inline(line))
        i += 1
    close_lists()
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def render(view: RunView, width: int = forum.WIDTH) -> str:
    """The post in BBCode; ``width``: the widest line of its results table."""
    return convert(forum.document(view, None, width))
