"""Finding the external programs tunnelbench drives.

Project-built tools (the pinned wireguard-go and boringtun-cli) live in ``.tools/bin`` of
the checkout, or in ``TUNNELBENCH_TOOLS_DIR`` when that is set, and only there: a program
of the same name on ``PATH`` is another build (Debian's wireguard-go is years older), and
results measured with it must not carry the pinned build's name. Other programs are
looked up in the tools directory, then on ``PATH``. A name with a slash is a path, used
as it is (Debian's wireguard-go is ``/usr/bin/wireguard-go``).
"""

import os
import shutil
import sys
from pathlib import Path

from tunnelbench.errors import UserError

#: Built by ``make setup`` at pinned versions; never taken from ``PATH``.
PROJECT_BUILT = frozenset({"wireguard-go", "boringtun-cli"})


def tools_dirs() -> list[Path]:
    """Where project-built tools are looked for before ``PATH``."""
    if env := os.environ.get("TUNNELBENCH_TOOLS_DIR"):
        return [Path(env)]
    # The virtual environment sits in the checkout, beside .tools.
    return [Path(sys.prefix).parent / ".tools" / "bin"]


def find(name: str) -> str | None:
    """The path of a program, or None."""
    if "/" in name:
        return name if _executable(Path(name)) else None
    for directory in tools_dirs():
        if _executable(candidate := directory / name):
            return str(candidate)
    return None if name in PROJECT_BUILT else shutil.which(name)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def require(name: str, purpose: str) -> str:
    """The path of a program, or a :class:`UserError` saying what needs it."""
    path = find(name)
    if path is None:
        where = f" in {tools_dirs()[0]}" if name in PROJECT_BUILT else ""
        raise UserError(
            f"required program {name!r} ({purpose}) was not found{where}; run `make run`"
        )
    return path


def apt_install(package: str) -> str:
    """The command that installs a Debian package the way ``make setup`` does."""
    return f"apt-get install --no-install-recommends {package}"
