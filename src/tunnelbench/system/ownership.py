"""Files tunnelbench creates under ``sudo`` belong to the user who ran ``sudo``.

A results database, its SQLite side files and the reports written as root would
otherwise be root's, and the user could not open them again without root (``sqlite``
must create its ``-shm`` file beside a database it reads). The one rule, applied where
files are created (the store and the report writers): a file tunnelbench *created*
while running as root under ``sudo`` is handed to ``SUDO_UID``/``SUDO_GID``; a file that
existed before keeps its owner. The lab's own state (under ``/run``) stays root's.
"""

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("tunnelbench.system.ownership")


def invoking_user() -> tuple[int, int] | None:
    """(uid, gid) of the user behind ``sudo``; None when not root or not under sudo."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None
    return None if uid == 0 else (uid, gid)


def hand_over(*paths: Path) -> None:
    """Give each path (a directory with what it holds) to the invoking user, if any.

    Call it only for paths this process created. A failure (a filesystem without
    owners, say) is logged: the file is still written, only its owner is root.
    """
    user = invoking_user()
    if user is None:
        return
    for path in paths:
        for item in [path, *(path.rglob("*") if path.is_dir() else [])]:
            try:
                os.chown(item, *user, follow_symlinks=False)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not hand %s to uid %d: %s", item, user[0], exc.strerror)


def match_owner(path: Path, like: Path) -> None:
    """Give ``path`` the owner of ``like`` when running as root (a database's side
    files must be openable by whoever owns the database)."""
    if os.geteuid() != 0:
        return
    with contextlib.suppress(OSError):
        want = like.stat()
        have = path.stat()
        if (have.st_uid, have.st_gid) != (want.st_uid, want.st_gid):
            os.chown(path, want.st_uid, want.st_gid)


@contextlib.contextmanager
def created(*paths: Path) -> Iterator[None]:
    """Hand each of ``paths`` that does not exist yet to the invoking user once the
    block has written it (see :func:`hand_over`); existing files keep their owner."""
    new = [path for path in paths if not os.path.lexists(path)]
    try:
        yield
    finally:
        hand_over(*new)
