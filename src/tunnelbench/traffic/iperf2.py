"""iperf 2 as a load generator: server and client command lines, and running them.

iperf2 (Debian's ``iperf``, 2.1.8 here) runs one thread per stream, so one client with
``-P N`` is not held to one core the way iperf3 before 3.16 is: ``auto`` is one process
(``single``), and ``processes`` (one client/server pair per stream) is refused. That mode
exists only to spread a single-threaded generator over cores; with iperf2 it would add
nothing but separate measuring windows that have to be summed.

A trial is one server (``-s -P N``: it exits by itself once it has served the N streams
and printed their final reports, so its output is complete when it ends) and one client,
on port 5001, both writing CSV (``-e -y C``, read by :mod:`iperf2_csv`) with 1 s
intervals. 2.1.8 has no connect timeout: the client's N TCP connections must be
established within :data:`CONNECT_S`, read from the server's socket table, and every
other wait is bounded too. In 2.1.8:

- download is ``-R`` (the server sends on the client's connections);
- bidir is ``--full-duplex``: both directions on each of the N sockets. (``-d``, the
  "dual test", would open a second set of connections from the server back to the
  client, and prints text headers into the CSV);
- IPv6 needs ``-V`` on both ends: without it the server listens on IPv4 only;
- ``-Z`` sets the congestion control per socket, given to the end that sends: the
  client in upload tests, the server in download tests (2.1.8 refuses it beside
  ``--reverse``); in bidir tests (both send) neither takes it, and the namespaces'
  default applies. 2.1.8 reports neither the algorithm in use nor a
  failure other than by a warning on standard error; any error output fails the trial;
- UDP: ``-u -b RATE`` is the rate of each stream (iperf2, like iperf3, applies ``-b`` per
  thread). Datagrams are sized as iperf3 sizes its own (the TCP MSS of the path: 1368
  bytes under WireGuard's 1420 MTU), so the two generators send the same packets;
  iperf2's default of 1470 bytes would be fragmented by any tunnel.

Warm-up: iperf2 has no ``-O``. The client runs for warm-up plus duration, and goodput,
intervals and UDP loss are computed from the receiver's 1 s interval lines in the
measured window (see :mod:`iperf2_csv`). The receiver is the server for the upload
direction and the client for the download direction.

Not measured (``None``): TCP retransmits (2.1.8's CSV has no retry column; the TCP
probe's namespace counters ``tcp.ROLE.retrans_segs`` are still recorded) and the
congestion control the senders used.

iperf3's common window (:func:`~tunnelbench.traffic.iperf3.check_staggered`) has no
counterpart here: it is for sums over several processes that each start measuring when
their own connections are up, and iperf2 runs
one process whose threads connect first and then start sending together (its connect
barrier, on unless ``--no-connect-sync``).
"""

import functools
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Direction, Protocol, StreamMode
from tunnelbench.kinds import Generator as GeneratorKind
from tunnelbench.lab.host import Host
from tunnelbench.model.plan import TrafficSettings
from tunnelbench.system import programs, versions
from tunnelbench.traffic import iperf2_csv, waiting
from tunnelbench.traffic.base import (
    CLIENT,
    SERVER,
    Ends,
    Generator,
    PathSignals,
    Started,
    StopReason,
    TrafficResult,
    no_reason,
)

PROGRAM = "iperf"
PURPOSE = "the load generator iperf2"
PORT = 5001
#: The ports its server takes (the first in a lab, where nothing else listens).
PORTS = range(PORT, PORT + 100)
#: How long the client's TCP connections may take (iperf3's --connect-timeout 5000).
CONNECT_S = 5.0
#: After the client ends, how long the server may take to print its reports and exit.
SERVER_EXIT_S = 10.0
_DIRECTION_FLAGS = {
    Direction.UPLOAD: [],
    Direction.DOWNLOAD: ["-R"],
    Direction.BIDIR: ["--full-duplex"],
}
_IP_HEADER = {4: 20, 6: 40}
_TCP_HEADER_WITH_TIMESTAMPS = 32
_UDP_PAYLOAD_MAX = 65507


def _common(settings: TrafficSettings, port: int, streams: int) -> list[str]:
    return [
        "-p", str(port), "-P", str(streams), "-e", "-y", "C", "-i", "1",
        *(["-V"] if settings.family == 6 else []),
    ]  # fmt: skip


