"""Verdicts and advice about a real DUT (a run with --hosts): its cores named as its own,
its clock and thermal trip points, its crypto driver, and no lab settings advised."""

from typing import Any

from tunnelbench.analysis.advice import advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import TrialConfig, TunnelSettings
from tunnelbench.model.records import Resolved

REMOTE = {"dut": "gw", "max_mhz": {"0": 1800.0, "1": 1800.0}, "trips_c": {"thermal_zone0": 85.0}}


def dut(metrics: dict[str, float], remote: dict[str, Any] | None = None) -> Subject:
    """A WireGuard run whose DUT (2 cores) forwarded 900 Mbit/s."""
    config = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD))
    resolved = Resolved(tunnel_implementation="kernel", remote=REMOTE | (remote or {}))
    base = {"goodput_bps": 9e8, "cpu0.user": 1.0, "cpu0.system": 9.0, "cpu0.softirq": 89.0,
            "cpu0.idle": 1.0, "cpu1.user": 2.0, "cpu1.system": 3.0, "cpu1.softirq": 5.0,
            "cpu1.idle": 90.0}  # fmt: skip
    metrics = base | metrics
    return Subject(config, resolved, metrics, None, {"cpu_governor": "ondemand"}, runs=(metrics,))


def test_the_duts_saturated_core_is_named_as_the_duts_with_its_clock():
    s = dut({"cpu0.mhz": 800.0, "cpu0.mhz_min": 600.0, "thermal.gw.thermal_zone0.max_c": 60.0})
    found = {f.bound: f for f in diagnose(s).findings}
    assert "gw's cpu0 at 99% with its clock at 800 of 1,800 MHz" in found[Bound.CPU].summary
    assert "outside load not recorded" not in found[Bound.CPU].summary  # the DUT's own load
    assert Bound.THERMAL not in found  # 25 °C below its trip point


def test_a_dut_near_its_trip_point_is_thermally_limited_ahead_of_the_cpu():
    s = dut({"cpu0.mhz": 800.0, "cpu0.mhz_min": 600.0, "thermal.gw.thermal_zone0.max_c": 82.0})
    d = diagnose(s)
    assert d.verdict.bound is Bound.THERMAL
    assert d.verdict.summary == (
        "gw ran hot: thermal_zone0 reached 82 °C against a trip point of 85 °C; gw's cpu0 ran"
        " at 800 of 1,800 MHz (down to 600)"
    )
    # without trip points recorded (a DUT that exposes none), no thermal verdict
    assert (
        diagnose(dut({"thermal.gw.thermal_zone0.max_c": 82.0}, {"trips_c": {}})).verdict.bound
        is not Bound.THERMAL
    )


def test_advice_for_a_dut_names_its_settings_never_the_labs():
    s = dut({}, {"crypto_drivers": {"chacha20": {"driver": "chacha20-generic", "priority": 100}}})
    d = diagnose(s)
    advice = advise(s, d, [])
    assert not [a for a in advice if (a.setting or "").startswith("lab.")]
    texts = [a.suggestion for a in advice]
    assert any(
        t.startswith("on gw: spread receive work over its cores") and "echo 3 >" in t for t in texts
    )
    crypto = next(a for a in advice if "driver" in a.suggestion)
    assert crypto.suggestion.startswith("on gw: load an accelerated driver for chacha20-poly1305")
    assert "gw's kernel serves chacha20 by chacha20-generic" in crypto.because
    assert any("governor" in t for t in texts)  # the DUT's governor, from the run's environment


def test_an_accelerated_driver_is_said_to_be_in_use():
    s = dut({}, {"crypto_drivers": {"chacha20": {"driver": "chacha20-neon", "priority": 300}}})
    crypto = next(a for a in advise(s, diagnose(s), []) if "driver" in a.suggestion)
    assert crypto.suggestion.startswith("on gw: the kernel already uses accelerated drivers")
