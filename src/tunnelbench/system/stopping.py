"""Stopping an iperf3 client where its own signal handler cannot break it.

iperf3 (3.12, and every release since: ``src/main.c``) ends on SIGINT by jumping out of
its signal handler (``longjmp``) into the code that builds and prints its JSON. A signal
that lands while the client is inside ``malloc`` (building its 0.1 s interval records)
leaves the heap half-updated, and building the JSON then kills the client: glibc aborts
("malloc assertion failure in sysmalloc"), exit -6, no output. Seen in the kernel suite's
guest (1 of 4 clients in about 1 trial in 30), and here on loopback in 1 of 1,400 clients
with 32 streams each, stopped at random moments.

So a client is first frozen (SIGSTOP) and looked at (``/proc/PID/syscall``). Frozen in a
system call that the send and receive loop makes (a write to its sockets, a select or a
sleep), it is outside any allocation, and its handler will run on the way back from that
call: it gets SIGINT and is let go (SIGCONT). Frozen anywhere else (in user space, or in
one of malloc's own calls such as brk or mmap), it is let go and looked at again a moment
later. A sender spends nearly all its time in such calls, so the first look almost always
finds one.
"""

import contextlib
import logging
import os
import platform
import signal
import time
from pathlib import Path

from tunnelbench.errors import LabError

log = logging.getLogger("tunnelbench.system.stopping")

#: The system calls an iperf3 client blocks in while it sends and receives, by machine
#: (the kernel's numbers differ between architectures; aarch64 has no select or poll).
SAFE_CALLS = {
    "x86_64": {
        0: "read",
        1: "write",
        7: "poll",
        20: "writev",
        23: "select",
        35: "nanosleep",
        44: "sendto",
        45: "recvfrom",
        46: "sendmsg",
        47: "recvmsg",
        230: "clock_nanosleep",
        270: "pselect6",
        271: "ppoll",
    },
    "aarch64": {
        63: "read",
        64: "write",
        66: "writev",
        72: "pselect6",
        73: "ppoll",
        101: "nanosleep",
        115: "clock_nanosleep",
        206: "sendto",
        207: "recvfrom",
        211: "sendmsg",
        212: "recvmsg",
    },
}
#: How long to look for a safe point before the signal is sent wherever the client is
#: (well within the room a client has past the window, ``iperf3.STOP_ROOM_S``).
LOOK_FOR_S = 0.5
#: How long a frozen client may take to reach the stopped state (an emulated guest's
#: busy cores are slow to schedule it).
FREEZE_LIMIT_S = 1.0


def safe_call(text: str, machine: str | None = None) -> str | None:
    """The name of the system call a frozen process is blocked in, from the text of its
    ``/proc/PID/syscall``, when it is one of :data:`SAFE_CALLS`; else None ("running",
    ``-1 sp pc`` for user space, or any other call)."""
    calls = SAFE_CALLS.get(machine or platform.machine(), {})
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    if not first.lstrip("-").isdigit():
        return None
    return calls.get(int(first))


def interrupt(pid: int) -> bool:
    """Send SIGINT to ``pid`` (a process we started) at a point where its handler is
    safe to run; True when one was found, False when the signal went wherever the
    process was after :data:`LOOK_FOR_S` (logged). A process that has ended is left."""
    if platform.machine() not in SAFE_CALLS:
        # No list of safe calls for this machine: the signal goes as it always did.
        _signal(pid, signal.SIGINT)
        return False
    deadline = time.monotonic() + LOOK_FOR_S
    while True:
        if not _signal(pid, signal.SIGSTOP):
            return True
        try:
            if not _wait_frozen(pid):
                return True  # it ended meanwhile
            call = safe_call(_read(f"/proc/{pid}/syscall"))
            if call is not None or time.monotonic() > deadline:
                _signal(pid, signal.SIGINT)
                if call is None:
                    log.warning(
                        "process %d had no safe point for SIGINT in %.1f s", pid, LOOK_FOR_S
                    )
                return call is not None
        finally:
            _signal(pid, signal.SIGCONT)
        time.sleep(0.002)


def _wait_frozen(pid: int) -> bool:
    """Wait until ``pid`` is stopped; False when it ended first."""
    deadline = time.monotonic() + FREEZE_LIMIT_S
    while True:
        stat = _read(f"/proc/{pid}/stat")
        # The state follows the command's closing parenthesis (a command may hold any).
        state = stat.rpartition(")")[2].split()[:1]
        if not state or state[0] in ("Z", "X"):
            return False
        if state[0] in ("T", "t"):
            return True
        if time.monotonic() > deadline:
            raise LabError(f"process {pid} did not stop within {FREEZE_LIMIT_S:g} s of SIGSTOP")
        time.sleep(0.0005)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _signal(pid: int, signum: int) -> bool:
    """Signal ``pid``; False when it no longer exists."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
        return True
    return False