def server_argv(
    binary: str, port: int, settings: TrafficSettings, streams: int, udp_length: int | None
) -> list[str]:
    """The server: it exits after serving ``streams`` connections (``-P``)."""
    return [binary, "-s", *_common(settings, port, streams), *_protocol_flags(settings, udp_length)]


def client_argv(
    binary: str,
    server: str,
    port: int,
    settings: TrafficSettings,
    streams: int,
    udp_length: int | None,
) -> list[str]:
    """The client: warm-up plus duration seconds; for UDP ``udp_rate`` is the target of
    each stream."""
    return [
        binary, "-c", server, "-t", str(settings.fixed_warmup + settings.duration),
        *_common(settings, port, streams), *_DIRECTION_FLAGS[settings.direction],
        *_protocol_flags(settings, udp_length, client=True),
    ]  # fmt: skip


def _protocol_flags(
    settings: TrafficSettings, udp_length: int | None, *, client: bool = False
) -> list[str]:
    if settings.protocol is Protocol.TCP:
        # Only to the end that sends: 2.1.8 refuses -Z with --reverse on the client and
        # warns (which fails the trial) where the end also receives.
        sends = Direction.UPLOAD if client else Direction.DOWNLOAD
        if settings.congestion and settings.direction is sends:
            return ["-Z", settings.congestion]
        return []
    if settings.udp_rate is None or udp_length is None:
        raise ValueError("a UDP test needs traffic.udp_rate and a datagram length")
    # Both ends get the length: the server reads (and in reverse tests sends) with it.
    rate = ["-b", str(settings.udp_rate)] if client else []
    return ["-u", *rate, "-l", str(udp_length)]


def udp_length(mtu: int, family: int) -> int:
    """The UDP payload iperf3 3.12 would use on a path of this MTU: its control
    connection's TCP MSS (MTU minus the IP header, 20 bytes of TCP header and 12 of
    timestamps)."""
    return min(mtu - _IP_HEADER[family] - _TCP_HEADER_WITH_TIMESTAMPS, _UDP_PAYLOAD_MAX)


def path_mtu(routes: Sequence[tuple[Host, str]], family: int) -> int:
    """The smaller MTU of the devices through which each host routes to its destination
    (the client to the server, the server back to the client's source: the tunnel
    device when there is one), as a TCP handshake between them would see it. Read with
    ``ip route get`` and /sys, which busybox has too: the lab and real hosts alike."""
    mtus = []
    for host, destination in routes:
        text = host.run(["ip", f"-{family}", "route", "get", destination]).stdout
        words = text.split()
        if "dev" not in words[:-1]:
            raise LabError(f"{host.name}: no route to {destination} ({text.strip()})")
        device = words[words.index("dev") + 1]
        mtus.append(int(host.run(["cat", f"/sys/class/net/{device}/mtu"]).stdout))
    return min(mtus)


def routes(ends: Ends, family: int) -> list[tuple[Host, str]]:
    """The client to the server, and the server back to the client's source address
    (the one the client's route to the server names)."""
    client, target = ends.host(CLIENT), ends.server_address(family)
    words = client.run(["ip", f"-{family}", "route", "get", target]).stdout.split()
    if "src" not in words[:-1]:
        raise LabError(f"{client.name}: its route to {target} names no source address")
    return [(client, target), (ends.host(SERVER), words[words.index("src") + 1])]


def parse_version(text: str) -> tuple[int, ...]:
    """(2, 1, 8) from ``iperf version 2.1.8 (12 August 2022) pthreads``."""
    match = re.search(r"iperf version (2(?:\.\d+)+)", text)
    if not match:
        raise LabError(f"cannot read an iperf 2 version from {text.strip()!r}")
    return tuple(int(part) for part in match.group(1).split("."))


