"""One trial on real hosts: an iperf3 server on a free port of the server, the client's
iperf3 across the DUT (and the tunnel), the lab's pings from the client, the samplers on
every host, the counters before and after; the figures held against the hosts' own
counters.

The DUT's cores are the trial's ``cpu<N>.*`` metrics (the machine the verdict is about);
the endpoints' busiest core and the processes the trial started on them (the generator
named as the lab names its own), every host's sampler cost, the DUT's temperatures and
clocks, its busiest processes and queues, the WAN ends' queues and every host's link and
TCP counters are stored beside them.
"""

import contextlib
import json
import logging
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tunnelbench.bench.runner import traffic_metrics
from tunnelbench.errors import LabError
from tunnelbench.kinds import Generator, Protocol, StreamMode
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import TrafficSettings, TrialConfig
from tunnelbench.probes import rtt, tcp
from tunnelbench.probes.devices import TUNNEL, WAN
from tunnelbench.probes.qdisc import COUNTERS as QDISC_COUNTERS
from tunnelbench.probes.qdisc import RootQdisc, parse_qdiscs
from tunnelbench.remote import probes, snmp
from tunnelbench.remote.host import SshHost, wait_until
from tunnelbench.remote.session import Session
from tunnelbench.remote.tunnel import RemoteTunnel
from tunnelbench.system.command import side_by_side
from tunnelbench.traffic import iperf2, iperf3, iperf3_json
from tunnelbench.traffic.base import TrafficResult

log = logging.getLogger(__name__)

PORTS = range(5201, 5300)
#: The client's iperf3 may take this long beyond its test to connect and report.
CLIENT_MARGIN_S = 20.0
#: The ends' processes are read this long before the window's end: the generator's test
#: ends with the window, and its processes exit with it (their CPU is read from /proc).
PROCESS_LEAD_S = 0.3
#: The generators as a host's PATH names them (iperf2's program is ``iperf``).
IPERF3, IPERF2 = "iperf3", "iperf"


@dataclass
class RemoteOutcome:
    metrics: dict[str, float]
    artifacts: dict[str, Any]
    #: The server's port and the address the client sent to.
    port: int
    target: str
    #: device -> the DUT's root qdisc kind (empty where it has no ``tc`` with JSON).
    dut_qdiscs: dict[str, str] = field(default_factory=dict)


def measure(
    session: Session,
    tunnel: RemoteTunnel,
    config: TrialConfig,
    seq: int,
    *,
    wan_devices: dict[str, str] | None = None,
) -> RemoteOutcome:
    """One trial. ``wan_devices``: role -> its WAN device where ``lab.wan`` stands on the
    link (:mod:`tunnelbench.remote.wan`): their queues' counters are read, named ``wan``
    as the lab names its own."""
    target = session.file.target(tunnel.kind != "none", config.traffic.family)
    pings, unpinged = _pings(session, config, target, seq)
    try:
        return _measured(session, tunnel, config, seq, wan_devices or {}, pings, unpinged)
    finally:
        if pings is not None:
            pings.abandon()  # a trial that failed first leaves no ping running


