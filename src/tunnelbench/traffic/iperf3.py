"""iperf3 as a load generator: server and client command lines, and running them."""

import functools
import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from tunnelbench.errors import LabError
from tunnelbench.kinds import Direction, Protocol, StreamMode
from tunnelbench.kinds import Generator as GeneratorKind
from tunnelbench.lab.host import Host
from tunnelbench.model.plan import TrafficSettings
from tunnelbench.system import interrupts, programs, versions
from tunnelbench.traffic import iperf3_json, waiting, warmup
from tunnelbench.traffic.base import (
    CLIENT,
    SERVER,
    Ends,
    Generator,
    PathSignals,
    Started,
    StopReason,
    TrafficResult,
    WarmupEnd,
    WindowClosed,
    no_reason,
)

BASE_PORT = 5201
#: The ports its servers take (the lab's first ones: nothing else listens in a lab).
PORTS = range(BASE_PORT, BASE_PORT + 100)
# iperf3's own --connect-timeout (5 s) plus the time its control exchange may take.
CONNECT_LIMIT_S = 8.0
#: iperf3 runs one thread per stream from this release on.
THREADED_SINCE = (3, 16)
_DIRECTION_FLAGS = {Direction.UPLOAD: [], Direction.DOWNLOAD: ["-R"], Direction.BIDIR: ["--bidir"]}

# With one client per stream, each client's test starts when its own connections are
# up; one whose SYN a full queue dropped starts a retransmission timeout (1 s) after the
# others. Every client is measured over the same window, which begins once the last one
# started, and is stopped (SIGINT, which keeps its JSON) once the window has passed: a
# client that started up to this much earlier than the last still covers the window.
# Each is told to run this much (and STOP_ROOM_S for its stop) beyond the window, a
# bound it reaches only if the stop never comes. (3.12 reads -t as a whole number of
# seconds.) Two SYNs lost (1 s, then 2 s of retransmission timeouts), with room for an
# emulated guest's late timers: in a TCG guest a PPPoE session's one busy core delayed
# one of four clients by 2.07 s (CI), where 2 s was the margin.
STAGGER_MARGIN_S = 4
STOP_ROOM_S = 2
# Interval length (s) in that mode, on both ends: the window's edges fall within it.
WINDOW_INTERVAL_S = iperf3_json.FINE_S
# With an "auto" warm-up each client runs this much longer than the warm-up's bound and
# the window; it is stopped (SIGINT, which keeps its JSON) once the window has passed.
AUTO_MARGIN_S = 2
# How long past the window's end the clients run before they are stopped: the receivers'
# interval holding the window's edge is then complete. Counted is an interval whose middle
# lies in the window, so it ends at most half an interval (0.05 s) after it; the rest is
# room for a receiver's interval timer that fires late.
AUTO_TAIL_S = 0.1
#: How long past that the clients wait for the probes' closing readings (a VM guest's
#: sampler thread, starved by busy emulated cores, can wake late); within the room every
#: client has beyond the window (:data:`STOP_ROOM_S`).
CLOSE_LIMIT_S = 1.5
#: What iperf3 3.12 reports when the client is stopped with SIGINT: the client's
#: document and its server's (``the client has terminated``).
INTERRUPTED = ("interrupt - the client has terminated", "the client has terminated")
#: What else the server may report of that stop: sending (a download), iperf3 3.12's
#: server sometimes reads a stream's TCP_INFO after the stop has closed its socket (seen
#: in CI: 1 of 12 quick download trials), or writes to a stream the stopped client has
#: already closed (EPIPE, or ECONNRESET when the client's kernel answered with a reset:
#: seen in CI once, wireguard-go with 4 streams). The client's own document must still
#: say it was stopped (checked first), so these came after the window closed; the
#: server's intervals up to the stop are kept, and
#: :func:`~tunnelbench.traffic.iperf3_json.parse` still checks that they cover the window.
SERVER_STOPPED = (
    INTERRUPTED[1],
    "getsockopt - Bad file descriptor",
    "unable to write to stream socket: Broken pipe",
    "unable to write to stream socket: Connection reset by peer",
)


