"""Finding the external programs tunnelbench drives.

Project-built tools (the pinned wireguard-go) live in ``.tools/bin`` of the checkout, or
in ``TUNNELBENCH_TOOLS_DIR`` when that is set. Then ``PATH``.
"""

import os
import shutil
import sys
from pathlib import Path

from tunnelbench.errors import UserError


def tools_dirs() -> list[Path]:
    """Where project-built tools are looked for before ``PATH``."""
    if env := os.environ.get("TUNNELBENCH_TOOLS_DIR"):
        return [Path(env)]
    # The virtual environment sits in the checkout, beside .tools.
    return [Path(sys.prefix).parent / ".tools" / "bin"]


def find(name: str) -> str | None:
    """The path of a program, or None."""
    for directory in tools_dirs():
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def require(name: str, purpose: str) -> str:
    """The path of a program, or a :class:`UserError` saying what needs it."""
    path = find(name)
    if path is None:
        raise UserError(f"required program {name!r} ({purpose}) was not found; run `make run`")
    return path
