"""The ``report`` verb, and the reports ``run`` writes when it ends."""

import argparse
import errno
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from tunnelbench.bench.store import RESERVE_SUFFIX, SIDE_FILES, Store
from tunnelbench.cli.parsing import Verbs, add_db_argument
from tunnelbench.echo import capped, shown
from tunnelbench.errors import SystemFault, UserError
from tunnelbench.report import compare, files, formats, forum, html, view
from tunnelbench.report.formats import FormatName, Rendering, ReportFormat, SideFiles, Where
from tunnelbench.report.markdown import plural
from tunnelbench.report.view import RunView
from tunnelbench.system import interrupts, ownership

T = TypeVar("T")

#: What the user can fix by naming another output path (exit 2); any other error while
#: writing (a full disk, an I/O error) is a fault of the machine (exit 1).
_PATH_ERRNOS = {
    errno.EACCES,
    errno.EPERM,
    errno.ENOENT,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ENAMETOOLONG,
    errno.ELOOP,
    errno.EROFS,
}


def _quoted(path: Path | str) -> str:
    return capped(repr(str(path)), 300)


def output_path(
    text: str | None,
    databases: Sequence[Path] = (),
    fmt: ReportFormat | None = None,
    side: SideFiles[Any] | None = None,
) -> Path | None:
    """The ``-o`` path, checked before anything is read or written. A report that
    writes files beside it (``side``: a Markdown report's charts) needs a file's name,
    not a device's (``-o /dev/null`` would create ``/dev/null-charts/``). It must not be
    one of the results ``databases`` the verb reads, nor one of their side files, nor
    may the image ``side`` writes beside it be."""
    if text is None:
        return None
    if not text.strip():
        raise UserError("-o: empty path; give a file name")
    if "\0" in text:
        raise UserError(f"-o: {_quoted(text)} holds a NUL character")
    path = Path(text)
    try:
        if path.is_dir():
            raise UserError(f"-o: {_quoted(text)} is a directory; give a file name")
        if not path.parent.is_dir():
            if path.parent.exists():
                raise UserError(f"-o: {_quoted(path.parent)} is not a directory")
            raise UserError(f"-o: directory {_quoted(path.parent)} does not exist")
        if side is not None and path.exists() and not path.is_file():
            title = "" if fmt is None else f" {fmt.title}"
            raise UserError(
                f"-o: {_quoted(text)} is not a regular file; a{title} report writes its"
                " charts beside it: give a file name, or leave out -o for standard output"
            )
    except OSError as exc:  # e.g. a name too long to look up
        raise UserError(f"-o: {_quoted(text)}: {exc.strerror}") from None
    _refuse_database(path, text, databases)
    if side is not None and not side.directory:
        # The image written beside the post is a file of the report as much as -o is.
        image = side.path(path)
        _refuse_database(image, str(image), databases, beside=text)
    return path


def databases_read(db: Path, sides: Sequence[str], where: Sequence[str]) -> list[Path]:
    """The results databases a verb reads: ``--db``, and those the sides of a comparison
    name (``DATABASE``, ``DATABASE:RUN``); ``where`` names each side in an error."""
    named = zip(sides, where, strict=True)
    return [db, *(compare.SideRef.parse(text, db, name).run.db for text, name in named)]


def _refuse_database(
    path: Path, text: str, databases: Sequence[Path], *, beside: str | None = None
) -> None:
    """A report written over a results database, or over its ``-wal``, ``-shm`` or
    ``-journal``, would replace every run stored there (it once did): refused, whatever
    the spelling (a symbolic link, ``..``, a hard link). ``beside``: the ``-o`` path
    when ``path`` is a file the report writes next to it (the forum post's image).
    (A path that names a database only once one is open, ``/proc/self/fd/N``, is
    refused when it is written: :func:`tunnelbench.report.files.replace`.)"""
    for db in databases:
        for suffix in ("", *SIDE_FILES, RESERVE_SUFFIX):
            named = [Path(f"{db}{suffix}"), Path(f"{os.path.realpath(db)}{suffix}")]
            if any(_same_file(path, other) for other in named):
                what = "the results database" if not suffix else f"the {suffix} file of"
                which = (
                    f"{_quoted(text)} is"
                    if beside is None
                    else (f"{_quoted(beside)} writes its image as {_quoted(text)}, which is")
                )
                raise UserError(
                    f"-o: {which} {what} {_quoted(db)}; a report there would"
                    " replace the runs stored in it: give another file name"
                )


