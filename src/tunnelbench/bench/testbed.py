"""Where a trial runs: the one interface the runner measures through.

A :class:`Testbed` is a provider of trials' set-ups: the namespace lab on this kernel
(:mod:`tunnelbench.bench.testbeds.lab`, also what a VM guest runs on its own kernel) and
a hosts file's machines over SSH (:mod:`tunnelbench.bench.testbeds.hosts`). The runner
(:func:`tunnelbench.bench.runner.run_trials`) has one loop and one trial for all of them;
a testbed only says what differs: how the standing set-up (the generator's
:class:`~tunnelbench.traffic.base.Ends`, the probes'
:class:`~tunnelbench.probes.trial.Machines`, the tunnel) is acquired and released, how
the measured window is read on its machines, what its counters are held to, and which
fault stops the whole run rather than one trial.

Adding a testbed is one module with a :class:`Testbed` and its :class:`Setup`, and the
command that builds it (``run --hosts`` builds the hosts').
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from tunnelbench.errors import LabError
from tunnelbench.kinds import StreamMode
from tunnelbench.model.plan import TrafficSettings, Trial, TrialConfig
from tunnelbench.model.records import Resolved, Where
from tunnelbench.probes.trial import Machines, ProbeContext, ProbeSet
from tunnelbench.traffic.base import Ends, PathSignals, WindowClosed
from tunnelbench.tunnels.base import TunnelSpec


@dataclass(frozen=True)
class Resolution:
    """What a configuration's "auto" settings became on this machine (the lab's; a
    testbed that resolves them per trial, as real hosts do, has none beforehand)."""

    tunnel: TunnelSpec
    version: str
    stream_mode: StreamMode

    @property
    def implementation(self) -> str:
        return self.tunnel.implementation

    @property
    def tunnel_mtu(self) -> int:
        return self.tunnel.mtu


class Setup(ABC):
    """One trial's standing set-up on a testbed, acquired by :meth:`Testbed.acquire`:
    where the generator and the probes run, and the measured window on its machines.

    Used as a context manager around the trial's traffic; the window is opened
    (:meth:`open_window`) before the probes start, moved to the generator's window by
    :meth:`window_opened`, read by :meth:`close_window` after the traffic and always
    ended by :meth:`stop_window`.
    """

    ends: Ends
    machines: Machines
    context: ProbeContext

    def __enter__(self) -> "Setup":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    @abstractmethod
    def open_window(self) -> None:
        """Start what samples the machines over the trial (before the probes)."""

    def traffic(self, settings: TrafficSettings) -> TrafficSettings:
        """The traffic as this testbed runs it, asked just before it starts."""
        return settings

    @abstractmethod
    def window_opened(self, processes: dict[str, int], begin: float, end: float) -> WindowClosed:
        """The generator's window is known (again, when it moves): time the readings."""

    @abstractmethod
    def close_window(self) -> tuple[dict[str, float], dict[str, Any]]:
        """After the traffic: the window's figures (metrics) and their raw record
        (artifacts). A figure that could not be read is missing, never made up."""

    @abstractmethod
    def stop_window(self) -> None:
        """End every sampler, however the trial ended."""

    def broken(self) -> str | None:
        """Why the traffic must stop now (a dead tunnel daemon), or None; polled by the
        generator's every wait."""
        return None

    def signals(self, probes: ProbeSet) -> PathSignals | None:
        """What an "auto" warm-up watches on this testbed."""
        return None

    @abstractmethod
    def check(self, metrics: dict[str, float], seconds: float) -> None:
        """The second instrument: the testbed's counters hold the generator's figure, or
        a :class:`LabError` names the instruments that disagree. May drop figures an
        instrument is known to miscount."""

    def record(self, resolved: Resolved, probes: ProbeSet) -> None:
        """What the finished trial tells about its set-up, into ``resolved``."""
        return None


class Testbed(ABC):
    """A provider of trials' set-ups (see the module's text). Used as a context manager
    around a run's trials: what stands when it ends is removed."""

    #: What every trial here records about where it ran (None: the testbed records its
    #: machines itself).
    where: Where | None = None

    def __enter__(self) -> "Testbed":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def expect(self, trials: list[Trial]) -> None:  # noqa: B027 - most keep nothing
        """The trials about to run, in order (what to keep standing between them)."""

    @abstractmethod
    def acquire(
        self, config: TrialConfig, resolution: Resolution | None, resolved: Resolved
    ) -> Setup:
        """The set-up for a trial of ``config``, recording what it knows into
        ``resolved`` as it goes (a set-up that fails keeps what was recorded)."""

    @abstractmethod
    def release(self, setup: Setup, *, measured: bool) -> None:
        """After the trial: kept for the next (``measured``) or removed."""

    def stops_run(self, error: LabError) -> str | None:
        """Why ``error`` ends the run rather than the trial (a host lost), else None."""
        return None
