"""Resolving a tunnel's settings into what runs: cipher, ESP mode and protection checks."""

from typing import Any

import pytest

from tunnelbench.errors import UserError
from tunnelbench.kinds import Cipher, EspMode, Protection, TunnelKind
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelSpec


def resolve(**settings: Any) -> TunnelSpec:
    kind = settings.pop("kind")
    return TUNNELS.get(kind).resolve(TunnelSettings(kind=kind, **settings), 1500)


def test_an_unencrypted_tunnel_has_no_cipher_and_its_default_mtu():
    spec = resolve(kind=TunnelKind.VXLAN)
    assert spec.cipher is None
    assert spec.mtu == 1450
    assert spec.protection is Protection.NONE


def test_wireguard_resolves_auto_to_its_only_cipher():
    spec = resolve(kind=TunnelKind.WIREGUARD, implementation="wireguard-go")
    assert spec.cipher is Cipher.CHACHA20_POLY1305
    assert spec.mtu == 1420


def test_an_explicit_mtu_is_kept():
    assert resolve(kind=TunnelKind.VXLAN, mtu=1400).mtu == 1400


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"kind": TunnelKind.WIREGUARD, "cipher": Cipher.AES_256_GCM},
            "tunnel.cipher: wireguard does not offer 'aes-256-gcm'; "
            "allowed: auto, chacha20-poly1305",
        ),
        (
            {"kind": TunnelKind.NONE, "cipher": Cipher.AES_256_GCM},
            "tunnel.cipher: none does not encrypt, so 'aes-256-gcm' cannot apply; leave it 'auto'",
        ),
        (
            {"kind": TunnelKind.WIREGUARD, "esp_mode": EspMode.TRANSPORT},
            "tunnel.esp_mode: 'transport' applies to ipsec and to tunnel.protection = 'ipsec'"
            " only, not to wireguard",
        ),
        (
            {"kind": TunnelKind.WIREGUARD, "protection": Protection.IPSEC},
            "tunnel.protection: wireguard cannot be wrapped in ipsec; "
            "only gre, gretap and vxlan can",
        ),
    ],
)
def test_settings_a_kind_cannot_do_are_refused_by_name(settings, message):
    with pytest.raises(UserError) as caught:
        resolve(**settings)
    assert str(caught.value) == message


# --- what fits: the largest packet, and which IP versions a lab carries ---


@pytest.mark.parametrize(
    ("kind", "largest"), [(TunnelKind.WIREGUARD, 65475), (TunnelKind.VXLAN, 65485)]
)
def test_a_tunnel_mtu_whose_packets_exceed_an_ipv4_packet_is_refused(kind, largest):
    """wireguard-go carried TCP at a tunnel MTU of 65475, stalled at 65476, died at 65535."""
    tunnel = TUNNELS.get(kind)
    assert tunnel.resolve(TunnelSettings(kind=kind, mtu=largest), 65535).mtu == largest
    with pytest.raises(UserError) as refused:
        tunnel.resolve(TunnelSettings(kind=kind, mtu=largest + 1), 65535)
    assert str(refused.value) == (
        f"tunnel.mtu: {largest + 1} plus {65535 - largest} bytes of {kind.value} encapsulation"
        f" exceeds the 65,535-byte maximum of an IPv4 packet; at most {largest}"
    )


def test_a_lab_with_a_link_below_1280_is_ipv4_only():
    from tunnelbench.model.plan import LabSettings, LinkSettings

    assert LabSettings().families == (4, 6)
    assert LabSettings(wan=LinkSettings(mtu=1279)).families == (4,)
    assert LabSettings(lan_mtu=576).families == (4,)
    assert LabSettings(wan=LinkSettings(mtu=1280), lan_mtu=1280).families == (4, 6)


def test_a_tunnel_carries_ipv6_only_at_1280_and_only_its_own_families():
    wireguard, ipip = TUNNELS.get(TunnelKind.WIREGUARD), TUNNELS.get(TunnelKind.IPIP)
    assert wireguard.carried_families((4, 6), 1280) == (4, 6)
    assert wireguard.carried_families((4, 6), 1279) == (4,)
    assert wireguard.carried_families((4,), 1420) == (4,)
    assert ipip.carried_families((4, 6), 1480) == (4,)
