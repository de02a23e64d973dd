"""The interface every load generator implements, what it runs on, and what it returns.

A generator acts only through its :class:`Ends`: the client's and the server's
:class:`~tunnelbench.lab.host.Host`, their directories and programs, the address the
client sends to and the ports free on the server. The namespace lab
(:class:`tunnelbench.lab.netns.Lab`) is one; a hosts file's client and server
(:class:`tunnelbench.remote.ends.HostsEnds`) are another; so one generator's code runs
in the lab, in a VM guest's lab and between real hosts.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol

from tunnelbench.analysis.steadiness import QueueSeries
from tunnelbench.kinds import Generator as GeneratorKind
from tunnelbench.kinds import StreamMode
from tunnelbench.lab.host import Host
from tunnelbench.model.kindfacts import GeneratorFacts
from tunnelbench.model.plan import TrafficSettings
from tunnelbench.system import programs

#: Waits up to the given seconds for the trial's probes to take their closing readings
#: of the measured window; True once they have. A generator that stops its processes by
#: the clock calls it first, so that no probe's window reaches past the traffic.
WindowClosed = Callable[[float], bool]
#: Called once every generator process runs and the measured window is known:
#: ({label: PID}, the window's monotonic begin, which may lie ahead: a fixed warm-up).
#: Called again, it moves the window to the later begin and drops what the probes read
#: for the earlier one (an "auto" warm-up whose window, opened on trial, was not steady:
#: :mod:`~tunnelbench.traffic.warmup`); the :data:`WindowClosed` of the last call counts.
Started = Callable[[dict[str, int], float], WindowClosed]
#: Polled while traffic runs: why the trial cannot succeed any more, or None.
StopReason = Callable[[], str | None]


#: The two roles a generator runs on.
CLIENT: Final = "client"
SERVER: Final = "server"


class Ends(Protocol):
    """Where a trial's generator runs (see the module's text). ``role`` is :data:`CLIENT`
    or :data:`SERVER`."""

    def host(self, role: str) -> Host: ...

    def files(self, role: str) -> Path:
        """The directory of ``role``'s files on its host (the generators' output)."""
        ...

    def program(self, role: str, name: str, purpose: str) -> str:
        """How ``role`` runs program ``name``; a :class:`UserError` saying ``purpose``
        where it has none."""
        ...

    def server_address(self, family: int) -> str:
        """Where the client sends: the server's address (through the tunnel, if any)."""
        ...

    def free_ports(self, role: str, ports: range, count: int) -> list[int]:
        """``count`` ports of ``ports`` that no TCP listener and no UDP socket on ``role``
        holds (a generator's server may take either), in order; a :class:`LabError`
        where fewer are free."""
        ...


def no_reason() -> str | None:
    return None


def closed_already(timeout_s: float) -> bool:
    """The :data:`WindowClosed` of traffic run without probes."""
    return True


def no_queues() -> QueueSeries:
    """The :attr:`PathSignals.queues` of a path whose queues are not read."""
    return {}


@dataclass(frozen=True)
class PathSignals:
    """What the warm-up's watch reads besides the generator's processes: the trial's
    loaded pings so far, as (monotonic s of arrival, ms), and the bottleneck queues'
    readings so far (:mod:`tunnelbench.probes.backlog`; none where they are not read)."""

    loaded_rtt: Callable[[], list[tuple[float, float]]]
    queues: Callable[[], QueueSeries] = no_queues


@dataclass(frozen=True)
class WarmupEnd:
    """Where the measured window begins (monotonic s) and what ended the warm-up."""

    begin: float
    seconds: float
    steady: bool
    reason: str


@dataclass
class TrafficResult:
    """One trial's traffic, measured at the receivers, warm-up excluded."""

    stream_mode: StreamMode  # the mode that ran
    processes: int
    goodput_bps: float  # all directions together
    upload_bps: float | None
    download_bps: float | None
    retransmits: int | None  # None for UDP
    intervals_bps: list[float]  # receiver-side goodput per 1 s interval
    raw: list[dict[str, Any]] = field(default_factory=list)
    # UDP, as the receivers saw it (None for TCP): packets lost, their percent of the
    # packets expected, and the mean of the receivers' jitter.
    lost_packets: int | None = None
    lost_pct: float | None = None
    jitter_ms: float | None = None
    # TCP: the congestion control the senders used, as the generator reports it.
    congestion: str | None = None
    #: The receivers' intervals the goodput counts, in seconds (the shortest of its
    #: directions and processes).
    window_s: float | None = None
    #: Goodput in each 0.1 s of the window, all directions and processes summed, where
    #: the receivers reported that often; empty otherwise (steadiness: its trend).
    fine_bps: list[float] = field(default_factory=list)
    #: How an "auto" warm-up ended (None: a fixed one).
    warmup: WarmupEnd | None = None


class Generator(ABC):
    kind: ClassVar[GeneratorKind]
    #: One thread per stream in one process (see :class:`GeneratorFacts`).
    threaded_streams: ClassVar[bool] = False
    #: How its processes' labels begin in the CPU probe.
    process_prefixes: ClassVar[tuple[str, ...]]
    #: The Debian package of each program :meth:`programs` names, for ``doctor``'s hint.
    packages: ClassVar[Mapping[str, str]] = {}

    def facts(self) -> GeneratorFacts:
        """What analysis needs to know of this generator, stored with each trial."""
        return GeneratorFacts(self.threaded_streams, self.process_prefixes)

    @abstractmethod
    def programs(self) -> list[tuple[str, str]]:
        """(program, purpose) pairs needed; checked before any set-up."""

    def install_hint(self, program: str) -> str | None:
        """How to get ``program`` when it is missing: the ``apt-get install`` of its
        Debian package; None if unknown."""
        package = self.packages.get(program)
        return programs.apt_install(package) if package else None

    @abstractmethod
    def version(self) -> str: ...

    def conflicts(self, settings: TrafficSettings) -> list[str]:
        """Settings this generator cannot honour, each naming its key; checked with the
        plan, before anything is built (pure: no programs are run)."""
        return []

    def ends_warmup(self) -> bool:
        """Whether it can end an "auto" warm-up on evidence (stop its test once the
        window is measured, its reports kept); otherwise "auto" is
        :data:`~tunnelbench.model.plan.WARMUP_FIXED_FALLBACK` seconds, recorded."""
        return False

    @abstractmethod
    def resolve_mode(self, settings: TrafficSettings, version: str | None = None) -> StreamMode:
        """The stream mode "auto" means for this generator and these settings; ``version``:
        the client's :meth:`version` text where the client is not this machine."""

    @abstractmethod
    def run(
        self,
        ends: Ends,
        settings: TrafficSettings,
        mode: StreamMode,
        on_started: Started,
        stop_reason: StopReason = no_reason,
        signals: PathSignals | None = None,
    ) -> TrafficResult:
        """Drive traffic from the client to the server (or back) and measure it;
        raise :class:`LabError` as soon as ``stop_reason`` gives a reason. An "auto"
        warm-up watches ``signals`` (the trial's pings) as well, where the generator
        can end it on evidence (:meth:`ends_warmup`)."""
