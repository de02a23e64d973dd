"""Report formats: one interface (:class:`ReportFormat`), one registry (:data:`REGISTRY`),
every format registered here. ``report``, ``report --compare`` and ``compare`` find the
format they write in the registry, and the choices, help and shell completion of their
``--format`` and ``-o`` come from it, so a format is one entry here and nothing else in
``cli/``.

A format says what it renders for a run (a tuning session is a run: its path is in the
run's report, :mod:`.tune`) and, if it can, for a comparison; for each, whether ``-o``
writes files beside the report (an image, a directory of charts) and where; its file
suffix; whether its tables fit ``--width``; and whether it can go to standard output.

Adding a format (step by step: ``docs/report-formats.md``): a module in ``report/``
rendering a :class:`~.view.RunView` (and, if it compares, a :class:`~.compare.Comparison`)
to text, a member of :class:`FormatName`, and one :class:`ReportFormat` registered at the
end of this module. A test may register a format of its own under a name from its own
``StrEnum``.
"""

import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Generic, TypeVar

from tunnelbench.echo import did_you_mean, shown, unknown_value
from tunnelbench.errors import UserError
from tunnelbench.registry import Registry
from tunnelbench.report import (
    bbcode,
    compare,
    compare_markdown,
    compare_page,
    csv_report,
    fit,
    forum,
    html,
    json_report,
    markdown,
    terminal,
)
from tunnelbench.report.compare import Comparison
from tunnelbench.report.view import RunView

T = TypeVar("T")


class FormatName(StrEnum):
    """The formats tunnelbench ships, by the name ``--format`` takes."""

    TABLE = "table"
    MD = "md"
    BBCODE = "bbcode"
    MD_FULL = "md-full"
    HTML = "html"
    JSON = "json"
    CSV = "csv"


@dataclass(frozen=True)
class Where:
    """Where a report goes and the shape asked of it."""

    #: Standard output (a terminal or a pipe), not the file ``-o`` names: the terminal
    #: table fits the terminal's width and colours where wanted; a file has every column.
    stdout: bool
    #: ``--width``: the widest line of a forum post's tables (:data:`forum.WIDTHS`).
    width: int = forum.WIDTH
    #: The results database as the user named it, for the commands a report quotes.
    db: str | None = None


@dataclass(frozen=True)
class SideFiles(Generic[T]):
    """Files a report written with ``-o`` puts beside its own."""

    #: Where, from the ``-o`` path: one file (an image) or a directory (of charts).
    path: Callable[[Path], Path]
    directory: bool
    #: Write the report at the path and its files beside it, each whole; the paths
    #: written, the report first (a report with nothing to draw writes only itself).
    write: Callable[[T, Path, Where], list[Path]]
    #: What ``-o``'s help says they are.
    help: str


@dataclass(frozen=True)
class Rendering(Generic[T]):
    """What a format makes of one subject (a run, a comparison)."""

    text: Callable[[T, Where], str]
    #: None: with ``-o``, ``text`` is the file's whole content.
    side_files: SideFiles[T] | None = None


@dataclass(frozen=True)
class ReportFormat:
    """One ``--format``."""

    name: StrEnum
    #: How an error names a report of this format ("a Markdown report ...").
    title: str
    #: What ``--format``'s help says of it.
    help: str
    #: The file name's suffix a report of this format takes (``run`` writes its own).
    suffix: str
    run: Rendering[RunView]
    #: None: the format has no comparison (``compare`` refuses it by name).
    comparison: Rendering[Comparison] | None = None
    #: Its tables are fitted to ``--width`` (a forum post's).
    fits_width: bool = False
    #: False for a format that only a file can hold (an image): it needs ``-o``.
    stdout: bool = True


REGISTRY: Registry[StrEnum, ReportFormat] = Registry("report format")


def all_formats() -> list[ReportFormat]:
    """Every registered format, in the order registered (the order help lists them)."""
    return [REGISTRY.get(name) for name in REGISTRY.kinds()]


def names(formats: list[ReportFormat] | None = None) -> list[str]:
    """The ``--format`` names of ``formats`` (default: every registered one)."""
    return [f.name.value for f in (all_formats() if formats is None else formats)]


