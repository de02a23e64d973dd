"""Ctrl-C and SIGTERM as a request that the code answers at safe points.

A signal handler that raises (Python's own for SIGINT, and tunnelbench's for SIGTERM
until this module) raises wherever the main thread happens to be. Inside a finalizer
that the garbage collector runs, the exception is printed as "Exception ignored in ..."
and dropped: the signal is lost, and a ``--resume`` that was told to stop went on and
exited 0 (1 of 11 signals that hit a live run). So the handlers here only note the
signal; :func:`check` raises :class:`KeyboardInterrupt` from ordinary code: the waits
of the run (:func:`sleep`, and :func:`tunnelbench.system.command.run` once its command
has ended), between trials, and before a run is marked complete. Each signal is raised
once: a second Ctrl-C raises again at the next check, as it always did.

A wait must end when a signal comes, not when its timeout does: the handler's C half
writes to a wakeup descriptor (:func:`signal.set_wakeup_fd`) that :func:`sleep`
selects on, so a sleeping loop checks at once.
"""

import os
import select
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: The signals turned into a request: the terminal's Ctrl-C and a polite kill.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_pending: list[int] = []  # received and not yet raised by check()
_received: list[int] = []  # every one received within installed()
_wakeup: tuple[int, int] | None = None


class Interrupted(KeyboardInterrupt):
    """An interrupt with what it left behind said (the command line prints its text in
    place of the generic "interrupted")."""


#: Seconds a signal may stay unanswered before another one ends the process at once
#: (the system's own action): a process stuck where nothing checks (a write to a pipe
#: nobody reads) can still be stopped, and a quick second Ctrl-C still tears down.
FORCE_AFTER_S = 5.0
_since: list[float] = []  # when the oldest unanswered signal came


def _note(signum: int, frame: FrameType | None) -> None:
    # Only notes: nothing here can fail or be lost where the main thread was.
    now = time.monotonic()
    if _pending and _since and now - _since[0] > FORCE_AFTER_S:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if not _pending:
        _since[:] = [now]
    _pending.append(signum)
    _received.append(signum)


@contextmanager
def installed() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM are noted, not raised (main thread only);
    the handlers and wakeup descriptor before it are put back after it."""
    global _wakeup
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in SIGNALS}
    read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _wakeup = (read, write)
    _pending.clear()
    _received.clear()
    try:
        for number in SIGNALS:
            signal.signal(number, _note)
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        signal.set_wakeup_fd(old_fd)
        _wakeup = None
        os.close(read)
        os.close(write)


def requested() -> bool:
    """Whether a signal came that :func:`check` has not raised yet."""
    return bool(_pending)


def received() -> bool:
    """Whether any signal came within :func:`installed` (raised or not)."""
    return bool(_received)


def check() -> None:
    """Raise :class:`KeyboardInterrupt` if a signal came since the last check (in the
    main thread; other threads never raise it, as before)."""
    if _pending and threading.current_thread() is threading.main_thread():
        _pending.clear()
        raise KeyboardInterrupt


def sleep(seconds: float) -> None:
    """Wait ``seconds``, or less when a signal comes; then :func:`check`. In another
    thread than the main one: a plain sleep."""
    if threading.current_thread() is not threading.main_thread() or _wakeup is None:
        time.sleep(max(0.0, seconds))
        return
    check()
    deadline = time.monotonic() + max(0.0, seconds)
    while not _pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([_wakeup[0]], [], [], left)
        if ready:
            _drain()
    check()


def _drain() -> None:
    assert _wakeup is not None
    try:
        while os.read(_wakeup[0], 512):
            pass
    except BlockingIOError:
        pass
