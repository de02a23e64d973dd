"""Bounded waits on generator processes: until servers listen, until processes exit.

Every wait has a limit and polls the trial's ``stop_reason``, so a generator whose tunnel
died (and that would wait for its connection for minutes) ends the trial at once; the
lab's teardown then ends the process by its PID. A server's sockets are read from its
host's ``/proc/net`` tables (:meth:`~tunnelbench.lab.host.Host.read_net`): a namespace
of this machine without starting a process, a real host over its connection (each look
then takes that connection's round trip).
"""

import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.system import interrupts
from tunnelbench.traffic.base import StopReason

POLL_S = 0.01
LISTEN_LIMIT_S = 5.0


@dataclass(frozen=True)
class Server:
    """A started server process on ``host``; ``log`` (a file of the host's) holds its
    error output, quoted if it exits."""

    label: str  # how errors name it, e.g. "iperf3 server on port 5201"
    host: Host
    proc: "subprocess.Popen[bytes]"
    port: int
    log: Path
    udp: bool = False  # listens on a UDP socket (else TCP)


def wait_listening(servers: list[Server], limit: float = LISTEN_LIMIT_S) -> None:
    """Wait until every server listens, reading its host's socket tables."""
    deadline = time.monotonic() + limit
    pending = list(servers)
    while pending and time.monotonic() < deadline:
        for server in list(pending):
            if listening(server.host, server.port, udp=server.udp):
                pending.remove(server)
            elif server.proc.poll() is not None:
                said = read_or_empty(server.host, server.log).strip()
                raise LabError(f"{server.label} exited: {said}")
        interrupts.sleep(0.005)
    if pending:
        names = ", ".join(server.label for server in pending)
        raise LabError(f"{names} did not listen within {limit:g} s")


#: The kernel's socket states in /proc/net/{tcp,udp}{,6}.
ESTABLISHED, UNCONNECTED, LISTEN = "01", "07", "0A"


def sockets(text: str) -> list[tuple[int, str]]:
    """(local port, state) of each socket in the text of /proc/net/{tcp,udp}{,6} tables
    (their heading lines are skipped wherever they stand: several tables may be one text)."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 3 and ":" in fields[1] and fields[0].endswith(":"):
            try:
                found.append((int(fields[1].rsplit(":", 1)[1], 16), fields[3]))
            except ValueError:
                continue
    return found


def bound_ports(host: Host) -> set[int]:
    """The ports on ``host`` a TCP listener or a bound, unconnected UDP socket holds."""
    tcp = sockets(host.read_net(["tcp", "tcp6"]))
    udp = sockets(host.read_net(["udp", "udp6"]))
    return {port for port, state in tcp if state == LISTEN} | {
        port for port, state in udp if state == UNCONNECTED
    }


def listening(host: Host, port: int, *, udp: bool = False) -> bool:
    """Whether ``host`` has a socket listening on ``port``: a TCP socket in state LISTEN,
    or a bound UDP socket (state CLOSE, "unconnected")."""
    tables, state = (["udp", "udp6"], UNCONNECTED) if udp else (["tcp", "tcp6"], LISTEN)
    return (port, state) in sockets(_net(host, tables))


def established(host: Host, port: int) -> int:
    """TCP connections in state ESTABLISHED on local ``port`` on ``host``."""
    return sockets(_net(host, ["tcp", "tcp6"])).count((port, ESTABLISHED))


def _net(host: Host, tables: list[str]) -> str:
    """The tables' text; none where the host cannot give it now (a namespace going
    away): the wait's own limit then says what did not happen."""
    try:
        return host.read_net(tables)
    except LabError:
        return ""


def read_or_empty(host: Host, path: Path) -> str:
    """A file of the host's; empty where it is not (yet) there."""
    try:
        return host.read(path)
    except (OSError, LabError):
        return ""


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
    while (found := established(server.host, server.port)) < count:
        if client.poll() is not None:
            return
        if (reason := stop_reason()) is not None:
            raise LabError(reason)
        if time.monotonic() > deadline:
            raise LabError(
                f"{server.label}: {found} of {count} connection(s) established within {limit:g} s"
            )
        interrupts.sleep(POLL_S)


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
        interrupts.sleep(POLL_S)


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
            if established(server.host, server.port) >= needed:
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
        interrupts.sleep(POLL_S)
    return connected


def failure_cause(servers: Iterable[Server], stop_reason: StopReason) -> str | None:
    """What failed beside a generator's client, for the error that a client's failure
    raised to name it first: the trial's own reason (a tunnel daemon that died, a lab
    namespace that vanished), else a server that a signal ended (a server's exit status
    says nothing: it exits when its client does, so only a signal is its own). None when
    nothing else is known to have failed."""
    if (reason := stop_reason()) is not None:
        return reason
    for server in servers:
        if (code := server.proc.poll()) is not None and code < 0:
            return f"{server.label} (pid {server.proc.pid}) was ended by {_signal(-code)}"
    return None


def explained(error: LabError, servers: Iterable[Server], stop_reason: StopReason) -> LabError:
    """``error`` (a client's failure, or a wait that ran out) with its cause first, when
    something else is known to have failed; a reset connection without a known cause
    says what was ruled out."""
    text = str(error)
    cause = failure_cause(servers, stop_reason)
    if cause is not None and cause not in text:
        return LabError(f"{cause}; then: {text}")
    if cause is None and "Connection reset by peer" in text:
        return LabError(f"{text} (the servers were still running)")
    return error


def _signal(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