class Iperf2(Generator):
    kind = GeneratorKind.IPERF2
    packages: ClassVar[Mapping[str, str]] = {PROGRAM: "iperf"}
    process_prefixes = ("iperf2-", "iperf-")
    threaded_streams = True

    def programs(self) -> list[tuple[str, str]]:
        return [(PROGRAM, PURPOSE)]

    def version(self) -> str:
        return _version_line(programs.require(PROGRAM, PURPOSE))

    def conflicts(self, settings: TrafficSettings) -> list[str]:
        found = []
        if settings.stream_mode is StreamMode.PROCESSES and settings.streams > 1:
            found.append(
                "traffic.stream_mode: 'processes' is not available with traffic.generator ="
                " 'iperf2', which runs every stream as a thread of one process; use 'single'"
                " or 'auto'"
            )
        if (
            settings.protocol is Protocol.TCP
            and settings.congestion is not None
            and settings.direction is Direction.BIDIR
        ):
            # 2.1.8 takes -Z at neither end of a full-duplex test (_protocol_flags): both
            # ends' senders would run the kernel's default while the trial recorded this.
            found.append(
                f"traffic.congestion: {settings.congestion!r} cannot be set with"
                " traffic.generator = 'iperf2' and traffic.direction = 'bidir' (iperf2"
                " 2.1.8 refuses -Z in a full-duplex test); use iperf3 or leave"
                " traffic.congestion unset"
            )
        return found

    def resolve_mode(self, settings: TrafficSettings, version: str | None = None) -> StreamMode:
        if problems := self.conflicts(settings):
            raise UserError(problems[0])
        return StreamMode.SINGLE

    def run(
        self,
        ends: Ends,
        settings: TrafficSettings,
        mode: StreamMode,
        on_started: Started,
        stop_reason: StopReason = no_reason,
        signals: PathSignals | None = None,
    ) -> TrafficResult:
        if mode is not StreamMode.SINGLE:
            raise UserError(self.conflicts(settings)[0])
        target = ends.server_address(settings.family)
        length = None
        if settings.protocol is Protocol.UDP:
            mtu = path_mtu(routes(ends, settings.family), settings.family)
            length = udp_length(mtu, settings.family)
        streams = settings.streams
        # iperf2 serves a UDP test on the port itself: one no TCP or UDP socket holds.
        port = ends.free_ports(SERVER, PORTS, 1)[0]
        binary = ends.program(SERVER, PROGRAM, PURPOSE)
        argv = server_argv(binary, port, settings, streams, length)
        server = _Process(ends, SERVER, port, argv, settings.protocol)
        udp = settings.protocol is Protocol.UDP
        listening = waiting.Server(
            f"iperf2 server on port {port}", server.host, server.proc, port, server.err, udp
        )
        waiting.wait_listening([listening])
        binary = ends.program(CLIENT, PROGRAM, PURPOSE)
        argv = client_argv(binary, target, port, settings, streams, length)
        client = _Process(ends, CLIENT, port, argv, settings.protocol)
        on_started(
            {f"iperf2-server:{port}": server.proc.pid, f"iperf2-client:{port}": client.proc.pid},
            client.started + settings.fixed_warmup,
        )
        if not udp:  # 2.1.8 has no connect timeout of its own
            waiting.wait_connected(listening, streams, client.proc, CONNECT_S, stop_reason)
        limit = settings.fixed_warmup + settings.duration + 20
        waiting.wait_exited([(f"iperf2 client on port {port}", client.proc)], limit, stop_reason)
        client.check()
        waiting.wait_exited(
            [(f"iperf2 server on port {port}", server.proc)], SERVER_EXIT_S, stop_reason
        )
        server.check()
        records = [client.record(), server.record()]
        return result(measure(records, settings, target, port), records)


def measure(
    records: list[dict[str, Any]], settings: TrafficSettings, target: str, port: int = PORT
) -> iperf2_csv.Measurement:
    """The measurement in a trial's stored records (one per process, as
    :meth:`_Process.record` writes them) of traffic to ``target`` port ``port``."""
    outputs = {record["role"]: str(record["stdout"]) for record in records}
    if set(outputs) != {"client", "server"}:
        raise LabError(f"iperf2 records of {sorted(outputs)}; expected client and server")
    return iperf2_csv.measure(
        outputs["client"],
        outputs["server"],
        protocol=settings.protocol,
        direction=settings.direction,
        target=(target, port),
        streams=settings.streams,
        warmup=settings.fixed_warmup,
        duration=settings.duration,
    )


