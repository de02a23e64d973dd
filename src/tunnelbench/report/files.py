"""Writing a report's files: each whole or not at all, never over a results database.

Every report writer (HTML, Markdown and its charts, the forum post and its image, JSON,
CSV, the terminal table into a file) writes through :func:`replace`: the bytes go to a
temporary file in the target's own directory, are flushed to the disk, and are then
renamed over the target. A full disk or an interrupt leaves the old file as it was (a
report written over in place was cut to nothing when the disk filled), and a reader
never sees half a file. A target that is a symbolic link (``/proc/self/fd/N`` too) is
resolved first, so the file it names is the one replaced and checked.

A file that holds an SQLite database, or the journal or write-ahead log of one, is never
replaced, whatever its name: a report path that names a database only once it is open
(``-o /proc/self/fd/3``), or an image named beside a Markdown report, once overwrote
every stored run.
"""

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from tunnelbench.echo import capped
from tunnelbench.errors import UserError

#: The first bytes of an SQLite database, of its write-ahead log (either byte order) and
#: of its rollback journal.
DATABASE_HEADS = (
    b"SQLite format 3\x00",
    b"\x37\x7f\x06\x82",
    b"\x37\x7f\x06\x83",
    b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7",
)


class WouldReplaceDatabase(UserError):
    """A report's file names a results database (or a side file of one)."""


def target(path: Path) -> Path:
    """The file a write to ``path`` lands in: its links resolved."""
    return Path(os.path.realpath(path))


def holds_database(path: Path) -> bool:
    """Whether ``path`` (followed) is a regular file that starts as an SQLite database,
    journal or write-ahead log does."""
    try:
        # Non-blocking: opening a FIFO to read waits for a writer, possibly for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, 16)
    except OSError:
        return False
    finally:
        os.close(fd)
    return any(head.startswith(magic) for magic in DATABASE_HEADS)


def refuse_database(path: Path, what: str = "-o") -> None:
    """Raise :class:`WouldReplaceDatabase` if writing ``path`` would replace a database;
    ``what`` names the option or report in the message."""
    if holds_database(path):
        shown = capped(repr(str(path)), 300)
        real = target(path)
        named = "" if real == path.absolute() else f" ({capped(repr(str(real)), 300)})"
        raise WouldReplaceDatabase(
            f"{what}: {shown}{named} holds an SQLite database; a report there would replace"
            " the runs stored in it: give another file name"
        )


def replace(path: Path, data: str | bytes, what: str = "-o") -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all (see the module's
    docstring). A file replaced keeps its mode and, for root, its owner; a new one gets
    the mode the umask allows. A FIFO or device is written to directly: it has nothing to
    lose and cannot be renamed over (a FIFO that nothing reads is an ``ENXIO`` error
    rather than a wait for ever)."""
    content = data.encode() if isinstance(data, str) else data
    refuse_database(path, what)
    try:
        before: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        before = None
    real = target(path)
    if before is not None and (not stat.S_ISREG(before.st_mode) or not real.exists()):
        # A FIFO, a device, or a file reached only through a descriptor's link
        # (``/proc/self/fd/1`` of a pipe, or of a deleted file): written where it is.
        _write_special(path, content)
        return
    refuse_database(real, what)
    fd, temporary = tempfile.mkstemp(prefix=f".{real.name[:200]}.", suffix=".tmp", dir=real.parent)
    try:
        with open(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
            if before is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(before.st_mode))
                if os.geteuid() == 0:
                    os.fchown(f.fileno(), before.st_uid, before.st_gid)
            else:
                os.fchmod(f.fileno(), 0o666 & ~_umask())
        # Checked again just before the rename: the target may have become a database
        # while this was written.
        refuse_database(real, what)
        os.replace(temporary, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _write_special(path: Path, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_new(paths: list[Path], existed: set[Path]) -> None:
    """Remove each of ``paths`` that did not exist before (``existed``): what a report
    cut short by an interrupt had written."""
    for path in paths:
        if path not in existed:
            with contextlib.suppress(OSError):
                path.unlink()