def comparing() -> list[ReportFormat]:
    """The formats a comparison can be written in."""
    return [f for f in all_formats() if f.comparison is not None]


def named(text: str) -> ReportFormat:
    """The format ``--format`` names; an unknown name is bad input."""
    for fmt in all_formats():
        if fmt.name.value == text:
            return fmt
    raise UserError(f"--format: {unknown_value(text, names())}")


def for_comparison(text: str) -> tuple[ReportFormat, Rendering[Comparison]]:
    """The format ``--format`` names for a comparison, and how it renders one; a format
    without a comparison (or none at all) is bad input."""
    for fmt in comparing():
        if fmt.name.value == text and fmt.comparison is not None:
            return fmt, fmt.comparison
    allowed = names(comparing())
    raise UserError(
        f"--format: {shown(text)} is not available for a comparison;"
        f" allowed: {', '.join(allowed)}{did_you_mean(text, allowed)}"
    )


def either(words: list[str]) -> str:
    """``md or bbcode``; ``a, b or c``."""
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


# --- the formats tunnelbench ships ---


def _table(view: RunView, where: Where) -> str:
    # On the terminal: its width and (where wanted) colour; into a file: every column.
    return terminal.render(
        view,
        after_run=False,
        width=fit.width() if where.stdout else None,
        colour=where.stdout and fit.colour_wanted(sys.stdout),
        db=where.db,
    )


def _comparison_table(comparison: Comparison, where: Where) -> str:
    return compare.render_table(comparison, fit.width() if where.stdout else None)


_MD_CHARTS = "its charts as PNG files into PATH's name without its suffix + '-charts/'"

for _format in (
    ReportFormat(
        FormatName.TABLE,
        title="table",
        help="the terminal's table, fitted to its width",
        suffix=".txt",
        run=Rendering(_table),
        comparison=Rendering(_comparison_table),
    ),
    ReportFormat(
        FormatName.MD,
        title="Markdown",
        help="the results to paste into a forum post, a short table and one image",
        suffix=".md",
        run=Rendering(
            lambda view, where: forum.render(view, where.width),
            SideFiles(
                forum.summary_path,
                directory=False,
                write=lambda view, path, where: forum.write(view, path, where.width),
                help="its image as PATH's name without its suffix + '-summary.png'",
            ),
        ),
        comparison=Rendering(
            lambda comparison, where: compare_markdown.render(comparison),
            SideFiles(
                markdown.charts_dir,
                directory=True,
                write=lambda comparison, path, where: compare_page.write_markdown(comparison, path),
                help=_MD_CHARTS,
            ),
        ),
        fits_width=True,
    ),
    ReportFormat(
        FormatName.BBCODE,
        title="BBCode",
        help="the same post for phpBB forums (MikroTik's), its table in [code]",
        suffix=".txt",
        run=Rendering(lambda view, where: bbcode.render(view, where.width)),
        fits_width=True,
    ),
    ReportFormat(
        FormatName.MD_FULL,
        title="Markdown",
        help="every column, finding and chart",
        suffix=".md",
        run=Rendering(
            lambda view, where: markdown.render(view),
            SideFiles(
                markdown.charts_dir,
                directory=True,
                write=lambda view, path, where: markdown.write(view, path),
                help=_MD_CHARTS,
            ),
        ),
    ),
    ReportFormat(
        FormatName.HTML,
        title="HTML",
        help="one self-contained page with its charts",
        suffix=".html",
        run=Rendering(lambda view, where: html.render(view)),
        comparison=Rendering(lambda comparison, where: compare_page.page(comparison)),
    ),
    ReportFormat(
        FormatName.JSON,
        title="JSON",
        help="follows docs/report-schema.json (a comparison: docs/compare-schema.json)",
        suffix=".json",
        run=Rendering(lambda view, where: json_report.render(view)),
        comparison=Rendering(lambda comparison, where: compare.render_json(comparison)),
    ),
    ReportFormat(
        FormatName.CSV,
        title="CSV",
        help="one row per trial",
        suffix=".csv",
        run=Rendering(lambda view, where: csv_report.render(view)),
    ),
):
    REGISTRY.register(_format.name, _format)