class _Process:
    """One iperf2 process started on its end's host, its output in the end's directory."""

    def __init__(
        self, ends: Ends, role: str, port: int, argv: list[str], protocol: Protocol
    ) -> None:
        self.role, self.argv, self.protocol = role, argv, protocol
        self.out = ends.files(role) / f"iperf2-{role}-{port}.csv"
        self.err = ends.files(role) / f"iperf2-{role}-{port}.err"
        self.host = ends.host(role)
        self.started = time.monotonic()
        self.proc = self.host.spawn(argv, stdout=self.out, stderr=self.err)

    def check(self) -> None:
        check_exit(self.role, self.proc.returncode, self.host.read(self.err), self.protocol)

    def record(self) -> dict[str, Any]:
        """What is stored with the trial: the command line and everything it printed."""
        return {
            "role": self.role,
            "argv": self.argv,
            "returncode": self.proc.returncode,
            "stdout": self.host.read(self.out),
            "stderr": self.host.read(self.err),
        }


#: Error output that says nothing about what was measured, by the end that prints it, in
#: UDP tests. At the end of each stream the client sends a final datagram and waits for
#: the server's acknowledgement, resending the datagram every 10 ms for up to 2 s; a
#: loaded path may lose either, and 2.1.8 then prints one of these and exits 0:
#:
#: - the server: "ack of last datagram failed" (seen 6 of 6 runs of 2 x 100 Mbit/s);
#: - the client: "read failed: Connection refused": the server, done with all its
#:   streams, has exited, and a resent datagram drew an ICMP port unreachable (seen once
#:   in CI, wireguard-go at 2 x 100 Mbit/s with the hypervisor stealing 36% of a core).
#:
#: Every figure comes from the receiver's interval lines, whose completeness
#: :func:`iperf2_csv.measure` checks, so nothing measured depends on that exchange; a
#: server that was gone before the end leaves its interval lines short, and fails there.
HARMLESS: dict[str, tuple[re.Pattern[str], ...]] = {
    SERVER: (re.compile(r"^\[ *\d+\] WARNING: ack of last datagram failed\.?$"),),
    CLIENT: (re.compile(r"^read failed: Connection refused$"),),
}


def harmless(role: str, line: str, protocol: Protocol) -> bool:
    """Whether ``line`` of ``role``'s error output is one of the :data:`HARMLESS` lines."""
    patterns = HARMLESS.get(role, ()) if protocol is Protocol.UDP else ()
    return any(p.match(line.strip()) for p in patterns)


def check_exit(role: str, returncode: int | None, stderr: str, protocol: Protocol) -> None:
    """An exit status other than 0, or any error output but the :data:`HARMLESS` lines,
    fails the trial: 2.1.8 exits 0 after "tcp connect failed", and only warns when ``-Z``
    fails. (The whole output is kept with the trial either way.)"""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if not harmless(role, line, protocol)]
    if returncode != 0 or errors:
        shown = "; ".join(errors) or "no error output"
        raise LabError(f"iperf2 {role} (exit status {returncode}): {shown}")


def result(measured: iperf2_csv.Measurement, raw: list[dict[str, Any]]) -> TrafficResult:
    """The trial's traffic figures from what the receivers reported."""
    udp = measured.udp
    return TrafficResult(
        stream_mode=StreamMode.SINGLE,
        processes=1,
        goodput_bps=(measured.upload_bps or 0.0) + (measured.download_bps or 0.0),
        upload_bps=measured.upload_bps,
        download_bps=measured.download_bps,
        retransmits=None,  # not in 2.1.8's CSV
        intervals_bps=measured.intervals_bps,
        window_s=measured.window_s,
        raw=raw,
        lost_packets=sum(r.lost_packets for r in udp) if udp else None,
        lost_pct=iperf2_csv.lost_percent(udp) if udp else None,
        jitter_ms=sum(r.jitter_ms for r in udp) / len(udp) if udp else None,
        congestion=None,  # not reported by 2.1.8
    )


@functools.cache
def _version_line(binary: str) -> str:
    """``iperf -v`` prints its version on standard error and exits 1."""
    done = versions.ask([binary, "-v"], check=False)
    lines = [line.strip() for line in (done.stdout + "\n" + done.stderr).splitlines()]
    line = next((line for line in lines if line), "")
    parse_version(line)
    return line