def server_argv(binary: str, port: int, *, windowed: bool = False) -> list[str]:
    # -J makes the server send its JSON report, with receiver intervals, to the client.
    interval = ["-i", str(WINDOW_INTERVAL_S)] if windowed else []
    return [binary, "-s", "-1", "-J", "-p", str(port), *interval]


def client_argv(
    binary: str,
    server: str,
    port: int,
    settings: TrafficSettings,
    streams: int,
    *,
    windowed: bool = False,
) -> list[str]:
    """One client's command line; for UDP ``udp_rate`` is the target of each stream
    (iperf3 applies ``-b`` to every stream separately). ``windowed``: one of several
    clients measured over a common window and stopped once it has passed (see
    :data:`STAGGER_MARGIN_S`). With an "auto" warm-up (``settings.warmup`` None) every
    client is windowed, omits nothing and runs until it is stopped, at most the warm-up's
    bound and the window (plus :data:`AUTO_MARGIN_S`)."""
    if settings.warmup is None:
        seconds, omit = settings.warmup_max + settings.duration + AUTO_MARGIN_S, 0
        windowed = True
    else:
        seconds = settings.duration + (STAGGER_MARGIN_S + STOP_ROOM_S if windowed else 0)
        omit = settings.warmup
    interval = str(WINDOW_INTERVAL_S) if windowed else "1"
    return [
        binary, "-c", server, "-p", str(port), f"-{settings.family}",
        "-t", str(seconds), "-O", str(omit), "-i", interval,
        "-P", str(streams), "-J", "--get-server-output", "--connect-timeout", "5000",
        *_DIRECTION_FLAGS[settings.direction], *_protocol_flags(settings),
    ]  # fmt: skip


def _protocol_flags(settings: TrafficSettings) -> list[str]:
    if settings.protocol is Protocol.TCP:
        # Per socket, on both ends (the client passes it to the server): unlike the
        # namespace's sysctl, this may pick any algorithm the kernel has, not only the
        # host's tcp_allowed_congestion_control.
        return ["-C", settings.congestion] if settings.congestion else []
    if settings.udp_rate is None:
        raise ValueError("a UDP test needs traffic.udp_rate (checked by the plan parser)")
    return ["-u", "-b", str(settings.udp_rate)]


def parse_version(text: str) -> tuple[int, ...]:
    match = re.search(r"iperf (\d+)\.(\d+)", text)
    if not match:
        raise LabError(f"cannot read the iperf3 version from {text.strip()!r}")
    return (int(match.group(1)), int(match.group(2)))