def _measured(
    session: Session,
    tunnel: RemoteTunnel,
    config: TrialConfig,
    seq: int,
    wan_devices: dict[str, str],
    pings: rtt.Pings | None,
    unpinged: str | None,
) -> RemoteOutcome:
    # A warm-up of "auto" is a fixed one on real hosts: the window is placed by this
    # machine's clock at the sampler's lines, not watched live (recorded as warmup.s).
    warmup = config.traffic.fixed_warmup
    traffic = replace(config.traffic, warmup=warmup)
    client, server = session.hosts["client"], session.hosts["server"]
    dut = session.file.dut
    tunnelled = tunnel.kind != "none"
    target = session.file.target(tunnelled, traffic.family)
    port = _free_port(server)
    served = _Served.start(server, traffic, port, seq, _udp_length(session, traffic, target))
    seconds = warmup + traffic.duration
    samplers = {
        role: probes.RemoteSampler(host, f"{seq}", seconds + CLIENT_MARGIN_S + 5)
        for role, host in session.hosts.items()
    }
    before = {
        role: probes.parse_counters(h.run(["sh", "-c", probes.COUNTERS]).stdout)
        for role, h in session.hosts.items()
    }
    dut_host = session.hosts.get(dut)  # None: a black box
    box = session.black_boxes.get(dut)
    queued = [role for role in session.hosts if role == dut or role in wan_devices]
    queues_before = {role: _qdiscs(session, role) for role in queued}
    agent = box.agent() if box is not None else None  # (reader, device) of a box's SNMP
    snmp_before = agent[0].snapshot(agent[1]) if agent else None
    marks: dict[str, tuple[float, probes.Counters]] = {}
    snmp_marks: dict[str, snmp.Snapshot] = {}
    tcp_marks: dict[str, dict[str, str]] = {}
    own_marks: dict[str, dict[str, tuple[float, probes.Counters]]] = {"begin": {}, "last": {}}

    def snapshot(name: str) -> None:
        """The window's edge: the endpoints' TCP counters and their generator processes,
        the DUT's processes (or its SNMP counters), read side by side: one after the
        other, each read over SSH on a loaded machine moved the window's edge by a tenth
        of a second or more."""

        def dut_read() -> str:  # keeps its figures itself; "" for side_by_side's one type
            if dut_host is not None:
                text = dut_host.run(["sh", "-c", probes.COUNTERS]).stdout
                marks[name] = (time.monotonic(), probes.parse_counters(text))
            elif agent is not None:
                snmp_marks[name] = agent[0].snapshot(agent[1])
            return ""

        def tcp_read(role: str) -> Callable[[], str]:
            host = session.hosts[role]
            # At the window's start its processes too (they end with it: last_processes).
            own = probes.OWN_PROCESSES if name == "begin" else ""
            script = f"{host.env()}cat /proc/net/snmp /proc/net/netstat\n{own}"

            def read() -> str:
                text = host.run(["sh", "-c", script]).stdout
                counters, marked, processes = text.partition(probes.PROCESSES_MARK)
                if marked:
                    own_marks[name][role] = (time.monotonic(), probes.parse_counters(processes))
                return counters

            return read

        try:
            *texts, _ = side_by_side([tcp_read("client"), tcp_read("server"), dut_read])
            tcp_marks[name] = dict(zip(("client", "server"), texts, strict=True))
        except LabError:
            pass  # a figure of the window is then missing, never made up

    def last_processes() -> None:
        """The ends' processes while they still run (see :data:`PROCESS_LEAD_S`)."""

        def read(role: str) -> Callable[[], str]:
            host = session.hosts[role]

            def reading() -> str:
                text = host.run(["sh", "-c", host.env() + probes.OWN_PROCESSES]).stdout
                own_marks["last"][role] = (time.monotonic(), probes.parse_counters(text))
                return ""

            return reading

        with contextlib.suppress(LabError):  # their figures are then missing, never made up
            side_by_side([read("client"), read("server")])

    timers = [
        threading.Timer(warmup, snapshot, ("begin",)),
        threading.Timer(max(warmup, seconds - PROCESS_LEAD_S), last_processes),
        threading.Timer(seconds, snapshot, ("end",)),
    ]
    started = time.monotonic()
    for timer in timers:
        timer.start()
    if pings is not None:
        pings.started(started + warmup, traffic.duration)
    argv = served.client_argv(target)
    try:
        done = client.run(client.recorded(argv), check=False, timeout=seconds + CLIENT_MARGIN_S)
    finally:
        for timer in timers:
            timer.cancel()
        results = {role: s.stop() for role, s in samplers.items()}
    ended = time.monotonic()
    after = {
        role: probes.parse_counters(h.run(["sh", "-c", probes.COUNTERS]).stdout)
        for role, h in session.hosts.items()
    }
    result = served.result(argv, done, target)
    artifacts: dict[str, Any] = {}
    ping_metrics: dict[str, float] = {}
    if pings is not None:
        try:
            reading = pings.finish()
            ping_metrics, artifacts["ping"] = reading.metrics, reading.raw
        except LabError as exc:
            unpinged = str(exc)
    if unpinged is not None:
        log.warning("round-trip times not measured: %s", unpinged)
        artifacts["ping"] = {"not_measured": unpinged}
    window_begin = started + warmup
    window_end = min(ended, window_begin + traffic.duration)
    metrics = traffic_metrics(result) | ping_metrics
    metrics |= _host_metrics(session, results, window_begin, window_end)
    if "begin" in marks and "end" in marks:
        (t0, first), (t1, last) = marks["begin"], marks["end"]
        for comm, pct in probes.process_cpu(first, last, t1 - t0).items():
            metrics[metric.process(f"{comm}@{dut}")] = pct
    metrics |= _generator_metrics(own_marks, traffic.generator)
    if "begin" in tcp_marks and "end" in tcp_marks:
        metrics |= tcp.window_metrics(tcp_marks["begin"], tcp_marks["end"])
    metrics |= _counter_metrics(before, after, tunnel.devices if tunnelled else {})
    if agent is not None and snmp_before is not None:
        # The interfaces over the whole trial, as a host's over SSH, read once the agent's
        # cache cannot still hold a value from before the traffic ended; the CPU over the
        # window, where its counters covered enough of it.
        reader, device = agent
        cache = session.file.hosts[dut].snmp_cache
        time.sleep(max(0.0, ended + cache - time.monotonic()))
        metrics |= snmp.link_metrics(dut, device, snmp_before, reader.snapshot(device))
        if {"begin", "end"} <= snmp_marks.keys():
            opened, closed = snmp_marks["begin"], snmp_marks["end"]
            metrics |= snmp.cpu_metrics(dut, device, opened, closed, cache)
            metrics[metric.snmp(dut, metric.SNMP_WINDOW)] = round(closed.at - opened.at, 3)
    qdiscs: dict[str, str] = {}
    for role in queued:
        roots_then, roots_now = queues_before[role], _qdiscs(session, role)
        if roots_then is None or roots_now is None:
            continue
        names = {wan_devices[role]: WAN} if role in wan_devices else {}
        if tunnelled and role in tunnel.devices:
            names[tunnel.devices[role]] = TUNNEL
        metrics |= _qdisc_metrics(role, roots_then, roots_now, names)
        if role == dut:
            qdiscs = {dev: q.kind for dev, q in sorted(roots_now.items())}
    _check_counters(session, metrics, traffic.duration)
    artifacts |= {traffic.generator.value: result.raw, "intervals": result.intervals_bps}
    return RemoteOutcome(metrics, artifacts, port, target, qdiscs)


