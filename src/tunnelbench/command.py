"""The one wrapper through which tunnelbench runs external programs.

Commands are argument lists (never a shell string), every exit code is checked, stderr is
kept in the error, and each command is logged at debug level (``-v``).
"""

import logging
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from tunnelbench.errors import LabError, UserError

log = logging.getLogger("tunnelbench.command")


@dataclass
class CommandError(LabError):
    """A command exited non-zero; ``str()`` names the command and its stderr."""

    argv: list[str]
    returncode: int
    stderr: str

    def __str__(self) -> str:
        detail = self.stderr.strip().splitlines()
        tail = detail[-1] if detail else "no error output"
        return f"`{shlex.join(self.argv)}` failed (exit {self.returncode}): {tail}"


def in_netns(namespace: str, argv: Sequence[str]) -> list[str]:
    """Prefix a command so it runs inside a network namespace."""
    return ["ip", "netns", "exec", namespace, *argv]


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float = 30.0,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion and return it; raise :class:`CommandError` on failure."""
    args = list(argv)
    log.debug("run: %s", shlex.join(args))
    try:
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            check=False,
        )
    except FileNotFoundError:
        raise UserError(f"required program {args[0]!r} was not found; run `make run`") from None
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"`{shlex.join(args)}` did not finish within {timeout:g} s") from exc
    if check and done.returncode != 0:
        raise CommandError(args, done.returncode, done.stderr)
    return done


def spawn(
    argv: Sequence[str],
    *,
    stdout: int | IO[bytes] | None = subprocess.DEVNULL,
    stderr: int | IO[bytes] | None = subprocess.PIPE,
) -> "subprocess.Popen[bytes]":
    """Start a long-running command; the caller records and ends it by its PID."""
    args = list(argv)
    log.debug("spawn: %s", shlex.join(args))
    try:
        # A new session keeps Ctrl-C in the terminal from reaching lab processes directly:
        # tunnelbench ends them itself, in order, during teardown.
        return subprocess.Popen(args, stdout=stdout, stderr=stderr, start_new_session=True)
    except FileNotFoundError:
        raise UserError(f"required program {args[0]!r} was not found; run `make run`") from None