class Iperf3(Generator):
    kind = GeneratorKind.IPERF3
    packages: ClassVar[Mapping[str, str]] = {"iperf3": "iperf3"}
    process_prefixes = ("iperf3-",)

    def programs(self) -> list[tuple[str, str]]:
        return [("iperf3", "the load generator")]

    def version(self) -> str:
        return _version_line(programs.require("iperf3", "the load generator"))

    def ends_warmup(self) -> bool:
        return True

    def multithreaded(self, version: str | None = None) -> bool:
        return parse_version(version or self.version()) >= THREADED_SINCE

    def resolve_mode(self, settings: TrafficSettings, version: str | None = None) -> StreamMode:
        if settings.stream_mode is not StreamMode.AUTO:
            return settings.stream_mode
        if settings.streams > 1 and not self.multithreaded(version):
            return StreamMode.PROCESSES
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
        servers: dict[int, waiting.Server] = {}
        try:
            return self._run(ends, settings, mode, on_started, stop_reason, signals, servers)
        except LabError as exc:
            # A client fails when its server, the path or a tunnel daemon does: the error
            # names what failed first (a killed server once read as its client's fault).
            raise waiting.explained(exc, servers.values(), stop_reason) from None

    def _run(
        self,
        ends: Ends,
        settings: TrafficSettings,
        mode: StreamMode,
        on_started: Started,
        stop_reason: StopReason,
        signals: PathSignals | None,
        servers: dict[int, waiting.Server],
    ) -> TrafficResult:
        """:meth:`run`, its servers put in ``servers`` as they start."""
        count = settings.streams if mode is StreamMode.PROCESSES else 1
        per_process = 1 if mode is StreamMode.PROCESSES else settings.streams
        auto = settings.warmup is None
        windowed = count > 1 or auto
        client, server = ends.host(CLIENT), ends.host(SERVER)
        client_dir = ends.files(CLIENT)
        target = ends.server_address(settings.family)
        ports = ends.free_ports(SERVER, PORTS, count)
        _start_servers(ends, ports, windowed, servers)
        waiting.wait_listening(list(servers.values()))
        binary = ends.program(CLIENT, "iperf3", "the load generator")
        outputs = [client_dir / f"iperf3-client-{port}.json" for port in ports]
        clients = [
            # Its errors are in its JSON; anything else it prints goes to a file (a pipe
            # nobody reads could fill and stall it).
            client.spawn(
                client_argv(binary, target, port, settings, per_process, windowed=windowed),
                stdout=out,
                stderr=client_dir / f"iperf3-client-{port}.err",
            )
            for port, out in zip(ports, outputs, strict=True)
        ]
        watched = {f"iperf3-server:{port}": s.proc.pid for port, s in servers.items()}
        watched |= {f"iperf3-client:{port}": c.pid for port, c in zip(ports, clients, strict=True)}
        # Each client's test (and its --omit warm-up) starts once its connections are
        # up: the control connection, plus one per stream for TCP (UDP streams are not
        # TCP). The probes' window starts from the last of those moments.
        needed = 1 + (per_process if settings.protocol is Protocol.TCP else 0)
        started = waiting.wait_each_connected(
            list(servers.values()), needed, clients, CONNECT_LIMIT_S, stop_reason
        )
        t0 = max(started.values(), default=time.monotonic())
        named = [
            (f"iperf3 client on port {port}", c) for port, c in zip(ports, clients, strict=True)
        ]
        ended: WarmupEnd | None = None
        if windowed and len(started) < len(ports):
            raise LabError(_unconnected(client, outputs))
        if not windowed:
            omitted = settings.fixed_warmup
            on_started(watched, t0 + omitted)
            waiting.wait_exited(named, omitted + settings.duration + 20, stop_reason)
            docs = [_load(client, path, proc) for path, proc in zip(outputs, clients, strict=True)]
            return combine(mode, [iperf3_json.parse(docs[0], settings.duration)], docs)
        if auto:
            ended, closed = _watch_warmup(
                t0, settings, server, signals, named, stop_reason, lambda b: on_started(watched, b)
            )
            begin, omitted = ended.begin, 0
        else:
            omitted = settings.fixed_warmup
            begin = t0 + omitted
        # Where the window begins in each client's intervals (which start after its own -O).
        offsets = {port: begin - omitted - at for port, at in started.items()}
        if not auto:
            # Known as soon as the last client connected, not after the traffic ran.
            check_staggered(offsets)
            closed = on_started(watched, begin)
        _stop_after(client, named, begin + settings.duration + AUTO_TAIL_S, closed, stop_reason)
        waiting.wait_exited(
            [(f"iperf3 server on port {port}", s.proc) for port, s in servers.items()],
            CONNECT_LIMIT_S,
            stop_reason,
        )
        docs = _windowed_documents(ends, ports, outputs, clients, offsets)
        measured = [iperf3_json.parse(doc, settings.duration) for doc in docs]
        result = combine(mode, measured, docs)
        result.warmup = ended
        return result


