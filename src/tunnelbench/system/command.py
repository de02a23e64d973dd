"""The one wrapper through which tunnelbench runs external programs.

Commands are argument lists (never a shell string), every exit code is checked, stderr is
kept in the error, and each command is logged at debug level (``-v``).
"""

import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from tunnelbench.errors import LabError, UserError
from tunnelbench.system import interrupts

log = logging.getLogger("tunnelbench.system.command")

T = TypeVar("T")


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


class HeldSignals:
    """``with HeldSignals() as held``: Ctrl-C (and a SIGTERM that tunnelbench turns into
    one) held back while a child is started; :meth:`deliver` raises it afterwards.

    Raised inside :class:`subprocess.Popen`, after the fork but before it returns, the
    interrupt loses the child: it runs on unrecorded and unwaited. In CI an ``ip netns
    add`` finished that way after the lab's teardown had listed the namespaces, and its
    namespace outlived the lab. Only signals with a Python handler are held (those are
    the ones that raise), and only in the main thread (the only one they reach)."""

    def __init__(self) -> None:
        self.caught: list[int] = []
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "HeldSignals":
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                if callable(handler := signal.getsignal(number)):
                    self._previous[number] = handler
                    signal.signal(number, lambda got, _frame: self.caught.append(got))
        return self

    def __exit__(self, *_: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def deliver(self) -> None:
        """Raise what was held (the first signal's own handler), if anything was."""
        for number in self.caught[:1]:
            self._previous[number](number, None)


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float = 30.0,
    input_text: str | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion and return it; raise :class:`CommandError` on failure.
    ``env``: variables set for it, beside this process's own.

    Ctrl-C does not cut a command short: it runs in a session of its own (the terminal's
    SIGINT does not reach it) and is waited for before the interrupt is raised, so what
    it created exists when teardown looks. Killing ``ip netns add`` half-way could
    otherwise leave a namespace that appears after teardown has listed them.
    """
    args = list(argv)
    log.debug("run: %s", shlex.join(args))
    try:
        with HeldSignals() as held:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
                cwd=cwd,
                env={**os.environ, **env} if env is not None else None,
            )
    except FileNotFoundError:
        raise UserError(f"required program {args[0]!r} was not found; run `make run`") from None
    deadline = time.monotonic() + timeout
    interrupted = False
    pending_input = input_text
    while True:
        try:
            stdout, stderr = proc.communicate(
                pending_input, timeout=max(0.0, deadline - time.monotonic())
            )
            break
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.wait()
            raise LabError(f"`{shlex.join(args)}` did not finish within {timeout:g} s") from exc
        except KeyboardInterrupt:
            interrupted = True
            pending_input = None  # already being written; communicate() goes on with it
    held.deliver()  # a Ctrl-C while it started: raised now that it has finished
    if interrupted:
        raise KeyboardInterrupt
    interrupts.check()  # a signal noted while it ran: answered now that it has finished
    done = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
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
        with HeldSignals() as held:
            proc = subprocess.Popen(args, stdout=stdout, stderr=stderr, start_new_session=True)
    except FileNotFoundError:
        raise UserError(f"required program {args[0]!r} was not found; run `make run`") from None
    if held.caught:  # interrupted while it started: it never ran for the caller
        proc.kill()
        proc.wait()
        held.deliver()
        interrupts.check()  # the handler only noted it: raised here, as it was
    return proc


def side_by_side(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Each of ``calls`` in a thread of its own, their results in order; the first
    failure is raised once every call has finished. For short commands, which mostly
    wait for a process to start: an emulated guest takes 0.3-0.5 s for each.

    Ctrl-C is held (:class:`HeldSignals`) until every call has finished, then raised: the
    calls' own threads cannot hold it, and a call still running when it is raised creates
    what the teardown it starts has already looked for (in CI an ``ip netns add`` beside
    it outlived its lab's teardown, and its namespace stayed)."""
    if len(calls) <= 1:
        return [call() for call in calls]
    pool = ThreadPoolExecutor(max_workers=len(calls))
    with HeldSignals() as held:
        futures = [pool.submit(call) for call in calls]
        wait(futures)
    pool.shutdown()
    held.deliver()
    interrupts.check()
    return [future.result() for future in futures]
