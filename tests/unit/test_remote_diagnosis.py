"""Verdicts and advice about a real DUT (a run with --hosts): its cores named as its own,
its clock and thermal trip points, its crypto driver, and no lab settings advised."""

from typing import Any

import pytest

from tests.report_fixtures import resolved_for
from tunnelbench.analysis.advice import advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import TrialConfig, TunnelSettings

REMOTE = {"dut": "gw", "max_mhz": {"0": 1800.0, "1": 1800.0}, "trips_c": {"thermal_zone0": 85.0}}


def dut(
    metrics: dict[str, float],
    remote: dict[str, Any] | None = None,
    kind: TunnelKind = TunnelKind.WIREGUARD,
    **resolved_as: str,
) -> Subject:
    """A run (WireGuard unless told) whose DUT (2 cores) forwarded 900 Mbit/s; the kind's
    facts filled in as the store fills them for a remote trial."""
    config = TrialConfig(tunnel=TunnelSettings(kind=kind))
    record = {"tunnel_implementation": "kernel", "remote": REMOTE | (remote or {})}
    resolved = resolved_for(config, record | resolved_as)
    base = {"goodput_bps": 9e8, "cpu0.user": 1.0, "cpu0.system": 9.0, "cpu0.softirq": 89.0,
            "cpu0.idle": 1.0, "cpu1.user": 2.0, "cpu1.system": 3.0, "cpu1.softirq": 5.0,
            "cpu1.idle": 90.0}  # fmt: skip
    metrics = base | metrics
    return Subject(
        config, resolved, metrics, None, Environment(cpu_governor="ondemand"), runs=(metrics,)
    )


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
    assert any("governor" in t for t in texts)  # the DUT's governor, from the run's environment


@pytest.mark.parametrize("implementation", ["kernel", "wireguard-go"])
def test_wireguard_is_never_told_to_load_a_crypto_driver(implementation):
    """The issue's case: a CPU-bound wireguard-go tunnel was told to "load an accelerated
    driver for chacha20-poly1305". wireguard-go does its crypto in Go and kernel
    WireGuard calls lib/crypto, so /proc/crypto's choice of driver is neither's."""
    drivers = {"chacha20": {"driver": "chacha20-generic", "priority": 100}}
    s = dut({}, {"crypto_drivers": drivers}, tunnel_implementation=implementation)
    assert s.resolved.tunnel is not None and not s.resolved.tunnel.kernel_crypto_api
    d = diagnose(s)
    assert Bound.CPU in {f.bound for f in d.findings}
    assert not [a for a in advise(s, d, []) if "driver" in a.suggestion]


ESP_GENERIC = {"gcm(aes)": {"driver": "gcm_base(ctr(aes-generic),ghash-generic)", "priority": 100}}
ESP_AESNI = {"gcm(aes)": {"driver": "generic-gcm-aesni", "priority": 400}}


@pytest.mark.parametrize(
    ("drivers", "advised"),
    [
        (ESP_GENERIC, "on gw: load an accelerated driver for aes-256-gcm (its kernel picks"
         " gcm_base(ctr(aes-generic),ghash-generic)"),
        # Intel's AES-NI driver is called generic-gcm-aesni: not the portable code.
        (ESP_AESNI, "on gw: the kernel already uses accelerated drivers for aes-256-gcm"),
    ],
)  # fmt: skip
def test_the_kernels_esp_is_told_which_driver_serves_its_cipher(drivers, advised):
    s = dut(
        {},
        {"crypto_drivers": drivers},
        TunnelKind.IPSEC,
        esp_implementation="kernel",
        tunnel_cipher="aes-256-gcm",
    )
    assert s.resolved.tunnel is not None and s.resolved.tunnel.kernel_crypto_api
    (crypto,) = [a for a in advise(s, diagnose(s), []) if "driver" in a.suggestion]
    assert crypto.suggestion.startswith(advised)
    assert "gw's kernel serves gcm(aes) by " in crypto.because


def test_an_ends_generator_at_its_core_is_the_limit_and_an_ends_process_is_not_the_duts():
    """On real hosts the ends' processes are sampled as the lab samples its own: the
    generator (``iperf3-client@client``) is the limit when it fills its core, and no
    process of an end is taken for the DUT's, whose cores are the only ones recorded."""
    idle = {"cpu0.softirq": 20.0, "cpu0.idle": 70.0}
    ends = {"proc.iperf3-client@client": 99.4, "proc.iperf3-server@server": 41.0}
    s = dut(idle | ends | {"proc.wireguard-go@client": 95.0})
    assert s.processes() == {}
    d = diagnose(s)
    assert d.verdict.bound is Bound.GENERATOR
    assert "the load generator iperf3-client@client used 99.4% of one core" in d.verdict.summary
    # The DUT's core full: its own process is named, not an end's busier daemon.
    busy = dut(ends | {"proc.wireguard-go@client": 95.0, "proc.kworker@gw": 30.0})
    found = {f.bound: f for f in diagnose(busy).findings}
    assert "kworker@gw used 30% of a core" in found[Bound.CPU].summary
    assert "wireguard-go@client" not in found[Bound.CPU].summary
