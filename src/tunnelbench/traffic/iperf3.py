"""iperf3 as a load generator: server and client command lines, and running them."""

import functools
import json
import re
import time
from pathlib import Path
from typing import Any

from tunnelbench import programs
from tunnelbench.command import run
from tunnelbench.errors import LabError
from tunnelbench.kinds import Direction, Protocol, StreamMode
from tunnelbench.kinds import Generator as GeneratorKind
from tunnelbench.lab.netns import Lab
from tunnelbench.plan import TrafficSettings
from tunnelbench.traffic import iperf3_json, waiting
from tunnelbench.traffic.base import Generator, Started, StopReason, TrafficResult, no_reason

BASE_PORT = 5201
#: iperf3 runs one thread per stream from this release on.
THREADED_SINCE = (3, 16)
_DIRECTION_FLAGS = {Direction.UPLOAD: [], Direction.DOWNLOAD: ["-R"], Direction.BIDIR: ["--bidir"]}

# Client lifetimes agree to a few polls (waiting.POLL_S) when all connect at once; a
# delayed connection adds at least a second (TCP's initial retransmission timeout).
ALIGNMENT_FLOOR_S = 0.15
ALIGNMENT_SHARE = 0.03  # of the measured duration


def server_argv(binary: str, port: int) -> list[str]:
    # -J makes the server send its JSON report, with receiver intervals, to the client.
    return [binary, "-s", "-1", "-J", "-p", str(port)]


def client_argv(
    binary: str, server: str, port: int, settings: TrafficSettings, streams: int
) -> list[str]:
    """One client's command line; for UDP ``udp_rate`` is the target of each stream
    (iperf3 applies ``-b`` to every stream separately)."""
    return [
        binary, "-c", server, "-p", str(port), f"-{settings.family}",
        "-t", str(settings.duration), "-O", str(settings.warmup), "-i", "1",
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

    def programs(self) -> list[tuple[str, str]]:
        return [("iperf3", "the load generator")]

    def version(self) -> str:
        return _version_line(programs.require("iperf3", "the load generator"))

    def multithreaded(self) -> bool:
        return parse_version(self.version()) >= THREADED_SINCE

    def resolve_mode(self, settings: TrafficSettings) -> StreamMode:
        if settings.stream_mode is not StreamMode.AUTO:
            return settings.stream_mode
        if settings.streams > 1 and not self.multithreaded():
            return StreamMode.PROCESSES
        return StreamMode.SINGLE

    def run(
        self,
        lab: Lab,
        settings: TrafficSettings,
        mode: StreamMode,
        on_started: Started,
        stop_reason: StopReason = no_reason,
    ) -> TrafficResult:
        binary = programs.require("iperf3", "the load generator")
        count = settings.streams if mode is StreamMode.PROCESSES else 1
        per_process = 1 if mode is StreamMode.PROCESSES else settings.streams
        client, server = lab.chain.client, lab.chain.server
        target = lab.server_address(settings.family)
        ports = [BASE_PORT + k for k in range(count)]
        servers = {}
        for port in ports:
            log = lab.directory / f"iperf3-server-{port}.log"
            with log.open("wb") as err:
                proc = lab.start(server, server_argv(binary, port), stderr=err)
            servers[port] = waiting.Server(f"iperf3 server on port {port}", proc, port, log)
        waiting.wait_listening(list(servers.values()))
        outputs: list[Path] = []
        clients = []
        launched = []
        for port in ports:
            out = lab.directory / f"iperf3-client-{port}.json"
            outputs.append(out)
            with out.open("wb") as stdout:
                argv = client_argv(binary, target, port, settings, per_process)
                launched.append(time.monotonic())
                clients.append(lab.start(client, argv, stdout=stdout))
        watched = {f"iperf3-server:{port}": s.proc.pid for port, s in servers.items()}
        watched |= {f"iperf3-client:{port}": c.pid for port, c in zip(ports, clients, strict=True)}
        on_started(watched, time.monotonic())
        ended = waiting.wait_exited(
            [(f"iperf3 client on port {port}", c) for port, c in zip(ports, clients, strict=True)],
            settings.warmup + settings.duration + 20,
            stop_reason,
        )
        lifetimes = [end - start for start, end in zip(launched, ended, strict=True)]
        check_aligned(dict(zip(ports, lifetimes, strict=True)), settings.duration)
        docs = [_load(path) for path in outputs]
        measured = [iperf3_json.parse(doc, settings.duration) for doc in docs]
        return _combine(mode, measured, docs)


def _combine(
    mode: StreamMode, measured: list[iperf3_json.ProcessMeasurement], docs: list[dict[str, Any]]
) -> TrafficResult:
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
    )


def aligned_tolerance(duration: float) -> float:
    """How much longer (s) one client may run than another and still be summed."""
    return max(ALIGNMENT_FLOOR_S, ALIGNMENT_SHARE * duration)


def check_aligned(lifetimes: dict[int, float], duration: float) -> None:
    """Refuse to sum clients whose measuring windows did not coincide.

    Each iperf3 process measures its own window from the moment its streams connect.
    When a connection is delayed (a SYN dropped by a small queue costs a one-second
    retransmission timeout), that process measures later than the others and partly
    alone, and the sum of the per-process rates overstates what the link carried at
    any one time: 4 processes through a 100 Mbit/s tbf with a 5-packet queue summed to
    117-131 Mbit/s. Every client runs for the same test time once connected, so a
    delayed connection shows as a longer lifetime (launch to exit). The launch order
    itself staggers the windows by the few milliseconds each start takes; that is not
    counted here (it is what ``stream_mode = single`` avoids entirely).
    """
    if len(lifetimes) < 2:
        return
    spread = max(lifetimes.values()) - min(lifetimes.values())
    if spread > aligned_tolerance(duration):
        late = max(lifetimes, key=lambda port: lifetimes[port])
        raise LabError(
            f"iperf3 client on port {late} ran {spread:.2f} s longer than another: its"
            " connection was delayed (probably a dropped packet), so the clients measured"
            " in different windows and their goodputs cannot be summed; use"
            " traffic.stream_mode = single, which measures all streams in one window"
        )


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text(errors="replace")
    try:
        doc: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError:
        raise LabError(f"iperf3 wrote no JSON: {text.strip()[:200] or 'empty output'}") from None
    return doc


@functools.cache
def _version_line(binary: str) -> str:
    return run([binary, "--version"]).stdout.strip().splitlines()[0]
