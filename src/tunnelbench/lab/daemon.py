"""Waiting for a daemon a lab started to be ready: its device created, its control socket
listening; or why not, from the last lines of its log."""

import time
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.lab.state import ProcessRecord, is_alive

READY_S = 10.0


def wait_for_device(daemon: ProcessRecord, program: str, device: str, log: Path) -> None:
    """Wait until a userspace daemon has created its device, or report why it did not."""
    deadline = time.monotonic() + READY_S
    netdev = Path(f"/proc/{daemon.pid}/net/dev")
    while time.monotonic() < deadline:
        if not is_alive(daemon):
            raise LabError(f"{program} exited during start-up: {tail(log)}")
        try:
            if f"{device}:" in netdev.read_text():
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise LabError(f"{program} did not create {device} within 10 s: {tail(log)}")


def wait_for_socket(daemon: ProcessRecord, name: str, socket: Path, log: Path) -> None:
    """Wait until a daemon listens on its control socket (``wg set`` needs it)."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if socket.is_socket():
            return
        if not is_alive(daemon):
            raise LabError(f"{name} exited during start-up: {tail(log)}")
        time.sleep(0.01)
    raise LabError(f"{name} did not create its control socket {socket} within 10 s: {tail(log)}")


def tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-lines:]) or "no output"