def _pings(
    session: Session, config: TrialConfig, target: str, seq: int
) -> tuple[rtt.Pings | None, str | None]:
    """The lab's pings (:class:`tunnelbench.probes.rtt.Pings`) from the client to where
    the generator sends, begun: the idle round trips taken and the loaded ping running;
    else why they cannot be (a client whose ping or date cannot stamp time: busybox's;
    a target that answers no ping), which the trial records instead of round trips."""
    client = session.hosts["client"]
    try:
        pings = rtt.Pings(
            client,
            client.directory,
            target,
            config.traffic.family,
            rtt.reply_timeout(config.lab.wan),
            clock_offset=clock_offset(client),
            tag=f".{seq}",
        )
        pings.begin()
    except LabError as exc:
        return None, str(exc)
    return pings, None


def clock_offset(host: SshHost) -> float:
    """The host's wall clock minus this machine's, in seconds: its ``date`` read halfway
    through one command over SSH (off by at most half that command's round trip). ping
    stamps its replies with the host's clock; the window is this machine's."""
    before = time.time()
    text = host.run(["date", "+%s.%N"]).stdout.strip()
    after = time.time()
    if not re.fullmatch(r"\d+\.\d{9}", text):
        raise LabError(
            f"{host.name}: `date +%s.%N` said {text[:40]!r}: no sub-second clock to place"
            " ping's timestamps in the window"
        )
    return float(text) - (before + after) / 2


