"""Resolving a tunnel's settings into what runs: cipher, ESP mode and protection checks."""

from typing import Any

import pytest

from tunnelbench.errors import UserError
from tunnelbench.kinds import Cipher, EspMode, Protection, TunnelKind
from tunnelbench.plan import TunnelSettings
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
