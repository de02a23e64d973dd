"""A hosts file's machines as a testbed: the tunnel built (or the user's, used) between
its ends and kept while the trials cross it, ``lab.wan`` set on the real WAN link, the
busybox sampler loop on every host with SSH snapshots at the window's edges (the
endpoints' TCP counters and processes, the DUT's processes), a black box's SNMP agent
watched over the traffic, and the DUT's (or the ends') counters held against the
generator. A host lost mid-run stops the run, with the finished trials kept.
"""

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tunnelbench.bench.testbed import Resolution, Setup, Testbed
from tunnelbench.bench.testbeds import hosts_figures as figures
from tunnelbench.errors import LabError
from tunnelbench.kinds import Generator, TunnelKind, TunnelMode
from tunnelbench.model import metrics as metric
from tunnelbench.model import remotefacts
from tunnelbench.model.plan import TrafficSettings, TrialConfig
from tunnelbench.model.records import Resolved
from tunnelbench.model.remotefacts import CryptoDriver, RemoteFacts, SnmpView
from tunnelbench.probes import tcp
from tunnelbench.probes.devices import TUNNEL, WAN, DeviceNames
from tunnelbench.probes.qdisc import QdiscProbe
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.trial import ProbeContext, ProbeSet
from tunnelbench.remote import probes, snmp_watch, wan
from tunnelbench.remote.ends import HostsEnds
from tunnelbench.remote.session import Session
from tunnelbench.remote.ssh import Unreachable
from tunnelbench.remote.tunnel import RemoteTunnel, for_trial
from tunnelbench.system.command import side_by_side
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.traffic import iperf3
from tunnelbench.traffic.base import PathSignals, WindowClosed

log = logging.getLogger(__name__)

#: The client's iperf3 may take this long beyond its test to connect and report.
CLIENT_MARGIN_S = 20.0
#: How long past the window a generator that ended by itself waits for the window's
#: closing readings (over SSH, side by side).
CLOSE_WAIT_S = 5.0