def _generator_metrics(
    marks: dict[str, dict[str, tuple[float, probes.Counters]]], generator: Generator
) -> dict[str, float]:
    """The CPU of the processes the trial started on the client and the server over the
    window (up to :data:`PROCESS_LEAD_S` before its end), as the lab names its own: the
    generator as ``iperf3-client@client`` (its labels' prefix is the generator's, so the
    rules know it), any other (a tunnel's daemon at an end) as ``comm@role``."""
    programs = {IPERF3, IPERF2}
    metrics: dict[str, float] = {}
    for role, (t0, first) in marks["begin"].items():
        if role not in marks["last"]:
            continue
        t1, last = marks["last"][role]
        for comm, pct in probes.process_cpu(first, last, t1 - t0).items():
            label = f"{generator.value}-{role}@{role}" if comm in programs else f"{comm}@{role}"
            metrics[metric.process(label)] = pct
    return metrics


def _qdiscs(session: Session, role: str) -> dict[str, RootQdisc] | None:
    """A host's root qdiscs (``tc -s -j``), or None where it has no ``tc`` or one without
    JSON output (busybox has no tc; OpenWrt's tc-tiny may lack -j): then not recorded."""
    if "tc" not in session.facts[role].programs:
        return None
    done = session.hosts[role].run(["tc", "-s", "-j", "qdisc", "show"], check=False)
    if done.returncode != 0:
        return None
    try:
        return parse_qdiscs(done.stdout)
    except (ValueError, KeyError, TypeError):
        return None


def _qdisc_metrics(
    role: str,
    before: dict[str, RootQdisc],
    after: dict[str, RootQdisc],
    names: dict[str, str] | None = None,
) -> dict[str, float]:
    """``qdisc.<role>.<device>.<counter>`` over the trial, for each root qdisc that was
    the same one before and after (a qdisc replaced meanwhile measured nothing whole);
    a device in ``names`` by the lab's name for it (the tunnel's ``tunnel``, as
    :func:`_counter_metrics` names it; the WAN link's ``wan``)."""
    metrics: dict[str, float] = {}
    for device, new in after.items():
        old = before.get(device)
        if old is None or (old.kind, old.handle) != (new.kind, new.handle):
            continue
        name_as = (names or {}).get(device, device)
        for name in QDISC_COUNTERS:
            metrics[metric.qdisc(role, name_as, name)] = new.values[name] - old.values[name]
    return metrics


def _free_port(host: SshHost) -> int:
    """A port of :data:`PORTS` no TCP listener and no UDP socket holds (iperf2 serves UDP
    tests on the port itself)."""
    used = _listening(host) | _listening(host, udp=True)
    free = [p for p in PORTS if p not in used]
    if not free:
        raise LabError(f"{host.name}: no free port in {PORTS.start}-{PORTS.stop - 1}")
    return random.choice(free)


def _listening(host: SshHost, udp: bool = False) -> set[int]:
    """TCP ports in LISTEN (state 0A) on the host, from /proc/net/tcp{,6}; with ``udp``
    the UDP ports bound and unconnected (state 07: a server waiting for datagrams)."""
    files = ["/proc/net/udp", "/proc/net/udp6"] if udp else ["/proc/net/tcp", "/proc/net/tcp6"]
    text = host.run(["cat", *files], check=False).stdout
    state = "07" if udp else "0A"
    ports = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3] == state and ":" in parts[1]:
            ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


