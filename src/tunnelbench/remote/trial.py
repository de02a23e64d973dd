"""One trial on real hosts: the lab's generator run between the client and the server
and the lab's trial probes on every host (:class:`HostsEnds`: the same code, windows and
stops as in the lab; the pings from the client; interfaces, queues and TCP counters before
and after), the samplers on every host; the figures held against the hosts' own counters.

The DUT's cores are the trial's ``cpu<N>.*`` metrics (the machine the verdict is about);
the endpoints' busiest core and the processes the trial started on them (the generator
named as the lab names its own), every host's sampler cost, the DUT's temperatures and
clocks, its busiest processes and queues, the WAN ends' queues and every host's link and
TCP counters are stored beside them.
"""

import contextlib
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tunnelbench.bench.runner import traffic_artifacts, traffic_metrics, warmup_fallback
from tunnelbench.errors import LabError
from tunnelbench.kinds import Generator, StreamMode
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import TrialConfig
from tunnelbench.probes import links, new_probe_set, tcp
from tunnelbench.probes.devices import TUNNEL, WAN, DeviceNames
from tunnelbench.probes.qdisc import QdiscProbe
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.trial import ProbeContext, ProbeSet
from tunnelbench.remote import probes, snmp_watch
from tunnelbench.remote.host import SshHost
from tunnelbench.remote.session import Session, SessionRoles
from tunnelbench.remote.tunnel import RemoteTunnel
from tunnelbench.system.command import side_by_side
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.traffic import iperf3, waiting
from tunnelbench.traffic.base import WindowClosed, no_reason

log = logging.getLogger(__name__)

#: The client's iperf3 may take this long beyond its test to connect and report.
CLIENT_MARGIN_S = 20.0
#: How long past the window a generator that ended by itself waits for the window's
#: closing readings (over SSH, side by side).
CLOSE_WAIT_S = 5.0
#: The ends' processes are read this long before the window's end: the generator's test
#: ends with the window, and its processes exit with it (their CPU is read from /proc).
PROCESS_LEAD_S = 0.3
#: The most bytes one counted packet can carry: Linux's largest GSO/GRO aggregate (BIG
#: TCP's 512 KiB), so a packet count times this bounds the bytes it can stand for.
LARGEST_PACKET = 512 * 1024
#: The generators as a host's PATH names them (iperf2's program is ``iperf``).
IPERF3, IPERF2 = "iperf3", "iperf"


@dataclass
class RemoteOutcome:
    metrics: dict[str, float]
    artifacts: dict[str, Any]
    #: The server's ports the generator took, and the address the client sent to.
    ports: list[int]
    target: str
    #: device -> the DUT's root qdisc kind (empty where it has no ``tc`` with JSON).
    dut_qdiscs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HostsEnds(SessionRoles):
    """A hosts file's client and server as a generator's
    :class:`~tunnelbench.traffic.base.Ends`, and its hosts as the trial probes'
    :class:`~tunnelbench.probes.trial.Machines`: the generator and the probes run on them
    as they run in the lab, their programs as each host's PATH finds them, their files in
    the run's directory there."""

    session: Session
    tunnelled: bool
    #: The ports :meth:`free_ports` handed out, in order.
    taken: list[int] = field(default_factory=list)
    #: role -> whether its ``tc`` prints JSON.
    tc_json: dict[str, bool] = field(default_factory=dict)

    def server_address(self, family: int) -> str:
        return self.session.file.target(self.tunnelled, family)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.session.hosts)

    def has(self, role: str, program: str) -> bool:
        """In the host's PATH; ``tc`` only where it prints JSON (OpenWrt's tc-tiny may
        not), asked once a trial."""
        if program not in self.session.facts[role].programs:
            return False
        if program == "tc" and role not in self.tc_json:
            done = self.session.hosts[role].run(["tc", "-j", "qdisc", "show"], check=False)
            self.tc_json[role] = done.returncode == 0 and done.stdout.lstrip().startswith("[")
        return self.tc_json.get(role, True)

    def clock_offset(self, role: str) -> float:
        return clock_offset(self.session.hosts[role])

    def free_ports(self, role: str, ports: range, count: int) -> list[int]:
        """Chosen at random among the free ones: another program (or another run) on a
        real host may take ports as this one does."""
        used = waiting.bound_ports(self.session.hosts[role])
        free = [port for port in ports if port not in used]
        if len(free) < count:
            raise LabError(
                f"{role}: {len(free)} free port(s) in {ports.start}-{ports.stop - 1},"
                f" {count} needed"
            )
        ports_now = sorted(random.sample(free, count))
        self.taken.extend(ports_now)
        return ports_now