class HostsTestbed(Testbed):
    """The connected ``session``'s hosts; the tunnel stands from one trial to the next
    while they ask for the same one (the session's cleanup removes the last)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.standing: list[RemoteTunnel] = []  # the built tunnel up now, if any
        self.link = wan.WanLink(session)
        self.trials = 0

    def acquire(
        self, config: TrialConfig, resolution: Resolution | None, resolved: Resolved
    ) -> "HostsSetup":
        session = self.session
        traffic = config.traffic
        tunnel = for_trial(session, config.tunnel, self.standing)
        tunnelled = tunnel.kind is not TunnelKind.NONE
        resolved.setup.implementation = tunnel.implementation
        if tunnelled:
            resolved.setup.version = tunnel.version()
            resolved.setup.mtu = tunnel.mtu
            resolved.record_setup(tunnel.found)
            resolved.tunnel, resolved.setup.cipher = tunnel.kind_facts, tunnel.cipher
        elif (dut := session.facts.get(session.file.dut)) is not None:
            # No tunnel: the kernel that routes is what runs, as the lab records its own.
            resolved.setup.version = f"linux {dut.kernel}"
        resolved.remote = remote_facts(session, tunnel if tunnelled else None)
        # "auto" as the client's generator resolves it (iperf3 before 3.16: a process per
        # stream, as in the lab).
        client = session.facts["client"]
        version = client.iperf3 if traffic.generator is Generator.IPERF3 else client.iperf2
        if version is None:  # never this machine's instead (the run's check needs it)
            raise LabError(f"client: no {traffic.generator.value} version in its facts")
        resolved.traffic.stream_mode = GENERATORS.get(traffic.generator).resolve_mode(
            traffic, version
        )
        self.link.set(config.lab.wan)
        self.trials += 1
        return HostsSetup(session, tunnel, config, self.link.devices, f"{self.trials}")

    def release(self, setup: Setup, *, measured: bool) -> None:
        return None  # the tunnel stays for the next trial; the session removes it

    def stops_run(self, error: LabError) -> str | None:
        if isinstance(error, Unreachable):
            return f"lost a host mid-run: {error}; the finished trials are kept"
        return None


class HostsSetup(Setup):
    """One trial's window on the hosts: a sampler loop on every host from before the
    probes to after the traffic, the edges' readings timed to the generator's window
    (read again when the window moves: only the last window's count), and a black box's
    SNMP agent polled from before the traffic to a refresh after it."""

    def __init__(
        self,
        session: Session,
        tunnel: RemoteTunnel,
        config: TrialConfig,
        wan_devices: dict[str, str],
        name: str,
    ) -> None:
        self.session = session
        self.config = config
        self.name = name
        self.hosts = HostsEnds(session, tunnel.kind is not TunnelKind.NONE)
        self.ends = self.machines = self.hosts
        tunnel_devices = tunnel.devices if self.hosts.tunnelled else {}
        known: dict[str, dict[str, str]] = {}
        for role, device in wan_devices.items():
            known.setdefault(role, {})[device] = WAN
        for role, device in tunnel_devices.items():
            known.setdefault(role, {})[device] = TUNNEL
        self.context = ProbeContext(
            dict(tunnel_devices), config.traffic, config.lab.wan, DeviceNames.hosts(known),
            lenient=True,
        )  # fmt: skip
        box = session.black_boxes.get(session.file.dut)
        agent = box.agent() if box is not None else None  # (reader, device) of a box's SNMP
        self.watch = snmp_watch.Watch(*agent) if agent else None
        self.samplers: dict[str, probes.RemoteSampler] = {}
        self.results: dict[str, probes.SamplerResult] | None = None
        self.traffic_from = 0.0
        self.window: float | None = None  # its begin, once the generator knows it
        self.closed = threading.Event()
        self.timers: list[threading.Timer] = []
        self.asked = 0  # the windows asked for: only the last one's closing counts
        self.marks: dict[str, tuple[float, probes.Processes]] = {}
        self.tcp_marks: dict[str, dict[str, str]] = {}
        self.own_marks: dict[str, dict[str, tuple[float, probes.Processes]]] = {
            "begin": {},
            "last": {},
        }

    def open_window(self) -> None:
        traffic = self.config.traffic
        # The samplers outlast the longest the generator may run.
        warmup = traffic.warmup_max if traffic.warmup is None else traffic.fixed_warmup
        seconds = warmup + traffic.duration + iperf3.AUTO_MARGIN_S + CLIENT_MARGIN_S
        for role, host in self.session.hosts.items():
            self.samplers[role] = probes.RemoteSampler(host, self.name, seconds + 5)
        if self.watch is not None:
            self.watch.start()

    def traffic(self, settings: TrafficSettings) -> TrafficSettings:
        self.traffic_from = time.monotonic()
        return settings

    def signals(self, probes_: ProbeSet) -> PathSignals | None:
        pings = [p for p in probes_.probes if isinstance(p, RttProbe)]
        return pings[0].signals() if pings else None

    def window_opened(self, processes: dict[str, int], begin: float, end: float) -> WindowClosed:
        """``processes``: local PIDs of the ``ssh`` processes that stand for the
        generator's (the ends' own are read on the hosts instead). Called again, the
        window moves: the earlier one's readings still to come are cancelled, and each
        edge is read again for the new one (its readings replace the earlier ones)."""
        self._cancel()
        self.closed.clear()
        self.asked += 1
        mine = self.asked

        def closing() -> None:
            self._snapshot("end")
            if self.asked == mine:
                self.closed.set()

        steps: tuple[tuple[float, Callable[[], None]], ...] = (
            (begin, lambda: self._snapshot("begin")),
            (max(begin, end - figures.PROCESS_LEAD_S), self._last_processes),
            (end, closing),
        )
        for at, work in steps:
            timer = threading.Timer(max(0.0, at - time.monotonic()), work)
            self.timers.append(timer)
            timer.start()
        self.window = begin
        return self.closed.wait

    def close_window(self) -> tuple[dict[str, float], dict[str, Any]]:
        duration = self.config.traffic.duration
        assert self.window is not None  # the generator ran, so it knew its window
        # A generator that ran its own time may end as the window does: its closing
        # readings are still taken.
        self.closed.wait(max(0.0, self.window + duration - time.monotonic()) + CLOSE_WAIT_S)
        self._cancel()
        self._stop_samplers()
        assert self.results is not None
        ended = time.monotonic()
        begin, end = self.window, min(ended, self.window + duration)
        dut = self.session.file.dut
        metrics = figures.host_metrics(self.session, self.results, begin, end)
        if "begin" in self.marks and "end" in self.marks:
            (t0, first), (t1, last) = self.marks["begin"], self.marks["end"]
            for comm, pct in probes.process_cpu(first, last, t1 - t0).items():
                metrics[metric.process(f"{comm}@{dut}")] = pct
        metrics |= figures.generator_metrics(self.own_marks, self.config.traffic.generator)
        if "begin" in self.tcp_marks and "end" in self.tcp_marks:
            metrics |= tcp.window_metrics(self.tcp_marks["begin"], self.tcp_marks["end"])
        if self.watch is None:
            return metrics, {}
        # The interfaces over the whole trial, as a host's over SSH, up to the agent's
        # first refresh after the traffic; the CPU between refreshes within the traffic.
        self.watch.close(ended, self.session.file.hosts[dut].snmp_cache)
        found = snmp_watch.figures(
            dut, self.watch.device, self.watch.polls, traffic_from=self.traffic_from,
            begin=begin, end=end, ended=ended,
        )  # fmt: skip
        for note in found.notes:
            log.warning("%s: %s", dut, note)
        return metrics | found.metrics, {"snmp": found.record | {"notes": found.notes}}

    def stop_window(self) -> None:
        self._cancel()
        self._stop_samplers()
        if self.watch is not None:
            self.watch.stop()

    def check(self, metrics: dict[str, float], seconds: float) -> None:
        figures.check_counters(self.session, metrics, int(seconds))

    def record(self, resolved: Resolved, probes_: ProbeSet) -> None:
        assert resolved.remote is not None
        ends = self.hosts
        resolved.remote.port = ends.taken[0] if ends.taken else None
        resolved.remote.target = ends.server_address(self.config.traffic.family)
        queues = next(p for p in probes_.probes if isinstance(p, QdiscProbe))
        dut = self.session.file.dut
        resolved.remote.dut_qdiscs = {
            dev: q.kind for dev, q in sorted(queues.roots.get(dut, {}).items())
        }

    def _cancel(self) -> None:
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()

    def _stop_samplers(self) -> None:
        if self.results is None:
            self.results = {role: s.stop() for role, s in self.samplers.items()}

    def _snapshot(self, name: str) -> None:
        """The window's edge: the endpoints' TCP counters and their generator processes,
        the DUT's processes, read side by side: one after the other, each read over SSH
        on a loaded machine moved the window's edge by a tenth of a second or more."""
        dut_host = self.session.hosts.get(self.session.file.dut)  # None: a black box

        def dut_read() -> str:  # keeps its figures itself; "" for side_by_side's one type
            if dut_host is not None:
                text = dut_host.run(["sh", "-c", probes.PROCESSES]).stdout
                self.marks[name] = (time.monotonic(), probes.parse_processes(text))
            return ""

        def tcp_read(role: str) -> Callable[[], str]:
            host = self.session.hosts[role]
            # At the window's start its processes too (they end with it: _last_processes).
            own = probes.OWN_PROCESSES if name == "begin" else ""
            script = f"{host.env()}cat /proc/net/snmp /proc/net/netstat\n{own}"

            def read() -> str:
                text = host.run(["sh", "-c", script]).stdout
                counters, marked, processes = text.partition(probes.PROCESSES_MARK)
                if marked:
                    self.own_marks[name][role] = (
                        time.monotonic(),
                        probes.parse_processes(processes),
                    )
                return counters

            return read

        try:
            *texts, _ = side_by_side([tcp_read("client"), tcp_read("server"), dut_read])
            self.tcp_marks[name] = dict(zip(("client", "server"), texts, strict=True))
        except LabError:
            pass  # a figure of the window is then missing, never made up

    def _last_processes(self) -> None:
        """The ends' processes while they still run (see :data:`PROCESS_LEAD_S`)."""

        def read(role: str) -> Callable[[], str]:
            host = self.session.hosts[role]

            def reading() -> str:
                text = host.run(["sh", "-c", host.env() + probes.OWN_PROCESSES]).stdout
                self.own_marks["last"][role] = (time.monotonic(), probes.parse_processes(text))
                return ""

            return reading

        with contextlib.suppress(LabError):  # their figures are then missing, never made up
            side_by_side([read("client"), read("server")])


