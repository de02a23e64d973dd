"""The trial probe registry and how readings become metrics."""

import pytest

from tunnelbench import probes
from tunnelbench.lab.netns import Lab
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.trial import (
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

    def before(self, lab: Lab, context: ProbeContext) -> None:
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
    assert metrics["probes.overhead_s"] == round(sum(readings.seconds.values()), 4)
    raw = readings.raw()
    assert raw["tcp"] == {"seen": 12.5}
    assert set(raw["seconds"]) == {"tcp.before", "tcp.after"}


def test_read_each_returns_by_role_and_raises_the_failure():
    assert read_each(["client", "gw"], str.upper) == {"client": "CLIENT", "gw": "GW"}

    def fail(role: str) -> str:
        raise RuntimeError(f"read failed in {role}")

    with pytest.raises(RuntimeError, match="read failed in"):
        read_each(["client"], fail)
    assert ProbeReadings({}).metrics == {"probes.overhead_s": 0}