def combine(
    mode: StreamMode, measured: list[iperf3_json.ProcessMeasurement], docs: list[dict[str, Any]]
) -> TrafficResult:
    """The trial's traffic figures from each client process's measurement (summed)."""

    def total(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return sum(present) if present else None

    upload = total([m.upload_bps for m in measured])
    download = total([m.download_bps for m in measured])
    retransmits = [m.retransmits for m in measured if m.retransmits is not None]
    length = min(len(m.intervals_bps) for m in measured)
    intervals = [sum(m.intervals_bps[i] for m in measured) for i in range(length)]
    udp = [received for m in measured for received in m.udp]
    senders = sorted({m.congestion for m in measured if m.congestion})
    return TrafficResult(
        stream_mode=mode,
        processes=len(measured),
        goodput_bps=(upload or 0.0) + (download or 0.0),
        upload_bps=upload,
        download_bps=download,
        retransmits=sum(retransmits) if retransmits else None,
        intervals_bps=intervals,
        raw=docs,
        lost_packets=sum(r.lost_packets for r in udp) if udp else None,
        lost_pct=iperf3_json.lost_percent(udp) if udp else None,
        # Each receiver's jitter is already the mean over its streams.
        jitter_ms=sum(r.jitter_ms for r in udp) / len(udp) if udp else None,
        congestion=",".join(senders) or None,
        window_s=min((m.window_s for m in measured if m.window_s is not None), default=None),
        fine_bps=[sum(values) for values in zip(*(m.fine_bps for m in measured), strict=False)],
    )


def check_staggered(offsets: dict[int, float]) -> None:
    """Refuse clients that did not all run through the common window.

    Each client measures its own test from the moment its connections are up; a client
    whose connection was delayed (a SYN dropped by a full queue costs a one-second
    retransmission timeout) starts later than the others. The window every client is
    measured over begins once the last one started, and every client is stopped once the
    window has passed, at the latest :data:`STAGGER_MARGIN_S` beyond its own duration, so
    one that started up to that much earlier still covers the window. Summing per-client
    rates measured over different windows would overstate what the link carried at any
    one time (4 clients through a 100 Mbit/s tbf with a 5-packet queue summed to 117-131
    Mbit/s).
    """
    if not offsets:
        raise LabError("no iperf3 client connected")
    port, offset = max(offsets.items(), key=lambda item: item[1])
    if offset > STAGGER_MARGIN_S:
        raise LabError(
            f"iperf3 client on port {port} started {offset:.2f} s before the last one"
            f" connected: more than the {STAGGER_MARGIN_S:g} s a client may run beyond the"
            " measured duration, so no window holds all of them (connections delayed by"
            " dropped packets; traffic.stream_mode = single connects all streams of one"
            " process before it measures)"
        )


def _ended(clients: list[tuple[str, "subprocess.Popen[bytes]"]]) -> str | None:
    """Why the traffic cannot go on: a client that ended before it was stopped."""
    for name, client in clients:
        if (code := client.poll()) is not None:
            return f"{name} ended before it was stopped (exit {code})"
    return None


def _stop_after(
    host: Host,
    clients: list[tuple[str, "subprocess.Popen[bytes]"]],
    at: float,
    closed: WindowClosed,
    stop_reason: StopReason,
) -> None:
    """Let the clients run until monotonic ``at`` and the probes have closed the window,
    then stop each with SIGINT on ``host`` (iperf3 then writes its JSON, intervals
    included; sent where iperf3's handler is safe, see :mod:`~tunnelbench.system.stopping`) and wait
    for them. A probe that has not closed the window :data:`CLOSE_LIMIT_S` after
    ``at`` fails the trial: stopping the traffic first would put idle time into its
    figures, and the clients' own end is not much further off."""
    while (left := at - time.monotonic()) > 0:
        if (reason := stop_reason() or _ended(clients)) is not None:
            raise LabError(reason)
        interrupts.sleep(min(left, 0.1))
    while not closed(0.05):
        if (reason := stop_reason() or _ended(clients)) is not None:
            raise LabError(reason)
        if time.monotonic() - at > CLOSE_LIMIT_S:
            raise LabError(
                f"the probes had not closed the measured window {CLOSE_LIMIT_S:g} s after it"
                " ended (a sampler thread starved of CPU), so the traffic could not be stopped"
                " without idle time in their figures"
            )
    for _, client in clients:
        host.interrupt_between_calls(client)
    waiting.wait_exited(clients, CONNECT_LIMIT_S, stop_reason)


def _interrupted(doc: dict[str, Any], server: Host, server_report: Path) -> dict[str, Any]:
    """A stopped client's document, its stop checked and its server's own report put
    where ``--get-server-output`` would have put it; any other error is the trial's."""
    if doc.get("error") != INTERRUPTED[0]:
        raise LabError(f"iperf3: {doc.get('error') or 'the client was not stopped as asked'}")
    report = _load(server, server_report)
    if report.get("error") not in SERVER_STOPPED:
        raise LabError(f"iperf3 server: {report.get('error') or 'it did not see the stop'}")
    del doc["error"], report["error"]
    doc["server_output_json"] = report
    doc[iperf3_json.STOPPED_KEY] = True
    return doc


def _first_error(host: Host, paths: list[Path]) -> str:
    for path in paths:
        if '"error"' in waiting.read_or_empty(host, path):
            return str(_load(host, path).get("error"))
    return "none"


def _load(
    host: Host, path: Path, process: "subprocess.Popen[bytes] | None" = None
) -> dict[str, Any]:
    text = waiting.read_or_empty(host, path)
    try:
        doc: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError:
        # Which process (client or server, its port) says where to look, and how it
        # ended (a client that aborted on its stop, see system.stopping, exits -6 and
        # says why on its standard error).
        said = text.strip()[:200] or "empty output"
        if process is not None and process.returncode is not None:
            said += f"; it exited {_exit(process.returncode)}"
            if last := waiting.read_or_empty(host, path.with_suffix(".err")).strip():
                said += f", saying: {last[-300:]}"
        raise LabError(f"iperf3 wrote no JSON to {path.name}: {said}") from None
    return doc


def _exit(code: int) -> str:
    if code >= 0:
        return f"with status {code}"
    try:
        return f"on {signal.Signals(-code).name}"
    except ValueError:
        return f"on signal {-code}"


@functools.cache
def _version_line(binary: str) -> str:
    return versions.ask([binary, "--version"]).stdout.strip().splitlines()[0]


def _start_servers(
    ends: Ends, ports: list[int], windowed: bool, servers: dict[int, waiting.Server]
) -> None:
    """One iperf3 server per port on the server end, each put in ``servers``."""
    server, server_dir = ends.host(SERVER), ends.files(SERVER)
    binary = ends.program(SERVER, "iperf3", "the load generator")
    for port in ports:
        log = server_dir / f"iperf3-server-{port}.log"
        # Stopped clients send their server no results: its own JSON is read instead.
        report = server_dir / f"iperf3-server-{port}.json" if windowed else None
        argv = server_argv(binary, port, windowed=windowed)
        proc = server.spawn(argv, stdout=report, stderr=log)
        servers[port] = waiting.Server(f"iperf3 server on port {port}", server, proc, port, log)


def _windowed_documents(
    ends: Ends,
    ports: list[int],
    outputs: list[Path],
    clients: "list[subprocess.Popen[bytes]]",
    offsets: dict[int, float],
) -> list[dict[str, Any]]:
    """Each stopped client's JSON (completed from its server's where the stop cut it
    short), with where the measured window begins in its intervals."""
    client, server, server_dir = ends.host(CLIENT), ends.host(SERVER), ends.files(SERVER)
    docs = [
        _interrupted(_load(client, path, proc), server, server_dir / f"iperf3-server-{port}.json")
        for port, path, proc in zip(ports, outputs, clients, strict=True)
    ]
    for port, doc in zip(ports, docs, strict=True):
        # Stored with the document, so the goodput can be recomputed from the store.
        doc[iperf3_json.WINDOW_KEY] = {"offset_s": round(offsets[port], 4)}
    return docs


def _unconnected(client: Host, outputs: list[Path]) -> str:
    return "an iperf3 client ended before it connected; its output: " + _first_error(
        client, outputs
    )


def _watch_warmup(
    t0: float,
    settings: TrafficSettings,
    server: Host,
    signals: PathSignals | None,
    named: "list[tuple[str, subprocess.Popen[bytes]]]",
    stop_reason: StopReason,
    open_at: Callable[[float], WindowClosed],
) -> tuple[WarmupEnd, WindowClosed]:
    """An "auto" warm-up watched until the path settles (or its bound): how it ended,
    and the probes' wait for the measured window it opened last (``open_at`` opens one)."""
    opened: list[WindowClosed] = []

    def open_window(begin: float) -> None:
        opened.append(open_at(begin))

    ended = warmup.watch(
        t0,
        bound_s=settings.warmup_max,
        duration_s=settings.duration,
        server=server,
        signals=signals or PathSignals(lambda: []),
        running=lambda: _ended(named),
        stop_reason=stop_reason,
        open_window=open_window,
    )
    return ended, opened[-1]