def _same_file(a: Path, b: Path) -> bool:
    """One file by its real path, or by its inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        first, second = a.stat(), b.stat()
    except (OSError, ValueError):
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (:func:`files.replace`). A FIFO is
    written only if a reader waits on it (opening it would otherwise block until one
    comes, possibly for ever)."""
    try:
        files.replace(path, text)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UserError(f"-o: {_quoted(path)} is a FIFO that nothing reads") from None
        raise


@contextmanager
def _writing(output: Path, charts: Path | None = None) -> Iterator[None]:
    """Turn an error while writing ``output`` (and ``charts``, the charts directory or
    the image of a Markdown report) into one line naming it; what this write created is
    removed rather than left cut short (a full disk)."""
    existed = output.exists()
    charts_existed = charts is None or charts.exists()
    try:
        yield
    except OSError as exc:
        if not existed and output.is_file():
            output.unlink(missing_ok=True)
        if charts is not None and not charts_existed:
            if charts.is_dir():
                shutil.rmtree(charts, ignore_errors=True)
            else:
                charts.unlink(missing_ok=True)
        where = _quoted(exc.filename if exc.filename else output)
        message = f"-o: cannot write {where}: {exc.strerror or exc}"
        if exc.errno in _PATH_ERRNOS:
            raise UserError(message) from None
        raise SystemFault(message) from None


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output, ending with a newline."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def emit(text: str, output: Path | None) -> None:
    text = text if text.endswith("\n") else text + "\n"
    if output is None:
        write_stdout(text)
    else:
        with _writing(output), ownership.created(output):
            _write_file(output, text)
        print(f"wrote {output}")


def emit_beside(
    output: Path, side: Path, directory: bool, write: Callable[[Path], list[Path]]
) -> None:
    """A report at ``output`` with files beside it at ``side``: a directory of charts, or
    one image (``write`` returns the paths it wrote, the report first), with the same
    care as :func:`emit`; says what it wrote."""
    with _writing(output, charts=side), ownership.created(output, side):
        written = write(output)
    if len(written) == 1:
        print(f"wrote {output}")
    elif directory:
        print(f"wrote {output} and {plural(len(written) - 1, 'chart')} in {side}/")
    else:
        print(f"wrote {output} and {side}")


def write_report(subject: T, rendering: Rendering[T], where: Where, output: Path | None) -> None:
    """``subject`` (a run, a comparison) as ``rendering`` makes it, to ``output`` (None:
    standard output), with the files it writes beside it."""
    side = rendering.side_files
    if output is not None and side is not None:
        emit_beside(
            output, side.path(output), side.directory, lambda path: side.write(subject, path, where)
        )
    else:
        emit(rendering.text(subject, where), output)


def register(verbs: Verbs) -> None:
    report = verbs.add_parser(
        "report", help="a stored run as a table, Markdown, HTML, JSON or CSV; or two compared"
    )
    report.add_argument("run", nargs="?", help="run id or 'latest' (default latest)")
    known = formats.all_formats()
    report.add_argument(
        "--format",
        default=FormatName.TABLE.value,
        choices=formats.names(known),
        help=f"(default {FormatName.TABLE}); "
        + "; ".join(f"{fmt.name}: {fmt.help}" for fmt in known),
    )
    fitted = formats.names([fmt for fmt in known if fmt.fits_width])
    report.add_argument(
        "--width",
        metavar="COLUMNS",
        help=f"{', '.join(fitted)}: the widest table line (default {forum.WIDTH};"
        f" {forum.WIDTHS.start}-{forum.WIDTHS.stop - 1}); tables split by setting and"
        " shorten their cells to fit it; prose is one line a paragraph",
    )
    report.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="write to PATH instead of standard output" + side_files_help(known, "run"),
    )
    report.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="the same as `tunnelbench compare A B`"
        f" (format {formats.either(formats.names(formats.comparing()))})",
    )
    add_db_argument(report)
    report.set_defaults(func=handle)


def side_files_help(known: Sequence[ReportFormat], subject: Literal["run", "comparison"]) -> str:
    """``; md also writes its image as ...``: what ``-o`` writes beside the report, by
    format, for a run or a comparison."""
    phrases = []
    for fmt in known:
        rendering = fmt.run if subject == "run" else fmt.comparison
        if rendering is not None and rendering.side_files is not None:
            phrases.append(f"{fmt.name} also writes {rendering.side_files.help}")
    return "".join(f"; {phrase}" for phrase in phrases)


