"""Resolving ipsec and tunnel.protection = "ipsec": which ESP runs (the kernel's when it
has the cipher's AEAD, else strongSwan's libipsec), MTUs, and golden errors. The kernel's
ESP probe and the installed programs are stand-ins: this is about the rules, not about
this machine."""

import os
import stat
from dataclasses import replace
from typing import Any

import pytest

from tests.report_fixtures import resolved_for
from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Cipher, EspMode, Protection, TunnelKind
from tunnelbench.lab.host import NetnsHost
from tunnelbench.lab.state import LabState, teardown
from tunnelbench.model.kindfacts import EspFound, SetupFound
from tunnelbench.model.plan import TrialConfig, TunnelSettings
from tunnelbench.model.records import Resolved
from tunnelbench.system import probing, programs
from tunnelbench.system.probing import Check
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.base import TunnelSpec
from tunnelbench.tunnels.esp import Session, esp_device_mtu
from tunnelbench.tunnels.strongswan import KERNEL, LIBIPSEC, ChildSa

REFUSED = Check(False, "Requested AEAD algorithm not found")


@pytest.fixture
def kernel(monkeypatch):
    """Which AEADs the kernel has, by algorithm name (default: none, as here)."""
    has: dict[str, bool] = {}
    monkeypatch.setattr(probing, "esp", lambda name: Check(True) if has.get(name) else REFUSED)
    monkeypatch.setattr(programs, "find", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(strongswan, "missing_plugins", lambda implementation: [])
    return has


def resolve(kind: TunnelKind, wan_mtu: int = 1500, **settings: Any) -> TunnelSpec:
    return TUNNELS.get(kind).resolve(TunnelSettings(kind=kind, **settings), wan_mtu)


def test_ipsec_auto_is_libipsec_without_kernel_esp(kernel):
    spec = resolve(TunnelKind.IPSEC)
    assert (spec.implementation, spec.esp_implementation) == (LIBIPSEC, LIBIPSEC)
    assert spec.cipher is Cipher.AES_256_GCM and spec.esp_mode is EspMode.TUNNEL
    # libipsec reads at most 1400 bytes from its TUN device: below the 1438 that fit.
    assert spec.mtu == 1400


def test_ipsec_auto_is_the_kernel_per_cipher(kernel):
    kernel["rfc4106(gcm(aes))"] = True
    assert resolve(TunnelKind.IPSEC).implementation == KERNEL
    chacha = resolve(TunnelKind.IPSEC, cipher=Cipher.CHACHA20_POLY1305)
    assert chacha.implementation == LIBIPSEC and chacha.cipher is Cipher.CHACHA20_POLY1305


@pytest.mark.parametrize(
    ("wan_mtu", "implementation", "mtu"),
    [
        # kernel, plain ESP: 1500 - (20 IP + 8 ESP + 8 IV + 2 trailer + 16 ICV) = 1446;
        # 1446 + 2 is a multiple of 4, so no padding.
        (1500, KERNEL, 1446),
        # libipsec, ESP in UDP: 1500 - 62 = 1438, capped at 1400
        (1500, LIBIPSEC, 1400),
        # a small WAN: 1280 - 62 = 1218 (1218 + 2 = 1220, no padding)
        (1280, LIBIPSEC, 1218),
        # 1283 - 62 = 1221, but ESP pads 1221 + 2 to 1224 (1 byte), 1220 + 2 to 1224 (2),
        # 1219 + 2 to 1224 (3): each 1284 bytes on the wire; 1218 + 2 = 1220 fits
        (1283, LIBIPSEC, 1218),
        (9000, KERNEL, 8946),
    ],
)
def test_ipsec_default_mtu(kernel, wan_mtu, implementation, mtu):
    kernel["rfc4106(gcm(aes))"] = True
    assert resolve(TunnelKind.IPSEC, wan_mtu, implementation=implementation).mtu == mtu


@pytest.mark.parametrize(
    ("settings", "kernel_has", "esp", "mtu"),
    [
        # libipsec: VXLAN's 1400-byte packets fill its TUN device: 1400 - 50
        ({}, False, LIBIPSEC, 1350),
        # kernel tunnel mode: 1500 - 54 ESP - 50 VXLAN = 1396 (ESP payload 1446, no pad)
        ({}, True, KERNEL, 1396),
        # kernel transport mode: 1500 - 34 ESP - 50 VXLAN = 1416 (payload 1446, no pad)
        ({"esp_mode": EspMode.TRANSPORT}, True, KERNEL, 1416),
    ],
)
def test_protected_vxlan(kernel, settings, kernel_has, esp, mtu):
    kernel["rfc4106(gcm(aes))"] = kernel_has
    spec = resolve(TunnelKind.VXLAN, protection=Protection.IPSEC, **settings)
    assert (spec.implementation, spec.esp_implementation, spec.mtu) == ("kernel", esp, mtu)
    assert spec.cipher is Cipher.AES_256_GCM


def test_overheads(kernel):
    libipsec = resolve(TunnelKind.IPSEC)
    assert TUNNELS.get(TunnelKind.IPSEC).overhead(libipsec, 4) == 62  # 20 + 8 UDP + 34
    assert TUNNELS.get(TunnelKind.IPSEC).overhead(libipsec, 6) == 82
    protected = resolve(TunnelKind.VXLAN, protection=Protection.IPSEC)
    assert TUNNELS.get(TunnelKind.VXLAN).overhead(protected, 4) == 50 + 62
    assert TUNNELS.get(TunnelKind.VXLAN).overhead(resolve(TunnelKind.VXLAN), 4) == 50


@pytest.mark.parametrize(
    ("kind", "settings", "kernel_has", "message"),
    [
        (
            TunnelKind.IPSEC,
            {"implementation": "kernel"},
            False,
            "tunnel.implementation: this kernel has no ESP with aes-256-gcm "
            "(rfc4106(gcm(aes)): Requested AEAD algorithm not found); use 'libipsec' or 'auto'",
        ),
        (
            TunnelKind.IPSEC,
            {"implementation": "boringtun"},
            False,
            "tunnel.implementation: 'boringtun' is not an implementation of ipsec; "
            "allowed: auto, kernel, libipsec",
        ),
        (
            TunnelKind.IPSEC,
            {"esp_mode": EspMode.TRANSPORT},
            True,
            "tunnel.esp_mode: 'transport' protects only packets between the two tunnel ends "
            "themselves, and ipsec carries the lab's routed traffic, which needs 'tunnel'; "
            "transport mode goes with tunnel.protection = 'ipsec' around vxlan",
        ),
        (
            TunnelKind.IPSEC,
            {"implementation": "libipsec", "mtu": 1420},
            False,
            "tunnel.mtu: 1420 is above 1400: strongSwan's userspace ESP (libipsec) reads "
            "packets of at most 1400 bytes from its TUN device",
        ),
        (
            TunnelKind.IPSEC,
            {"cpu_budget": 0.5},
            True,
            "tunnel.cpu_budget: needs a userspace tunnel daemon; ipsec uses kernel ESP here "
            "(charon only negotiates keys); set tunnel.implementation = 'libipsec'",
        ),
        (
            TunnelKind.IPSEC,
            {"protection": Protection.IPSEC},
            False,
            "tunnel.protection: ipsec cannot be wrapped in ipsec; only gre, gretap and vxlan can",
        ),
        (
            TunnelKind.VXLAN,
            {"protection": Protection.IPSEC, "esp_mode": EspMode.TRANSPORT},
            False,
            "tunnel.esp_mode: 'transport' needs kernel ESP, and this kernel has none with "
            "aes-256-gcm (rfc4106(gcm(aes)): Requested AEAD algorithm not found); "
            "strongSwan's userspace ESP (libipsec) does tunnel mode only",
        ),
        (
            TunnelKind.VXLAN,
            {"protection": Protection.IPSEC, "mtu": 1400},
            False,
            "tunnel.mtu: 1400 is above 1350: strongSwan's userspace ESP (libipsec) reads "
            "packets of at most 1400 bytes from its TUN device and vxlan adds 50",
        ),
        (
            TunnelKind.VXLAN,
            {"cipher": Cipher.CHACHA20_POLY1305},
            False,
            "tunnel.cipher: vxlan does not encrypt, so 'chacha20-poly1305' cannot apply; "
            "leave it 'auto' or set tunnel.protection = 'ipsec'",
        ),
        (
            TunnelKind.WIREGUARD,
            {"protection": Protection.IPSEC, "implementation": "wireguard-go"},
            False,
            "tunnel.protection: wireguard cannot be wrapped in ipsec; "
            "only gre, gretap and vxlan can",
        ),
    ],
)
def test_golden_errors(kernel, kind, settings, kernel_has, message):
    kernel["rfc4106(gcm(aes))"] = kernel_has
    with pytest.raises(UserError) as caught:
        resolve(kind, **settings)
    assert str(caught.value) == message


def test_transport_with_libipsec_named_explicitly():
    with pytest.raises(UserError) as caught:
        strongswan.resolve_implementation(LIBIPSEC, Cipher.AES_256_GCM, EspMode.TRANSPORT)
    assert str(caught.value) == (
        "tunnel.esp_mode: 'transport' needs kernel ESP; strongSwan's userspace ESP "
        "(libipsec) does tunnel mode only"
    )


def test_missing_plugins_are_named_with_their_packages(kernel, monkeypatch, tmp_path):
    monkeypatch.undo()  # the real missing_plugins, over an empty plugin directory
    monkeypatch.setattr(probing, "esp", lambda name: REFUSED)
    monkeypatch.setattr(programs, "find", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(strongswan, "PLUGIN_DIR", tmp_path)
    with pytest.raises(UserError) as caught:
        resolve(TunnelKind.IPSEC)
    assert str(caught.value) == (
        "tunnel.implementation: ESP by libipsec needs strongSwan plugins that are not "
        "installed: openssl (libstrongswan-standard-plugins), kernel-libipsec "
        "(libcharon-extra-plugins), vici (strongswan-swanctl)"
    )


def test_a_missing_charon_is_refused_before_anything_is_set_up(kernel, monkeypatch):
    monkeypatch.setattr(programs, "find", lambda name: None)
    with pytest.raises(UserError) as caught:
        resolve(TunnelKind.VXLAN, protection=Protection.IPSEC)
    assert str(caught.value) == (
        "required program '/usr/lib/ipsec/charon' (strongSwan's IKE daemon, from "
        "strongswan-charon) was not found; run `make run`"
    )


def test_esp_device_mtu_of_protection():
    spec = TunnelSpec("kernel", cipher=Cipher.AES_256_GCM, protection=Protection.IPSEC)
    assert esp_device_mtu(1500, replace(spec, esp_implementation=LIBIPSEC)) == 1400
    assert esp_device_mtu(1500, replace(spec, esp_implementation=KERNEL)) == 1446
    assert esp_device_mtu(1300, replace(spec, esp_implementation=LIBIPSEC)) == 1238


def _sa(**changes: Any) -> ChildSa:
    sa = ChildSa("tb", "INSTALLED", "TUNNEL", True, "AES_GCM_16", "256", 0, 0, 0, 0)
    return replace(sa, **changes)


def test_a_different_negotiated_algorithm_is_an_error():
    session = Session(None, LIBIPSEC, Cipher.CHACHA20_POLY1305, EspMode.TUNNEL)  # type: ignore[arg-type]
    with pytest.raises(LabError) as caught:
        session._check({"gw": [_sa()]}, "strongSwan 5.9.8")
    assert str(caught.value) == (
        "ESP on gw negotiated AES_GCM_16-256, not the asked chacha20-poly1305 (chacha20poly1305)"
    )
    with pytest.raises(LabError) as caught:
        Session(None, LIBIPSEC, Cipher.AES_256_GCM, EspMode.TUNNEL)._check(  # type: ignore[arg-type]
            {"client": [_sa(encap=False)]}, "strongSwan 5.9.8"
        )
    assert str(caught.value) == (
        "ESP on client is TUNNEL mode, encap=False; asked TUNNEL mode, encap=True"
    )


def test_what_establishing_found_is_recorded():
    session = Session(None, LIBIPSEC, Cipher.AES_256_GCM, EspMode.TUNNEL)  # type: ignore[arg-type]
    session._check({"client": [_sa()], "gw": [_sa()]}, "strongSwan 5.9.8")
    assert session.found == EspFound(
        implementation="libipsec",
        version="strongSwan 5.9.8",
        cipher="aes-256-gcm",
        algorithm="AES_GCM_16-256",
        mode="tunnel",
        encapsulation="udp",
    )
    # stored under the trial record's fields, and read back the same
    resolved = Resolved()
    resolved.record_setup(SetupFound(esp=session.found))
    assert resolved.to_dict()["esp_algorithm"] == "AES_GCM_16-256"
    assert resolved.esp.encapsulation == "udp"
    assert Resolved.from_dict(resolved.to_dict()).setup_found() == SetupFound(esp=session.found)


def test_the_psk_file_is_root_only_from_the_start(tmp_path, monkeypatch):
    monkeypatch.setattr("tunnelbench.lab.state.STATE_ROOT", tmp_path)
    state = LabState(lab_id="ab12cd")
    state.save()
    host = NetnsHost("tb-ab12cd-gw", state)
    path = state.directory / "swanctl-gw.conf"
    os.umask(0o022)
    host.write(path, "secret = 0x00\n", mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert str(path) in state.files  # teardown removes it
    with pytest.raises(FileExistsError):  # never reuses (or widens) an existing file
        host.write(path, "other\n", mode=0o600)
    link = state.directory / "link.conf"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):  # never through a symlink
        host.write(link, "x\n")
    assert not (tmp_path / "elsewhere").exists()


def test_teardown_removes_recorded_directories(tmp_path, monkeypatch):
    monkeypatch.setattr("tunnelbench.lab.state.STATE_ROOT", tmp_path)
    state = LabState(lab_id="ab12cd")
    state.save()
    directory = state.directory / "strongswan-gw"
    state.add_directory(directory)
    directory.mkdir()
    state.add_file(directory / "charon.pid")
    (directory / "charon.pid").write_text("1\n")
    assert teardown(state) == []
    assert not directory.exists() and not state.directory.exists()


def test_labels_name_the_protection_and_who_does_esp():
    def label(tunnel: TunnelSettings, resolved: dict[str, str]) -> str:
        config = TrialConfig(tunnel=tunnel)
        record = resolved_for(config, resolved) if resolved else Resolved()
        return ConfigSummary("k", config, record, [], None, None, None).label

    protected = TunnelSettings(kind=TunnelKind.VXLAN, protection=Protection.IPSEC)
    resolved = {"tunnel_implementation": "kernel", "esp_implementation": "libipsec"}
    assert label(protected, resolved) == "vxlan+ipsec (libipsec)"
    assert label(TunnelSettings(kind=TunnelKind.VXLAN), resolved) == "vxlan"
    ipsec = {"tunnel_implementation": "libipsec", "esp_implementation": "libipsec"}
    assert label(TunnelSettings(kind=TunnelKind.IPSEC), ipsec) == "ipsec (libipsec)"
