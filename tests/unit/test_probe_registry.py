"""The trial probe registry and how readings become metrics."""

import time

import pytest

from tunnelbench import probes
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.trial import (
    Machines,
    ProbeContext,
    ProbeKind,
    ProbeReading,
    ProbeReadings,
    ProbeSet,
    TrialProbe,
    read_each,
)


def test_every_probe_kind_is_registered_once_in_run_order():
    assert probes.REGISTRY.kinds() == [
        ProbeKind.QDISC,
        ProbeKind.LINKS,
        ProbeKind.TCP,
        ProbeKind.RTT,
        ProbeKind.BUDGET,
    ]
    with pytest.raises(ValueError, match="trial probe 'rtt' is registered twice"):
        probes.REGISTRY.register(ProbeKind.RTT, RttProbe)


def test_each_trial_gets_fresh_probes():
    first, second = probes.new_probe_set(), probes.new_probe_set()
    assert [p.kind for p in first.probes] == probes.REGISTRY.kinds()
    assert not set(map(id, first.probes)) & set(map(id, second.probes))


class Fixed(TrialProbe):
    """A probe with a fixed reading, to test the set around it (not a probe under test)."""

    kind = ProbeKind.TCP

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self.t0 = 0.0

    def started(self, t0: float) -> None:
        self.t0 = t0

    def after(self) -> ProbeReading:
        return ProbeReading({"tcp.client.out_segs": 7, "t0": self.t0}, {"seen": self.t0})


def test_readings_merge_metrics_keep_raw_and_time_each_call():
    probe_set = ProbeSet([Fixed()])
    probe_set.before(None, None)  # type: ignore[arg-type]
    probe_set.started(12.5)
    readings = probe_set.after()
    assert set(readings.seconds) == {"tcp.before", "tcp.after"}
    metrics = readings.metrics
    assert metrics["tcp.client.out_segs"] == 7 and metrics["t0"] == 12.5
    assert metrics["probes.overhead_s"] >= round(sum(readings.seconds.values()), 4)
    raw = readings.raw()
    assert raw["tcp"] == {"seen": 12.5}
    assert set(raw["seconds"]) == {"tcp.before", "tcp.after"}


class Slow(TrialProbe):
    """Records when each of its calls ran (a probe of the set's order, not under test)."""

    def __init__(self, kind: ProbeKind, alongside: bool, log: list) -> None:
        self.kind, self.alongside, self.log = kind, alongside, log  # type: ignore[misc]

    def _call(self, step: str) -> None:
        begin = time.monotonic()
        time.sleep(0.2)
        self.log.append((self.kind, step, begin, time.monotonic()))

    def before(self, machines: Machines, context: ProbeContext) -> None:
        self._call("before")

    def after(self) -> ProbeReading:
        self._call("after")
        return ProbeReading({f"{self.kind}.x": 1}, {})


def test_counter_probes_read_side_by_side_and_the_ping_alone():
    log: list = []
    counters = [Slow(ProbeKind.QDISC, True, log), Slow(ProbeKind.LINKS, True, log)]
    ping, budget = Slow(ProbeKind.RTT, False, log), Slow(ProbeKind.BUDGET, True, log)
    probe_set = ProbeSet([*counters, ping, budget])
    probe_set.before(None, None)  # type: ignore[arg-type]
    readings = probe_set.after()
    for step in ("before", "after"):
        spans = {kind: (b, e) for kind, s, b, e in log if s == step}
        qdisc, links = spans[ProbeKind.QDISC], spans[ProbeKind.LINKS]
        assert max(qdisc[0], links[0]) < min(qdisc[1], links[1])  # they overlapped
        assert spans[ProbeKind.RTT][0] >= max(qdisc[1], links[1])  # then the ping alone
        assert spans[ProbeKind.BUDGET][0] >= spans[ProbeKind.RTT][1]
    assert set(readings.readings) == {ProbeKind.QDISC, ProbeKind.LINKS, ProbeKind.RTT,
                                      ProbeKind.BUDGET}  # fmt: skip
    # The overhead is the wall time: 3 steps of 0.2 s each way, not 4.
    assert 1.2 <= readings.metrics["probes.overhead_s"] < 1.55
    assert sum(readings.seconds.values()) >= 1.6


def test_read_each_returns_by_role_and_raises_the_failure():
    assert read_each(["client", "gw"], str.upper) == {"client": "CLIENT", "gw": "GW"}

    def fail(role: str) -> str:
        raise RuntimeError(f"read failed in {role}")

    with pytest.raises(RuntimeError, match="read failed in"):
        read_each(["client"], fail)
    assert ProbeReadings({}).metrics == {"probes.overhead_s": 0}