def handle(args: argparse.Namespace) -> int:
    fmt = formats.named(args.format)
    width = _width(args.width, fmt)
    sides = args.compare or ()
    read = databases_read(Path(args.db), sides, ("--compare",) * len(sides))
    if args.compare is not None:
        return _compare(args, read)
    output = output_path(args.output, read, fmt, fmt.run.side_files)
    check_stdout(fmt, output)
    ref = args.run or "latest"
    if not (ref == "latest" or (ref.isascii() and ref.isdigit())):  # before opening the store
        raise UserError(f"run: {shown(ref)} is not a run id or 'latest'")
    store = Store.read(Path(args.db))
    try:
        # An unknown run is an error before any output.
        loaded = view.load(store, ref)
        where = Where(stdout=output is None, width=width, db=args.db)
        write_report(loaded, fmt.run, where, output)
    finally:
        store.close()
    return 0


def check_stdout(fmt: ReportFormat, output: Path | None) -> None:
    """A format only a file can hold (an image) needs ``-o``."""
    if output is None and not fmt.stdout:
        raise UserError(
            f"--format: a {fmt.title} report ({fmt.name}) cannot go to standard output;"
            " give -o PATH"
        )


def _width(text: str | None, fmt: ReportFormat) -> int:
    """``--width``, checked before anything is read: only the forum post has tables to
    fit."""
    if text is None:
        return forum.WIDTH
    if not fmt.fits_width:
        fitted = formats.names([f for f in formats.all_formats() if f.fits_width])
        raise UserError(
            f"--width: only --format {formats.either(fitted)} has a line width, not {fmt.name}"
        )
    if not (text.isascii() and text.isdigit()) or int(text) not in forum.WIDTHS:
        raise UserError(
            f"--width: {shown(text)} is not a whole number of columns from"
            f" {forum.WIDTHS.start} to {forum.WIDTHS.stop - 1}"
        )
    return int(text)


def _compare(args: argparse.Namespace, read: Sequence[Path]) -> int:
    """``report --compare A B``: an alias of ``tunnelbench compare A B``, same output."""
    fmt, rendering = formats.for_comparison(args.format)
    output = output_path(args.output, read, fmt, rendering.side_files)
    check_stdout(fmt, output)
    if args.run is not None:
        raise UserError(
            f"--compare: name both runs after --compare, not {shown(args.run)} before it"
        )
    a, b = args.compare
    comparison = compare.build(a, b, Path(args.db), where=("--compare",) * 2)
    write_report(comparison, rendering, Where(stdout=output is None), output)
    return 0


def write_reports(loaded: RunView, *, as_json: bool) -> bool:
    """Write the HTML and Markdown reports of a finished run next to its database and
    print their paths (except in JSON mode). A report that cannot be written leaves the
    stored results intact: say so and how to write it later, and return False.

    Each file is written whole (:mod:`tunnelbench.report.files`), the Markdown after its
    image; an interrupt between them removes what this call wrote, so that no report is
    left that links an image never written, and says so."""
    run_id, database = loaded.run.id, loaded.database
    stem = f"{database.stem}-run{run_id}"
    page_format, text_format = (formats.REGISTRY.get(n) for n in (FormatName.HTML, FormatName.MD))
    page = database.with_name(f"{stem}{page_format.suffix}")
    text = database.with_name(f"{stem}{text_format.suffix}")
    image = forum.summary_path(text)
    planned = [page, image, text]
    existed = {path for path in planned if os.path.lexists(path)}
    later = f"`tunnelbench report {run_id} --db {database} --format {page_format.name} -o PATH`"
    try:
        with ownership.created(page, text, image):  # theirs under sudo
            interrupts.check()
            html.write(loaded, page)
            interrupts.check()
            written = forum.write(loaded, text)
    except KeyboardInterrupt:
        files.remove_new(planned, existed)
        raise interrupts.Interrupted(
            f"interrupted while the reports were written: run {run_id} is stored"
            f" ({loaded.run.status}) and no report of it was written; {later} writes one"
        ) from None
    except (OSError, files.WouldReplaceDatabase) as exc:
        print(
            f"tunnelbench: could not write the reports ({exc}); the results are stored: {later}",
            file=sys.stderr,
        )
        return False
    if as_json:
        # The JSON event stream ends with run_finished (programs rely on it); the paths
        # follow from the database's: <db stem>-run<N>.html / .md / -summary.png.
        return True
    # Not wrapped, as the line before it: the paths are there to be copied.
    if len(written) > 1:
        print(f"reports: {page}, {text} (its image: {image})")
    else:
        print(f"reports: {page}, {text}")
    return True
