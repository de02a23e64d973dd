"""A network namespace's own ``/proc/net`` files, read by this process.

A thread joins the namespace (``setns``) and reads ``/proc/thread-self/net/...``, which
show the reading thread's namespace; the thread ends with the read, so no other code
ever runs in the namespace. No process is started: ``ip netns exec NS cat`` costs two,
and an emulated guest takes 0.2-0.5 s to start each, twice per trial per role.
"""

import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path

CLONE_NEWNET = 0x40000000  # linux/sched.h
#: Where ``ip netns`` keeps a named namespace.
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(None, use_errno=True)


def read(namespace: str, names: Sequence[str]) -> str:
    """The files ``/proc/net/<name>`` of the namespace ``ip netns`` calls ``namespace``,
    concatenated; :class:`OSError` when it cannot be joined or a file read."""
    found: dict[str, str] = {}
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
            found["text"] = "".join(
                Path(f"/proc/thread-self/net/{name}").read_text() for name in names
            )
        except BaseException as exc:  # raised in the caller's thread below
            failure.append(exc)

    thread = threading.Thread(target=in_namespace, name=f"read {namespace}")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return found["text"]