def remote_facts(session: Session, tunnel: RemoteTunnel | None) -> RemoteFacts:
    """The trial's record of the hosts: the tunnel's ends and devices (``tunnel`` None:
    a trial without one), and what the diagnosis reads of the DUT and how it was seen
    (``dut_view``): logged into, its crypto drivers, trip points and top clocks; a black
    box, what its SNMP agent serves."""
    role = session.file.dut
    facts = RemoteFacts(
        dut=role,
        tunnel_mode=(tunnel.mode if tunnel else TunnelMode.NONE).value,
        tunnel_built_by=tunnel.built_by if tunnel else None,
        tunnel_ends=dict(tunnel.ends) if tunnel else {},
        tunnel_devices=dict(tunnel.devices) if tunnel else {},
        hosts={r: h.destination for r, h in session.file.hosts.items()},
        kernels={r: f.kernel for r, f in session.facts.items()},
    )
    if (found := session.facts.get(role)) is not None:
        facts.dut_view = remotefacts.SSH
        facts.crypto_drivers = {
            n: CryptoDriver(d, p) for n, (d, p) in found.cipher_drivers().items()
        }
        facts.thermal_zones, facts.trips_c = dict(found.zones), dict(found.trips_c)
        facts.max_mhz = dict(found.max_mhz)
        return facts
    box = session.black_boxes[role]
    if box.device is None:
        facts.dut_view = remotefacts.NONE
        return facts
    facts.dut_view = remotefacts.SNMP
    facts.dut_snmp = SnmpView(
        description=box.device.description,
        interfaces=tuple(sorted(box.device.interfaces.values())),
        cpu_counters=box.device.cpu_counters,
        cores=box.device.cores,
        cache_s=session.file.hosts[role].snmp_cache,
    )
    return facts
