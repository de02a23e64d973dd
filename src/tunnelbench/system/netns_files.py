"""A network namespace's own files and devices, reached by this process.

A thread joins the namespace (``setns``) and reads ``/proc/thread-self/net/...``, writes
``/proc/sys/net/...`` or asks a device (``ioctl`` on a socket it opens there), all of
which are the joining thread's namespace's; the thread ends with the work, so no other
code ever runs in the namespace. No process is started: ``ip netns exec NS cat`` costs
two, and an emulated guest takes 0.2-0.5 s to start each, several times per trial per
role.
"""

import ctypes
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

CLONE_NEWNET = 0x40000000  # linux/sched.h
#: Where ``ip netns`` keeps a named namespace.
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(None, use_errno=True)

T = TypeVar("T")


def read(namespace: str, names: Sequence[str]) -> str:
    """The files ``/proc/net/<name>`` of the namespace ``ip netns`` calls ``namespace``,
    concatenated; :class:`OSError` when it cannot be joined or a file read."""
    return inside(
        namespace,
        lambda: "".join(Path(f"/proc/thread-self/net/{name}").read_text() for name in names),
    )


def inside(namespace: str, work: Callable[[], T]) -> T:
    """``work()``'s result, run by a thread that joined the namespace ``ip netns`` calls
    ``namespace`` (and ends with it); what it raises is raised here. Files under
    ``/proc/sys/net`` and sockets opened by ``work`` are the namespace's."""
    found: list[T] = []
    failure: list[BaseException] = []

    def in_namespace() -> None:
        try:
            fd = os.open(NETNS_DIR / namespace, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns into {namespace}: {os.strerror(errno)}")
            finally:
                os.close(fd)
            found.append(work())
        except BaseException as exc:  # raised in the caller's thread below
            failure.append(exc)

    thread = threading.Thread(target=in_namespace, name=f"in {namespace}")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return found[0]