@dataclass
class _Served:
    """The trial's generator server on the server host, and how its client is run and
    read: the lab's own command lines and parsers for iperf3 and iperf2."""

    host: SshHost
    traffic: TrafficSettings
    port: int
    argv: list[str]
    proc: "subprocess.Popen[bytes]"
    out: Path
    err: Path
    udp_length: int | None  # iperf2's UDP datagram payload (both ends are given it)

    @classmethod
    def start(
        cls, host: SshHost, traffic: TrafficSettings, port: int, seq: int, length: int | None
    ) -> "_Served":
        generator = traffic.generator
        out = host.directory / f"server.{seq}.out"
        err = host.directory / f"server.{seq}.err"
        if generator is Generator.IPERF3:
            argv = iperf3.server_argv(IPERF3, port)
        else:
            argv = iperf2.server_argv(IPERF2, port, traffic, traffic.streams, length)
        proc = host.spawn(argv, stdout=out, stderr=err)
        # iperf3 takes UDP tests over its TCP control connection; iperf2 serves UDP itself.
        udp = generator is Generator.IPERF2 and traffic.protocol is Protocol.UDP
        if not wait_until(lambda: port in _listening(host, udp), 5.0, 0.1):
            said = host.run(["cat", str(out), str(err)], check=False).stdout[-300:]
            raise LabError(f"server: {generator.value} did not listen on port {port}: {said}")
        return cls(host, traffic, port, argv, proc, out, err, length)

    def client_argv(self, target: str) -> list[str]:
        if self.traffic.generator is Generator.IPERF3:
            return iperf3.client_argv(IPERF3, target, self.port, self.traffic, self.traffic.streams)
        return iperf2.client_argv(
            IPERF2, target, self.port, self.traffic, self.traffic.streams, self.udp_length
        )

    def result(
        self, argv: list[str], done: "subprocess.CompletedProcess[str]", target: str
    ) -> TrafficResult:
        """What the generator measured: iperf3's JSON report (its server's included), or
        iperf2's CSV of both ends once its server has exited; checked as in the lab."""
        if self.traffic.generator is Generator.IPERF3:
            doc = _document(done.stdout, done.stderr)
            parsed = iperf3_json.parse(doc, self.traffic.duration)
            return iperf3.combine(StreamMode.SINGLE, [parsed], [doc])
        try:
            self.proc.wait(timeout=iperf2.SERVER_EXIT_S)
        except subprocess.TimeoutExpired:
            raise LabError(
                f"iperf2 server on port {self.port} did not exit after its client"
            ) from None
        records = [
            {"role": "client", "argv": argv, "returncode": done.returncode,
             "stdout": done.stdout, "stderr": done.stderr},
            {"role": "server", "argv": self.argv, "returncode": self.proc.returncode,
             "stdout": self.host.read(self.out), "stderr": self.host.read(self.err)},
        ]  # fmt: skip
        iperf2.check_exit("client", done.returncode, done.stderr)
        iperf2.check_exit("server", self.proc.returncode, str(records[1]["stderr"]))
        measured = iperf2.measure(records, self.traffic, target, self.port)
        return iperf2.result(measured, records)


def _udp_length(session: Session, traffic: TrafficSettings, target: str) -> int | None:
    """iperf2's UDP datagram payload, as in the lab: what iperf3 would send on the path
    between the client and the server (the client's route to ``target``, the server's
    back to the client's source address); None for TCP and iperf3."""
    if traffic.generator is not Generator.IPERF2 or traffic.protocol is not Protocol.UDP:
        return None
    client, server = session.hosts["client"], session.hosts["server"]
    family = traffic.family
    words = client.run(["ip", f"-{family}", "route", "get", target]).stdout.split()
    if "src" not in words[:-1]:
        raise LabError(f"client: its route to {target} names no source address")
    source = words[words.index("src") + 1]
    mtu = iperf2.path_mtu([(client, target), (server, source)], family)
    return iperf2.udp_length(mtu, family)


def _document(stdout: str, stderr: str) -> dict[str, Any]:
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError:
        tail = (stderr or stdout).strip().splitlines()
        raise LabError(
            f"client: iperf3 gave no JSON report ({tail[-1] if tail else 'no output'})"
        ) from None
    if not isinstance(doc, dict):
        raise LabError("client: iperf3's report is not a JSON object")
    return doc


