"""Bounded waits on generator processes: until servers listen, until processes exit.

Every wait has a limit and polls the trial's ``stop_reason``, so a generator whose tunnel
died (and that would wait for its connection for minutes) ends the trial at once; the
lab's teardown then ends the process by its PID.
"""

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.traffic.base import StopReason

POLL_S = 0.01
LISTEN_LIMIT_S = 5.0


@dataclass(frozen=True)
class Server:
    """A started server process; ``log`` holds its error output, quoted if it exits."""

    label: str  # how errors name it, e.g. "iperf3 server on port 5201"
    proc: "subprocess.Popen[bytes]"
    port: int
    log: Path
    udp: bool = False  # listens on a UDP socket (else TCP)


def wait_listening(servers: list[Server], limit: float = LISTEN_LIMIT_S) -> None:
    """Wait until every server listens, reading its namespace's socket table in /proc."""
    deadline = time.monotonic() + limit
    pending = list(servers)
    while pending and time.monotonic() < deadline:
        for server in list(pending):
            if listening(server.proc.pid, server.port, udp=server.udp):
                pending.remove(server)
            elif server.proc.poll() is not None:
                raise LabError(f"{server.label} exited: {server.log.read_text().strip()}")
        time.sleep(0.005)
    if pending:
        names = ", ".join(server.label for server in pending)
        raise LabError(f"{names} did not listen within {limit:g} s")


def listening(pid: int, port: int, *, udp: bool = False) -> bool:
    """Whether process ``pid``'s network namespace has a socket listening on ``port``:
    a TCP socket in state LISTEN, or a bound UDP socket (state CLOSE, "unconnected")."""
    needle = f":{port:04X} "
    tables, state = (("udp6", "udp"), "07") if udp else (("tcp6", "tcp"), "0A")
    for table in tables:
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            return False
        for line in lines:
            fields = line.split()
            if (fields[1] + " ").endswith(needle) and fields[3] == state:
                return True
    return False


def established(pid: int, port: int) -> int:
    """TCP connections in state ESTABLISHED on local ``port`` in process ``pid``'s network
    namespace."""
    needle = f":{port:04X}"
    count = 0
    for table in ("tcp6", "tcp"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        count += sum(1 for line in lines if _local_state(line, needle) == "01")
    return count


def _local_state(line: str, needle: str) -> str | None:
    fields = line.split()
    return fields[3] if len(fields) > 3 and fields[1].endswith(needle) else None


def wait_connected(
    server: Server,
    count: int,
    client: "subprocess.Popen[bytes]",
    limit: float,
    stop_reason: StopReason,
) -> None:
    """Wait until ``count`` TCP connections to ``server`` are established (the bound
    iperf3's ``--connect-timeout`` puts on its client); return early if the client ends,
    whose own output then says why."""
    deadline = time.monotonic() + limit
    while (found := established(server.proc.pid, server.port)) < count:
        if client.poll() is not None:
            return
        if (reason := stop_reason()) is not None:
            raise LabError(reason)
        if time.monotonic() > deadline:
            raise LabError(
                f"{server.label}: {found} of {count} connection(s) established within {limit:g} s"
            )
        time.sleep(POLL_S)


def wait_exited(
    procs: list[tuple[str, "subprocess.Popen[bytes]"]], limit: float, stop_reason: StopReason
) -> list[float]:
    """Wait for every (label, process) to exit and return when each did (monotonic s);
    give up after ``limit`` s, or as soon as ``stop_reason`` gives a reason."""
    deadline = time.monotonic() + limit
    ended: list[float | None] = [None] * len(procs)
    while True:
        now = time.monotonic()
        for k, (_, proc) in enumerate(procs):
            if ended[k] is None and proc.poll() is not None:
                ended[k] = now
        if all(t is not None for t in ended):
            return [t for t in ended if t is not None]
        if (reason := stop_reason()) is not None:
            raise LabError(reason)
        if now > deadline:
            late = next(label for (label, _), t in zip(procs, ended, strict=True) if t is None)
            raise LabError(f"{late} did not finish within {limit:g} s")
        time.sleep(POLL_S)


def wait_each_connected(
    servers: list[Server],
    needed: int,
    clients: list["subprocess.Popen[bytes]"],
    limit: float,
    stop_reason: StopReason,
) -> dict[int, float]:
    """When each server first had ``needed`` TCP connections established (monotonic s,
    by port): the moment its client's test starts, to a poll. A client that ends before
    connecting ends the wait; its own output says why, and it gets no entry."""
    deadline = time.monotonic() + limit
    connected: dict[int, float] = {}
    pending = list(zip(servers, clients, strict=True))
    while pending:
        now = time.monotonic()
        for server, client in list(pending):
            if established(server.proc.pid, server.port) >= needed:
                connected[server.port] = now
                pending.remove((server, client))
            elif client.poll() is not None:
                pending.remove((server, client))
        if not pending:
            break
        if (reason := stop_reason()) is not None:
            raise LabError(reason)
        if now > deadline:
            names = ", ".join(server.label for server, _ in pending)
            raise LabError(f"{names}: connections not established within {limit:g} s")
        time.sleep(POLL_S)
    return connected