def measure(
    session: Session,
    tunnel: RemoteTunnel,
    config: TrialConfig,
    mode: StreamMode,
    seq: int,
    *,
    wan_devices: dict[str, str] | None = None,
) -> RemoteOutcome:
    """One trial, its generator run in ``mode`` (:meth:`Generator.resolve_mode` for
    the client's version). ``wan_devices``: role -> its WAN device where ``lab.wan``
    stands on the link (:mod:`tunnelbench.remote.wan`): named ``wan`` in the counters,
    as the lab names its own."""
    ends = HostsEnds(session, tunnel.kind != "none")
    probe_set = new_probe_set()
    box = session.black_boxes.get(session.file.dut)
    agent = box.agent() if box is not None else None  # (reader, device) of a box's SNMP
    # Polled from before the traffic to a refresh after it (snmp_watch).
    watch = snmp_watch.Watch(*agent) if agent else None
    try:
        return _measured(
            session, ends, tunnel, config, mode, seq, wan_devices or {}, probe_set, watch
        )
    finally:
        probe_set.abandon()  # a trial that failed first leaves no ping running
        if watch is not None:
            watch.stop()


def _measured(
    session: Session,
    ends: HostsEnds,
    tunnel: RemoteTunnel,
    config: TrialConfig,
    mode: StreamMode,
    seq: int,
    wan_devices: dict[str, str],
    probe_set: ProbeSet,
    watch: snmp_watch.Watch | None,
) -> RemoteOutcome:
    traffic = config.traffic
    generator = GENERATORS.get(traffic.generator)
    dut = session.file.dut
    tunnel_devices = tunnel.devices if ends.tunnelled else {}
    known: dict[str, dict[str, str]] = {}
    for role, wan in wan_devices.items():
        known.setdefault(role, {})[wan] = WAN
    for role, dev in tunnel_devices.items():
        known.setdefault(role, {})[dev] = TUNNEL
    context = ProbeContext(
        dict(tunnel_devices), traffic, config.lab.wan, DeviceNames.hosts(known), lenient=True
    )
    # The samplers outlast the longest the generator may run.
    warmup = traffic.warmup_max if traffic.warmup is None else traffic.fixed_warmup
    seconds = warmup + traffic.duration + iperf3.AUTO_MARGIN_S + CLIENT_MARGIN_S
    samplers = {
        role: probes.RemoteSampler(host, f"{seq}", seconds + 5)
        for role, host in session.hosts.items()
    }
    dut_host = session.hosts.get(dut)  # None: a black box
    marks: dict[str, tuple[float, probes.Processes]] = {}
    tcp_marks: dict[str, dict[str, str]] = {}
    own_marks: dict[str, dict[str, tuple[float, probes.Processes]]] = {"begin": {}, "last": {}}

    def snapshot(name: str) -> None:
        """The window's edge: the endpoints' TCP counters and their generator processes,
        the DUT's processes, read side by side: one after the other, each read over SSH
        on a loaded machine moved the window's edge by a tenth of a second or more."""

        def dut_read() -> str:  # keeps its figures itself; "" for side_by_side's one type
            if dut_host is not None:
                text = dut_host.run(["sh", "-c", probes.PROCESSES]).stdout
                marks[name] = (time.monotonic(), probes.parse_processes(text))
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
                    own_marks[name][role] = (time.monotonic(), probes.parse_processes(processes))
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
                own_marks["last"][role] = (time.monotonic(), probes.parse_processes(text))
                return ""

            return reading

        with contextlib.suppress(LabError):  # their figures are then missing, never made up
            side_by_side([read("client"), read("server")])

    window: list[float] = []  # its begin, once the generator knows it (the last one)
    closed = threading.Event()
    timers: list[threading.Timer] = []
    asked = [0]  # the windows asked for: only the last one's closing counts

    def on_started(processes: dict[str, int], begin: float) -> WindowClosed:
        """The window is known (``processes``: local PIDs of the ``ssh`` processes that
        stand for the generator's; the ends' own are read on the hosts instead): the
        edges' readings are timed to it, the probes told. Called again, the window moves:
        the earlier one's readings still to come are cancelled, and each edge is read
        again for the new one (its readings replace the earlier ones)."""
        for timer in timers:
            timer.cancel()
        timers.clear()
        closed.clear()
        asked[0] += 1
        mine, end = asked[0], begin + traffic.duration

        def closing() -> None:
            snapshot("end")
            if asked[0] == mine:
                closed.set()

        for at, work, args in (
            (begin, snapshot, ("begin",)),
            (max(begin, end - PROCESS_LEAD_S), last_processes, ()),
            (end, closing, ()),
        ):
            timer = threading.Timer(max(0.0, at - time.monotonic()), work, args)
            timers.append(timer)
            timer.start()
        window[:] = [begin]
        probe_set.started(begin)
        return closed.wait

    try:
        if watch is not None:
            watch.start()
        probe_set.before(ends, context)
        pings = [p for p in probe_set.probes if isinstance(p, RttProbe)]
        signals = pings[0].signals() if pings else None
        traffic_from = time.monotonic()
        result = generator.run(ends, traffic, mode, on_started, no_reason, signals)
        # A generator that ran its own time may end as the window does: its closing
        # readings are still taken.
        closed.wait(max(0.0, window[0] + traffic.duration - time.monotonic()) + CLOSE_WAIT_S)
    finally:
        for timer in timers:
            timer.cancel()
        results = {role: s.stop() for role, s in samplers.items()}
    ended = time.monotonic()
    readings = probe_set.after()
    window_begin = window[0]
    window_end = min(ended, window_begin + traffic.duration)
    metrics = traffic_metrics(result) | warmup_fallback(traffic, result) | readings.metrics
    metrics |= _host_metrics(session, results, window_begin, window_end)
    if "begin" in marks and "end" in marks:
        (t0, first), (t1, last) = marks["begin"], marks["end"]
        for comm, pct in probes.process_cpu(first, last, t1 - t0).items():
            metrics[metric.process(f"{comm}@{dut}")] = pct
    metrics |= _generator_metrics(own_marks, traffic.generator)
    if "begin" in tcp_marks and "end" in tcp_marks:
        metrics |= tcp.window_metrics(tcp_marks["begin"], tcp_marks["end"])
    agent_record: dict[str, Any] = {}
    if watch is not None:
        # The interfaces over the whole trial, as a host's over SSH, up to the agent's
        # first refresh after the traffic; the CPU between refreshes within the traffic.
        watch.close(ended, session.file.hosts[dut].snmp_cache)
        found = snmp_watch.figures(
            dut, watch.device, watch.polls, traffic_from=traffic_from, begin=window_begin,
            end=window_end, ended=ended,
        )  # fmt: skip
        metrics |= found.metrics
        for note in found.notes:
            log.warning("trial %d: %s", seq, note)
        agent_record = {"snmp": found.record | {"notes": found.notes}}
    _check_counters(session, metrics, traffic.duration)
    artifacts = traffic_artifacts(traffic, result) | {"probe_readings": readings.raw()}
    artifacts |= agent_record
    queues = next(p for p in probe_set.probes if isinstance(p, QdiscProbe))
    qdiscs = {dev: q.kind for dev, q in sorted(queues.roots.get(dut, {}).items())}
    return RemoteOutcome(
        metrics, artifacts, ends.taken, ends.server_address(traffic.family), qdiscs
    )


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
    marks: dict[str, dict[str, tuple[float, probes.Processes]]], generator: Generator
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


