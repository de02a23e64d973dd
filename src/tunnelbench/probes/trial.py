"""The interface of a per-trial probe, and the set of them that one trial runs.

A trial probe reads something before the traffic starts and again after it ends (a ping
probe also runs during it) and turns the two into named metrics. Its raw readings are
kept with the trial, so the metrics can be checked and recomputed from the store. A
probe whose command fails raises :class:`LabError`: the trial fails with the cause
rather than storing a silent zero.
"""

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Protocol

from tunnelbench.lab.host import Host
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import LinkSettings, TrafficSettings
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.system.command import side_by_side


class ProbeKind(StrEnum):
    """The registered trial probes; the value is the key of its raw readings."""

    QDISC = "qdisc"
    LINKS = "links"
    TCP = "tcp"
    RTT = "rtt"
    BUDGET = "budget"


class Machines(Protocol):
    """The machines a trial's probes read: the namespace
    :class:`~tunnelbench.lab.netns.Lab`, or a hosts file's hosts
    (:class:`tunnelbench.remote.ends.HostsEnds`). Its client and server are the roles
    ``client`` and ``server``, as a generator's ends are."""

    @property
    def roles(self) -> tuple[str, ...]:
        """The machines there is a shell on, the client's side first (a DUT read only
        from outside is not one)."""
        ...

    def host(self, role: str) -> Host: ...

    def files(self, role: str) -> Path:
        """The directory of ``role``'s files on its host (the pings' output)."""
        ...

    def server_address(self, family: int) -> str:
        """Where the client sends: the server's address (through the tunnel, if any)."""
        ...

    def has(self, role: str, program: str) -> bool:
        """Whether ``role`` runs ``program``: a probe whose program a machine lacks
        (busybox has no ``tc``) reads nothing there rather than failing the trial."""
        ...

    def clock_offset(self, role: str) -> float:
        """``role``'s wall clock minus this machine's, in seconds (ping stamps its
        replies with its host's clock); a :class:`LabError` where it cannot be read."""
        ...


@dataclass(frozen=True)
class ProbeContext:
    """What a probe needs to know about the trial besides its machines."""

    tunnel_devices: dict[str, str]  # role -> tunnel device (empty without a tunnel)
    traffic: TrafficSettings
    wan: LinkSettings  # the path's settings: how long a reply to a ping may take
    names: DeviceNames  # the stable names of the devices counted in metric names
    #: role -> its cgroup's directory, where ``lab.budget`` limits its CPU.
    cgroups: Mapping[str, Path] = field(default_factory=dict)
    #: Whether a probe that cannot read on a machine records why instead of failing
    #: the trial: a real host's programs are its owner's (busybox's ping stamps no
    #: times), where the lab's were checked before it was built.
    lenient: bool = False


@dataclass
class ProbeReading:
    """A probe's metrics (by their stored names) and the raw readings they came from."""

    metrics: dict[str, float]
    raw: dict[str, Any]


class TrialProbe(ABC):
    """One probe for one trial: a fresh instance per trial holds what it read before.

    The runner calls :meth:`before` once the tunnel is up and just before the traffic
    starts, :meth:`started` with the traffic's monotonic start time, and :meth:`after`
    once the traffic has ended and the lab still stands.
    """

    kind: ClassVar[ProbeKind]
    #: Whether its reads may run beside other probes' (counter snapshots); a probe that
    #: times the path (the idle ping) runs on its own, so nothing else loads the CPU.
    alongside: ClassVar[bool] = True

    @abstractmethod
    def before(self, machines: Machines, context: ProbeContext) -> None:
        """Read (or start) what the probe measures; raise :class:`LabError` on failure."""

    def started(self, begin: float) -> None:  # noqa: B027 - most probes do not need it
        """The measured window begins at monotonic time ``begin`` (now, or later: a
        fixed warm-up), once the traffic runs."""

    @abstractmethod
    def after(self) -> ProbeReading:
        """Read again and return the metrics; raise :class:`LabError` on failure."""

    def abandon(self) -> None:  # noqa: B027 - most probes leave nothing running
        """End what the probe left running: a trial that failed before :meth:`after`."""


@dataclass
class ProbeReadings:
    """Every probe's reading for one trial, and the time the probes took."""

    readings: dict[ProbeKind, ProbeReading]
    seconds: dict[str, float] = field(default_factory=dict)  # "<kind>.before"/".after" -> s
    #: Wall time of the calls before and after the traffic; less than the sum of
    #: ``seconds`` where probes ran side by side. None: the sum.
    wall_s: float | None = None

    @property
    def metrics(self) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for reading in self.readings.values():
            metrics.update(reading.metrics)
        # The probes' own cost per trial: time spent reading before and after the
        # traffic (the idle ping included), which lengthens every trial.
        spent = sum(self.seconds.values()) if self.wall_s is None else self.wall_s
        metrics[metric.PROBES_OVERHEAD.name] = round(spent, 4)
        return metrics

    def raw(self) -> dict[str, Any]:
        data: dict[str, Any] = {kind.value: r.raw for kind, r in self.readings.items()}
        data["seconds"] = {k: round(v, 4) for k, v in self.seconds.items()}
        return data


class ProbeSet:
    """The probes of one trial, called in order; each call is timed. Consecutive probes
    that may run :attr:`~TrialProbe.alongside` each other are called side by side: each
    is a few short processes, and an emulated guest takes 0.3-0.5 s to start one."""

    def __init__(self, probes: Iterable[TrialProbe]) -> None:
        self.probes = list(probes)
        self.seconds: dict[str, float] = {}
        self.wall_s = 0.0

    def _groups(self) -> list[list[TrialProbe]]:
        groups: list[list[TrialProbe]] = []
        for probe in self.probes:
            if probe.alongside and groups and groups[-1][0].alongside:
                groups[-1].append(probe)
            else:
                groups.append([probe])
        return groups

    def _each(self, step: str, call: Callable[[TrialProbe], Any]) -> list[Any]:
        def timed(probe: TrialProbe) -> Any:
            begin = time.perf_counter()
            try:
                return call(probe)
            finally:
                self.seconds[f"{probe.kind.value}.{step}"] = time.perf_counter() - begin

        began = time.perf_counter()
        try:
            results = []
            for group in self._groups():
                results += side_by_side([functools.partial(timed, probe) for probe in group])
            return results
        finally:
            self.wall_s += time.perf_counter() - began

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self._each("before", lambda probe: probe.before(machines, context))

    def started(self, begin: float) -> None:
        for probe in self.probes:
            probe.started(begin)

    def abandon(self) -> None:
        for probe in self.probes:
            probe.abandon()

    def after(self) -> ProbeReadings:
        readings = self._each("after", lambda probe: probe.after())
        return ProbeReadings(
            {p.kind: r for p, r in zip(self.probes, readings, strict=True)},
            dict(self.seconds),
            self.wall_s,
        )


def read_each(roles: Iterable[str], read: Callable[[str], str]) -> dict[str, str]:
    """``read(role)`` for every role at once, by role.

    Each read is a separate short process (``tc``, ``ip``), mostly start-up time: run
    side by side, a probe costs the trial its slowest read instead of their sum. The
    first failure is raised (after every read has finished).
    """
    roles = list(roles)
    return dict(zip(roles, side_by_side([functools.partial(read, r) for r in roles]), strict=True))
