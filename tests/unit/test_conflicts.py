"""Settings no machine can run together are errors before anything runs (issue 27, 5),
and a configuration for a VM guest is checked here as far as this machine can tell
(issue 27, 4). The plan-file goldens of these errors are in tests/fixtures/plans/
invalid.json; here: the MTU limit against each kind's own default, the command line's
names, and what a guest is known to lack before it boots."""

import pytest

from tunnelbench.bench import conflicts, skips
from tunnelbench.bench.conflicts import largest_mtu
from tunnelbench.cli.options import OPTION_KEYS
from tunnelbench.kinds import EspMode, Generator, Protection, Shaper, TunnelKind
from tunnelbench.model.plan import (
    LabSettings,
    LinkSettings,
    RoleCpus,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
    VmSettings,
)
from tunnelbench.tunnels import REGISTRY
from tunnelbench.tunnels.base import ESP_CIPHERS, TunnelSpec
from tunnelbench.tunnels.strongswan import KERNEL

KINDS = [k for k in TunnelKind if k is not TunnelKind.NONE]
PROTECTED = [(kind, mode) for kind in KINDS if REGISTRY.get(kind).protectable for mode in EspMode]


def _kernel_spec(settings: TunnelSettings) -> TunnelSpec:
    """``settings`` as a machine with kernel ESP resolves them (the widest packets)."""
    esp = settings.protection is Protection.IPSEC or settings.kind is TunnelKind.IPSEC
    return TunnelSpec(
        implementation=KERNEL if settings.kind is TunnelKind.IPSEC else "kernel",
        cipher=ESP_CIPHERS[0] if esp else None,
        esp_mode=settings.esp_mode,
        protection=settings.protection,
        esp_implementation=KERNEL if esp else None,
    )


@pytest.mark.parametrize("underlay", [576, 1500, 1600, 9000, 65535])
@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
def test_the_limit_is_the_largest_packet_the_kind_fits_by_default(kind, underlay):
    """Every kind but WireGuard sizes its default MTU to fill the WAN exactly (as the
    kernel does); WireGuard leaves room for an IPv6 outer header, 20 bytes more."""
    tunnel, settings = REGISTRY.get(kind), TunnelSettings(kind=kind)
    default = tunnel.default_mtu(underlay, _kernel_spec(settings))
    slack = 20 if kind is TunnelKind.WIREGUARD else 0
    assert largest_mtu(tunnel, settings, underlay) == default + slack


@pytest.mark.parametrize(
    ("kind", "mode"), PROTECTED, ids=[f"{k.value}-{m.value}" for k, m in PROTECTED]
)
@pytest.mark.parametrize("underlay", [1500, 1600, 9100])
def test_the_limit_in_esp_is_the_kernel_esps_default(kind, mode, underlay):
    tunnel = REGISTRY.get(kind)
    settings = TunnelSettings(kind=kind, protection=Protection.IPSEC, esp_mode=mode)
    default = tunnel.default_mtu(underlay, _kernel_spec(settings))
    assert largest_mtu(tunnel, settings, underlay) == default


def _config(tunnel: TunnelSettings, wan: LinkSettings | None = None) -> TrialConfig:
    return TrialConfig(lab=LabSettings(wan=wan or LinkSettings()), tunnel=tunnel)


# The captured cases on the command line: `--tunnel-mtu 9000` for VXLAN on a 1500-byte WAN
# failed at run time (the kernel refuses an MTU above WAN - 50), and `--shaper htb`
# without a rate shaped nothing.
def test_the_command_line_names_its_options():
    vxlan = _config(TunnelSettings(kind=TunnelKind.VXLAN, mtu=9000))
    given = {"tunnel.mtu"}
    assert conflicts.conflicts(vxlan, given, OPTION_KEYS) == [
        "--tunnel-mtu: 9000 does not fit --wan-mtu 1500: vxlan adds 50 bytes, so at most 1450"
    ]
    unshaped = _config(TunnelSettings(), LinkSettings(shaper=Shaper.HTB))
    assert conflicts.conflicts(unshaped, {"lab.wan.shaper"}, OPTION_KEYS) == [
        "--shaper: 'htb' shapes the WAN to --rate, which is not set; set a rate, e.g."
        " '100mbit', or leave --shaper out"
    ]


def test_a_shaper_beside_a_rate_axis_with_none_is_no_conflict():
    """`"lab.wan.rate" = ["none", "1gbit"]` with the shaper in the base: the unshaped
    row was asked for, and the shaper applies to the other."""
    unshaped = _config(TunnelSettings(), LinkSettings(shaper=Shaper.HTB))
    assert conflicts.conflicts(unshaped, {"lab.wan.shaper", "lab.wan.rate"}) == []
    assert conflicts.conflicts(unshaped, set()) == []  # the default shaper is no choice


def test_a_fitting_mtu_and_a_baseline_are_no_conflict():
    fits = _config(TunnelSettings(kind=TunnelKind.WIREGUARD, mtu=1440))
    baseline = _config(TunnelSettings(kind=TunnelKind.NONE, mtu=9000, cpu_budget=0.5))
    assert conflicts.conflicts(fits, {"tunnel.mtu"}) == []
    assert conflicts.conflicts(baseline, {"tunnel.mtu"}) == []  # a baseline drops them


def test_skips_give_the_same_reason_for_a_kernel_tunnels_budget():
    vxlan = TunnelSettings(kind=TunnelKind.VXLAN, cpu_budget=0.5)
    reason = "tunnel.cpu_budget: needs a userspace tunnel daemon; vxlan is a kernel tunnel"
    assert conflicts.budget_refusal(vxlan) == reason
    assert skips.unmet(_config(vxlan), skips.in_guest(VmSettings())) == reason


# --- what a guest lacks, known before it boots ---


def test_a_guest_has_its_vcpus_only():
    config = TrialConfig(lab=LabSettings(kernel="debian", cpus=RoleCpus(gw="1")))
    assert skips.unmet(config, skips.in_guest(VmSettings(cpus=2))) is None
    assert skips.unmet(config, skips.in_guest(VmSettings(cpus=1))) == (
        "lab.cpus.gw: core 1 is not online here (cores 0)"
    )


def test_a_guest_has_this_machines_programs(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing installed
    config = TrialConfig(
        lab=LabSettings(kernel="debian"), traffic=TrafficSettings(generator=Generator.IPERF2)
    )
    assert skips.unmet(config, skips.in_guest(VmSettings())) == (
        "traffic.generator: iperf2 needs iperf, which is not installed"
    )


def test_a_guests_kernel_is_no_reason_here():
    """Links, queues and congestion controls are the guest kernel's: not known here."""
    config = TrialConfig(
        lab=LabSettings(kernel="debian", wan=LinkSettings(rate=10**8, shaper=Shaper.HTB)),
        tunnel=TunnelSettings(kind=TunnelKind.GRETAP),
        traffic=TrafficSettings(congestion="bbr"),
    )
    assert skips.unmet(config, skips.in_guest(VmSettings())) is None