def _check_counters(session: Session, metrics: dict[str, float], duration: int) -> None:
    """The second instrument (:func:`tunnelbench.probes.links.check_forwarded`): the DUT
    forwarded at least what the generator says arrived. A black box is checked from
    outside first (the receiving ends' interfaces received at least what the generator
    reports arrived there), then by its SNMP agent where one was read. Each refusal names
    the instruments that disagree; an agent whose byte count alone falls short, while its
    packets show the traffic crossed the box, fails nothing: its byte counts are dropped
    from ``metrics`` and a warning says so."""
    dut = session.file.dut
    if dut not in session.black_boxes:
        links.check_forwarded(metrics, [dut], duration)
        return
    for receiver, name in (("server", metric.UPLOAD.name), ("client", metric.DOWNLOAD.name)):
        arrived = metrics.get(name, 0.0) * duration / 8
        received = links.busiest(metrics, receiver, "rx_bytes") or 0
        if arrived and received < arrived:
            raise LabError(
                f"the {receiver}'s kernel counted {received:,.0f} bytes received on its busiest"
                f" interface, fewer than the {arrived:,.0f} the generator reports arrived there"
            )
    packets = links.busiest(metrics, dut, "tx_packets")
    if packets is None:  # its agent's counters were not read
        return
    arrived = links.arrived_bytes(metrics, duration)
    sent = links.busiest(metrics, dut, "tx_bytes")
    # Refreshes it discarded: the bytes of those interfaces are already left out.
    discarded = bool(metrics.get(metric.snmp(dut, metric.SNMP_DISCARDED)))
    if sent is not None and sent >= arrived and not discarded:
        return
    agent = f"{dut}'s SNMP agent"
    if packets * LARGEST_PACKET < arrived:
        raise LabError(
            f"{agent} counted {packets:,.0f} packets out of {dut}'s busiest interface, too few"
            f" for the {arrived:,.0f} bytes the generator reports arrived (and the ends'"
            f" kernels received) even as {LARGEST_PACKET // 1024} KiB aggregates: the"
            f" traffic did not cross {dut}, or its agent miscounts (check the route from the"
            " client to the server's address)"
        )
    if discarded:  # said with the agent's figures (snmp_watch)
        return
    for name in list(metrics):
        device = metric.parse_device(name, "link")
        if device is not None and device[0].startswith(f"{dut}.") and device[1].endswith("_bytes"):
            del metrics[name]
    log.warning(
        "%s counted %s bytes out of %s's busiest interface, fewer than the %s the generator"
        " reports arrived (and the ends' kernels received), while its packets show the"
        " traffic crossed: the agent's byte counts are not stored",
        agent, f"{sent or 0:,.0f}", dut, f"{arrived:,.0f}",
    )  # fmt: skip
