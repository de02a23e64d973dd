"""The bottleneck queue's own evidence: the WAN queues' backlog and drops, read every
:data:`POLL_S` from just before the traffic until it ends.

A FIFO on a slow link fills slowly under a loss-based sender (cubic at 30 Mbit/s needs
seconds to fill a few hundred packets), and the round trip it adds rises a few
milliseconds per half second, under the noise of the pings. The queue's ``backlog``
says directly whether it is still filling: a backlog that grows while the queue has not
dropped a packet since the traffic began is a queue not yet full; a drop (the queue
overflowed once: the sender now cycles around its capacity) or a backlog that stays put
is a steady state (:func:`tunnelbench.analysis.steadiness.queue_judged`). The warm-up
reads the readings so far (:class:`tunnelbench.traffic.base.PathSignals`), and the
measured window is judged afterwards from the same readings
(:func:`tunnelbench.analysis.steadiness.queue_window`).

The queues watched are the root qdiscs (netem's child where netem is the root, as
:func:`tunnelbench.probes.qdisc.parse_qdiscs` reads them) of the WAN's devices (its veth
ends and, over PPPoE, its ppp devices) on the machines that read them in this process
(:attr:`tunnelbench.lab.host.Host.reads_in_process`): a lab's namespaces, over
rtnetlink, in about 0.2 ms a read. A real host would need a ``tc`` process every tenth
of a second on the very machine being measured; it is not watched, and the round trip
and rate judge its warm-up as before. An unshaped WAN has no queue (a veth's root is
``noqueue``): nothing is watched there either.
"""

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunnelbench.analysis.steadiness import QueueReading, QueueSeries
from tunnelbench.errors import LabError
from tunnelbench.probes.trial import TrialProbe

#: How often the queues are read: the warm-up's own pace (tunnelbench.traffic.warmup).
POLL_S = 0.1
#: What a role's queues read as: device -> its root qdisc's fields (``backlog_bytes``,
#: ``backlog_packets``, ``drops``: :data:`tunnelbench.probes.qdisc.GAUGES` and counters),
#: or another queue's same fields (:mod:`tunnelbench.probes.senders`).
Read = Callable[[str], Mapping[str, Mapping[str, int]]]


class BacklogWatch:
    """Reads the watched queues every :data:`POLL_S` in a thread of its own, from
    :meth:`start` until :meth:`stop`; :meth:`readings` gives what it read so far."""

    def __init__(
        self,
        queues: Mapping[str, tuple[str, str]],
        read: Read,
        what: str = "the WAN queues",
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        """``queues``: ``role.link`` -> (role, device); ``read``: a role's queues;
        ``what``: the queues, in words, for the error that ends the watch; ``on_stop``:
        what releases what ``read`` holds, once the last reading is taken."""
        self.queues = dict(queues)
        self.read = read
        self.what = what
        self.on_stop = on_stop
        self.roles = sorted({role for role, _ in self.queues.values()})
        self._readings: dict[str, list[QueueReading]] = {name: [] for name in self.queues}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._failure: LabError | None = None
        self._thread = threading.Thread(target=self._loop, name="tb-backlog", daemon=True)

    def start(self) -> None:
        """The first reading at once (before the traffic: the drops' baseline), then
        every :data:`POLL_S` in the thread."""
        self._read()
        self._thread.start()

    def _read(self) -> None:
        found = {role: self.read(role) for role in self.roles}
        at = time.monotonic()
        with self._lock:
            for name, (role, device) in self.queues.items():
                values = found[role].get(device)
                if values is None:
                    raise LabError(f"the queue of {device} in {role} is gone")
                self._readings[name].append(
                    QueueReading(at, values["backlog_bytes"], values["backlog_packets"],
                                 values["drops"])
                )  # fmt: skip

    def _loop(self) -> None:
        tick = time.monotonic()
        while True:
            tick += POLL_S
            if self._stop.wait(max(0.0, tick - time.monotonic())):
                return
            try:
                self._read()
            except (LabError, ValueError, KeyError) as exc:
                self._failure = LabError(f"cannot read {self.what}: {exc}")
                return

    def readings(self) -> QueueSeries:
        """Every queue's readings so far (a copy); a :class:`LabError` once a read failed."""
        if self._failure is not None:
            raise self._failure
        with self._lock:
            return {name: list(found) for name, found in self._readings.items()}

    def stop(self) -> QueueSeries:
        """End the thread and give every reading (the last one taken now)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        try:
            if self._failure is None:
                self._read()
        except (LabError, ValueError, KeyError) as exc:
            self._failure = LabError(f"cannot read {self.what}: {exc}")
        finally:
            if self.on_stop is not None and not self._thread.is_alive():
                self.on_stop()
                self.on_stop = None
        return self.readings()


def raw(series: QueueSeries, window: tuple[float, float] | None) -> dict[str, Any]:
    """The readings as stored with the trial: seconds from the first reading, backlog
    bytes and packets, drops so far; and the window in the same seconds."""
    origin = min((found[0].at for found in series.values() if found), default=0.0)
    data: dict[str, Any] = {
        "queues": {
            name: [
                [round(r.at - origin, 4), r.backlog_bytes, r.backlog_packets, r.drops]
                for r in found
            ]
            for name, found in series.items()
        }
    }
    if window is not None:
        data["window"] = [round(window[0] - origin, 4), round(window[1] - origin, 4)]
    return data


def from_raw(data: Mapping[str, Any]) -> tuple[QueueSeries, tuple[float, float] | None]:
    """:func:`raw`'s readings and window back (for the tests' captured sequences and a
    stored trial's re-judging)."""
    series: dict[str, Sequence[QueueReading]] = {
        name: [QueueReading(float(t), int(b), int(p), int(d)) for t, b, p, d in found]
        for name, found in data["queues"].items()
    }
    window = data.get("window")
    return series, (float(window[0]), float(window[1])) if window else None


class WatchingProbe(TrialProbe):
    """A probe whose queues a :class:`BacklogWatch` reads while the traffic runs (the
    WAN queues' backlog, the senders' windows): the readings so far are the warm-up's
    evidence (:meth:`queue_readings`, gathered by
    :func:`tunnelbench.bench.testbeds.lab.path_signals`), and the measured window's edges
    pick the window's own readings afterwards."""

    watch: BacklogWatch | None = None
    window: tuple[float, float] | None = None

    def watching(self, watch: BacklogWatch | None, duration: float) -> None:
        """Start ``watch`` (none where nothing is watched) for traffic of ``duration`` s."""
        self.watch = watch
        self.duration = duration
        self.window = None
        if watch is not None:
            watch.start()

    def started(self, begin: float) -> None:
        self.window = (begin, begin + self.duration)

    def queue_readings(self) -> QueueSeries:
        """The watched queues' readings so far; none where they are not watched."""
        return {} if self.watch is None else self.watch.readings()

    def stopped(self) -> QueueSeries:
        """Every reading, the watch ended (in :meth:`after`)."""
        return {} if self.watch is None else self.watch.stop()

    def abandon(self) -> None:
        if self.watch is not None:
            with contextlib.suppress(LabError):
                self.watch.stop()