def _host_metrics(
    session: Session, results: dict[str, probes.SamplerResult], begin: float, end: float
) -> dict[str, float]:
    metrics: dict[str, float] = {}
    dut = session.file.dut
    for role, result in results.items():
        if result.cost_pct is not None:
            metrics[metric.remote(role, "sampler_cpu_pct")] = round(result.cost_pct, 2)
        figures = probes.window(result.samples, begin, end)
        if figures is None:
            raise LabError(
                f"{role}: the CPU sampler sent {len(result.samples)} samples, too few for the"
                " measured window (a slow or lost SSH connection)"
            )
        metrics[metric.remote(role, "samples")] = figures.samples
        busiest = max(figures.cores.values(), key=lambda parts: -parts["idle"])
        metrics[metric.remote(role, "busiest_core_pct")] = round(100.0 - busiest["idle"], 2)
        if role != dut:
            continue
        for core, parts in figures.cores.items():
            for part, value in parts.items():
                metrics[metric.cpu(core, part)] = round(value, 2)
        for core, mhz in figures.mhz_mean.items():
            metrics[metric.cpu(core, "mhz")] = mhz
            metrics[metric.cpu(core, "mhz_min")] = figures.mhz_min[core]
        for zone, celsius in figures.temp_max_c.items():
            metrics[metric.thermal_max(role, zone)] = celsius
        metrics[metric.SAMPLER_SAMPLES.name] = figures.samples
        metrics[metric.SAMPLER_WINDOW.name] = round(end - begin, 3)
        if result.cost_pct is not None:
            metrics[metric.SAMPLER_CPU.name] = round(result.cost_pct, 2)
    return metrics


def _counter_metrics(
    before: dict[str, probes.Counters],
    after: dict[str, probes.Counters],
    tunnel_devices: dict[str, str],
) -> dict[str, float]:
    """Each host's interfaces and TCP counters over the trial. An end's tunnel device is
    named ``tunnel``, as the lab names its own (:mod:`tunnelbench.probes.devices`), so
    the drop rules tell its queue from the others on real hosts too; every other
    interface by the host's own name."""
    metrics: dict[str, float] = {}
    for role, end in after.items():
        start = before[role]
        for device, values in end.links.items():
            if device not in start.links or device == "lo":
                continue
            name_as = TUNNEL if tunnel_devices.get(role) == device else device
            for name, a, b in zip(probes.LINK_FIELDS, values, start.links[device], strict=True):
                metrics[metric.link(role, name_as, name)] = a - b
        if "RetransSegs" in end.tcp and "RetransSegs" in start.tcp:
            retransmitted = end.tcp["RetransSegs"] - start.tcp["RetransSegs"]
            metrics[metric.tcp(role, "retrans_segs")] = retransmitted
    return metrics


def _check_counters(session: Session, metrics: dict[str, float], duration: int) -> None:
    """The second instrument: the bytes iperf3 says crossed must have crossed the DUT.
    Its busiest interface sent at least the goodput's bytes over the measured seconds
    (the counters span more: warm-up, set-up, headers). A black box whose counters were
    not read (no SNMP) is checked from outside: the receiving ends' interfaces received
    at least what iperf3 says arrived there."""
    dut = session.file.dut
    sent = _link_counts(metrics, dut, "tx_bytes")
    if sent or dut not in session.black_boxes:
        delivered = metrics[metric.GOODPUT.name] * duration / 8
        if not sent or max(sent) < delivered:
            raise LabError(
                f"the DUT ({dut}) sent {max(sent, default=0):,.0f} bytes on its busiest"
                f" interface, fewer than the {delivered:,.0f} iperf3 reports delivered: the"
                f" traffic did not cross {dut} (check the route from the client to the"
                " server's address)"
            )
        return
    for receiver, name in (("server", metric.UPLOAD.name), ("client", metric.DOWNLOAD.name)):
        arrived = metrics.get(name, 0.0) * duration / 8
        received = _link_counts(metrics, receiver, "rx_bytes")
        if arrived and max(received, default=0) < arrived:
            raise LabError(
                f"the {receiver} received {max(received, default=0):,.0f} bytes on its busiest"
                f" interface, fewer than the {arrived:,.0f} iperf3 reports arrived there"
            )


def _link_counts(metrics: dict[str, float], role: str, field: str) -> list[float]:
    """``field`` of each of ``role``'s interfaces (``link.<role>.<device>.<field>``)."""
    found = []
    for name, value in metrics.items():
        device = metric.parse_device(name, "link")
        if device is not None and device[1] == field and device[0].startswith(f"{role}."):
            found.append(value)
    return found
