"""OpenVPN: its settings, command lines, DCO decision and the checks on what the daemons
report.

Logs, ``ip -d -j link`` output, ``openvpn --version`` and ``genl`` output in
``tests/fixtures/openvpn`` are real captures from this VM's labs (OpenVPN 2.6.14, no
ovpn-dco): ``aes-256-gcm-*`` and ``chacha20-poly1305-*`` from working tunnels,
``mismatch-*`` from a lab whose client was given ChaCha20-Poly1305 and whose server
AES-256-GCM (each end started its data channel with its own fallback cipher: the
tunnel was "up" and carried nothing), ``dco-fallback-client.log`` from a daemon started
without ``--disable-dco`` on this kernel.
"""

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from tests.conftest import FIXTURES
from tunnelbench.bench import skips
from tunnelbench.cli import doctor
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Cipher, EspMode, Protection, TunnelKind
from tunnelbench.lab.host import NetnsHost
from tunnelbench.lab.state import LabState
from tunnelbench.model.encapsulation import Encapsulation, default_tunnel_mtu
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.system import probing, programs
from tunnelbench.system.probing import Check, Program
from tunnelbench.tunnels import REGISTRY
from tunnelbench.tunnels import openvpn_pki as pki
from tunnelbench.tunnels.openvpn import (
    DATA_CIPHERS,
    Dco,
    OpenVpn,
    Peer,
    check_cipher,
    check_dco,
    daemon_argv,
    data_cipher,
    dco_choice,
    negotiated_cipher,
    version_text,
)
from tunnelbench.tunnels.site import Site

CAPTURED = FIXTURES / "openvpn"
GOLDEN = json.loads((FIXTURES / "golden" / "openvpn-commands.json").read_text())
LAB = "/run/tunnelbench/labs/abc123"


def credentials(role: str, own: str) -> pki.Credentials:
    """An end's files as :func:`pki.install` names them in the site's directory."""
    return pki.Credentials(
        ca=Path(f"{LAB}/openvpn-{role}-ca.crt"),
        cert=Path(f"{LAB}/openvpn-{role}-{own}.crt"),
        key=Path(f"{LAB}/openvpn-{role}-{own}.key"),
        tls_crypt=Path(f"{LAB}/openvpn-{role}-tls-crypt.key"),
    )


SERVER = Peer("tbabc123-ovgw", server=True, local="198.18.0.2", remote="198.18.0.1")
CLIENT = Peer("tbabc123-ovct", server=False, local="198.18.0.1", remote="198.18.0.2")
CREDENTIALS = {SERVER: credentials("gw", pki.SERVER), CLIENT: credentials("client", pki.CLIENT)}
USERSPACE, OFFLOADED = Dco(False, "no module"), Dco(True, "the kernel has ovpn-dco")
VERSION = (CAPTURED / "version.txt").read_text()


def log(name: str) -> str:
    return (CAPTURED / f"{name}.log").read_text()


def resolve(**settings: Any):
    return REGISTRY.get(TunnelKind.OPENVPN).resolve(
        TunnelSettings(kind=TunnelKind.OPENVPN, **settings), 1500
    )


# --- settings ---


def test_overhead_and_default_mtu_are_the_ceiling_models():
    tunnel = REGISTRY.get(TunnelKind.OPENVPN)
    spec = resolve()
    assert tunnel.overhead(spec, 4) == 52 and tunnel.overhead(spec, 6) == 72
    model = default_tunnel_mtu(Encapsulation.OPENVPN, 1500, inner_family=4, outer_family=4)
    assert spec.mtu == tunnel.default_mtu(1500, spec) == model == 1448


def test_auto_is_aes_256_gcm_and_both_aeads_are_offered():
    assert resolve().cipher is Cipher.AES_256_GCM
    assert resolve(cipher=Cipher.CHACHA20_POLY1305).cipher is Cipher.CHACHA20_POLY1305
    assert resolve().implementation == "openvpn"
    assert resolve(mtu=1400).mtu == 1400
    assert DATA_CIPHERS == {
        Cipher.AES_256_GCM: "AES-256-GCM",
        Cipher.CHACHA20_POLY1305: "CHACHA20-POLY1305",
    }
    assert data_cipher(resolve(cipher=Cipher.CHACHA20_POLY1305)) == "CHACHA20-POLY1305"


def test_a_cipher_it_does_not_offer_is_refused_naming_tunnel_cipher(monkeypatch):
    monkeypatch.setattr(OpenVpn, "ciphers", (Cipher.AES_256_GCM,))
    with pytest.raises(UserError) as caught:
        resolve(cipher=Cipher.CHACHA20_POLY1305)
    assert str(caught.value) == (
        "tunnel.cipher: openvpn does not offer 'chacha20-poly1305'; allowed: auto, aes-256-gcm"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"implementation": "openvpn-dco"},
            "tunnel.implementation: 'openvpn-dco' is not an implementation of openvpn; "
            "allowed: auto, openvpn; did you mean 'openvpn'?",
        ),
        (
            {"protection": Protection.IPSEC},
            "tunnel.protection: openvpn cannot be wrapped in ipsec; only gre, gretap and vxlan can",
        ),
        (
            {"esp_mode": EspMode.TRANSPORT},
            "tunnel.esp_mode: 'transport' applies to ipsec and to tunnel.protection = 'ipsec'"
            " only, not to openvpn",
        ),
    ],
)
def test_settings_openvpn_cannot_do_are_refused_by_name(settings, message):
    with pytest.raises(UserError) as caught:
        resolve(**settings)
    assert str(caught.value) == message


def test_a_spec_without_a_cipher_has_no_data_cipher():
    with pytest.raises(LabError, match=r"tunnel\.cipher"):
        data_cipher(replace(resolve(), cipher=None))


# --- command lines (golden) ---


@pytest.mark.parametrize(
    ("name", "peer", "mtu", "cipher", "dco"),
    [
        ("server-userspace-aes", SERVER, 1448, "AES-256-GCM", USERSPACE),
        ("client-userspace-chacha", CLIENT, 1448, "CHACHA20-POLY1305", USERSPACE),
        ("client-dco-aes-jumbo", CLIENT, 8948, "AES-256-GCM", OFFLOADED),
    ],
)
def test_daemon_command_lines(name, peer, mtu, cipher, dco):
    argv = daemon_argv("/usr/sbin/openvpn", peer, CREDENTIALS[peer], mtu, cipher, dco)
    assert " ".join(argv) == GOLDEN[name]
    assert ("--disable-dco" in argv) is not dco.enabled
    # Only paths: no key material ever appears on a command line (or in the lab state).
    assert not any("BEGIN" in word for word in argv)


def test_pki_command_lines():
    assert " ".join(pki.genkey_argv("openssl")) == GOLDEN["pki-genkey"]
    ca = pki.ca_argv("openssl", Path("/lab/openvpn-ca.key"), "tunnelbench-abc123-ca")
    assert " ".join(ca) == GOLDEN["pki-ca"]
    leaf = pki.leaf_argv(
        "openssl",
        Path("/lab/openvpn-server.key"),
        Path("/lab/openvpn-ca.crt"),
        Path("/lab/openvpn-ca.key"),
        "tunnelbench-abc123-server",
        "serverAuth",
    )
    assert " ".join(leaf) == GOLDEN["pki-server"]


def test_the_tls_crypt_key_has_the_form_openvpn_genkey_writes():
    """``openvpn --genkey tls-crypt`` (2.6.14) writes three comment lines, the BEGIN line,
    16 lines of 32 hex digits and the END line; openvpn reads this one (the integration
    tests' tunnels use it)."""
    text = pki.static_key(bytes(range(256)))
    lines = text.splitlines()
    assert lines[:4] == [
        "#",
        "# 2048 bit OpenVPN static key",
        "#",
        "-----BEGIN OpenVPN Static key V1-----",
    ]
    assert lines[-1] == "-----END OpenVPN Static key V1-----" and len(lines) == 21
    assert lines[4] == "000102030405060708090a0b0c0d0e0f" and lines[19].endswith("fcfdfeff")
    assert all(len(line) == 32 for line in lines[4:20])
    with pytest.raises(ValueError):
        pki.static_key(b"short")


class _RecordingState:
    """A lab state that notes whether each file existed when it was recorded."""

    def __init__(self) -> None:
        self.files: list[tuple[Path, bool]] = []

    def add_file(self, path: Path) -> None:
        self.files.append((path, path.exists()))


class _FakeSite:
    """A site whose ends are the real namespace host over a recording state (no
    namespace is needed: writing a file is the host's own work)."""

    def __init__(self, directory: Path) -> None:
        self.state = _RecordingState()
        self.directory = directory

    def host(self, role: str) -> NetnsHost:
        return NetnsHost(f"tb-test-{role}", cast(LabState, self.state))

    def files(self, role: str) -> Path:
        return self.directory


MADE = pki.Made(
    "CA\n",
    "TLS\n",
    {"server": "S.crt\n", "client": "C.crt\n"},
    {"server": "S.key\n", "client": "C.key\n"},
)


def test_an_end_gets_its_own_files_recorded_first_created_0600_and_never_reused(tmp_path):
    site = _FakeSite(tmp_path)
    old = os.umask(0)  # even with no umask at all, the files are 0600
    try:
        got = pki.install(cast(Site, site), "client", MADE, pki.CLIENT)
    finally:
        os.umask(old)
    assert got == pki.Credentials(
        ca=tmp_path / "openvpn-client-ca.crt",
        cert=tmp_path / "openvpn-client-client.crt",
        key=tmp_path / "openvpn-client-client.key",
        tls_crypt=tmp_path / "openvpn-client-tls-crypt.key",
    )
    # recorded before each was created; only the client's own key, never the server's
    assert site.state.files == [(p, False) for p in (got.ca, got.cert, got.key, got.tls_crypt)]
    assert [p.read_text() for p in (got.ca, got.cert, got.key, got.tls_crypt)] == [
        "CA\n",
        "C.crt\n",
        "C.key\n",
        "TLS\n",
    ]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in tmp_path.iterdir())
    with pytest.raises(FileExistsError):
        pki.install(cast(Site, site), "client", MADE, pki.CLIENT)
    (tmp_path / "openvpn-gw-ca.crt").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        pki.install(cast(Site, site), "gw", MADE, pki.SERVER)
    assert not (tmp_path / "elsewhere").exists()


# --- DCO ---


def test_dco_when_the_kernel_has_it_and_openvpn_was_built_with_it():
    found = dco_choice(Check(True, "ovpn-dco 0.2.20231117"), VERSION.splitlines()[0])
    assert found == Dco(True, "the kernel has ovpn-dco 0.2.20231117")
    assert found.device_kind == "ovpn-dco"


def test_no_dco_without_the_module_and_the_reason_says_why():
    missing = Check(False, "no ovpn-dco-v2 netlink family in this kernel")
    assert dco_choice(missing, VERSION) == Dco(False, missing.detail)
    assert dco_choice(missing, VERSION).device_kind == "tun"
    assert dco_choice(Check(None, "genl is not installed"), VERSION) == Dco(
        False, "DCO could not be probed (genl is not installed)"
    )
    built_without = "OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [EPOLL] [AEAD]"
    assert dco_choice(Check(True, "ovpn-dco"), built_without) == Dco(
        False, "this openvpn was built without DCO support"
    )


def _probe_with(monkeypatch, captured: dict[str, Any]) -> Check:
    """probing.openvpn_dco() as it runs when ``genl`` prints ``captured``."""
    prefix = tuple(captured["argv"][:3])
    monkeypatch.setattr(probing, "namespace", lambda: (prefix, "as root"))
    monkeypatch.setattr(programs, "find", lambda name: f"/usr/sbin/{name}")

    def fake_run(argv, **_):
        assert argv == captured["argv"]
        return subprocess.CompletedProcess(
            argv, captured["returncode"], captured["stdout"], captured["stderr"]
        )

    monkeypatch.setattr(probing, "run", fake_run)
    probing.openvpn_dco.cache_clear()
    try:
        return probing.openvpn_dco()
    finally:
        probing.openvpn_dco.cache_clear()


def test_the_dco_probe_asks_for_the_netlink_family_openvpn_uses(monkeypatch):
    genl = json.loads((CAPTURED / "genl.json").read_text())
    missing = genl["genl-ovpn-dco-v2-missing"]
    assert missing["argv"][3:] == probing.openvpn_dco_argv()
    assert _probe_with(monkeypatch, missing) == Check(
        False,
        "no ovpn-dco-v2 netlink family in this kernel: the ovpn-dco module "
        "(openvpn-dco-dkms) is not available (RTNETLINK answers: No such file or directory)",
    )
    # A family that exists answers like this (nlctrl is in every kernel).
    found = dict(genl["genl-nlctrl-found"], argv=missing["argv"])
    monkeypatch.setattr(probing, "read", lambda path: "0.2.20231117\n")
    assert _probe_with(monkeypatch, found) == Check(True, "ovpn-dco 0.2.20231117")


# --- what the daemons report ---


@pytest.mark.parametrize("cipher", ["AES-256-GCM", "CHACHA20-POLY1305"])
def test_the_negotiated_cipher_is_read_from_both_logs(cipher):
    for role in ("client", "server"):
        text = log(f"{cipher.lower()}-{role}")
        assert "Initialization Sequence Completed" in text
        assert negotiated_cipher(text) == cipher
        assert check_cipher(role, cipher, text) == cipher


def test_a_data_channel_with_another_cipher_fails_the_set_up():
    with pytest.raises(LabError) as caught:
        check_cipher("client", "AES-256-GCM", log("mismatch-client"))
    assert str(caught.value) == (
        "openvpn on client negotiated CHACHA20-POLY1305 data cipher, not AES-256-GCM as "
        "tunnel.cipher asks: the trial would measure another cipher"
    )
    assert check_cipher("server", "AES-256-GCM", log("mismatch-server")) == "AES-256-GCM"
    with pytest.raises(LabError, match="negotiated no data cipher"):
        check_cipher("gw", "AES-256-GCM", "Initialization Sequence Completed\n")


def test_the_device_kind_must_match_the_dco_decision():
    check_dco("client", USERSPACE, log("aes-256-gcm-client"), tun=True)
    check_dco("client", OFFLOADED, "", tun=False)
    with pytest.raises(LabError) as caught:
        check_dco("client", OFFLOADED, log("dco-fallback-client"), tun=True)
    assert str(caught.value) == (
        "openvpn on client made a tun device, not ovpn-dco (DCO on: the kernel has ovpn-dco): "
        "2026-11-21 09:00:05 Note: Kernel support for ovpn-dco missing, disabling data "
        "channel offload."
    )
    with pytest.raises(LabError, match="made a ovpn-dco device, not tun"):
        check_dco("gw", USERSPACE, "", tun=False)


def test_version_names_openvpn_and_its_crypto_library():
    assert version_text(VERSION, "/usr/sbin/openvpn") == (
        "OpenVPN 2.6.14, OpenSSL 3.0.19 (/usr/sbin/openvpn)"
    )
    assert version_text("", "/x/openvpn") == "OpenVPN (unknown version) (/x/openvpn)"


# --- doctor ---


def _caps(openvpn: Program, dco: Check) -> probing.Capabilities:
    from tests.unit.test_doctor import VM

    return replace(VM, programs={**VM.programs, "openvpn": openvpn}, openvpn_dco=dco)


def test_doctor_reports_openvpn_its_version_and_dco():
    first = VERSION.splitlines()[0]
    found = Program(True, f"{first} (/usr/sbin/openvpn)", path="/usr/sbin/openvpn", version=first)
    missing = Check(False, "no ovpn-dco-v2 netlink family in this kernel")
    entry = doctor.collect(_caps(found, missing)).to_json()["implementations"]["openvpn"]
    assert entry["status"] == "yes" and entry["dco"] is False
    assert entry["detail"] == (
        "OpenVPN 2.6.14 (/usr/sbin/openvpn); DCO no, runs in userspace: "
        "no ovpn-dco-v2 netlink family in this kernel"
    )
    entry = doctor.collect(_caps(found, Check(True, "ovpn-dco 0.2"))).to_json()["implementations"][
        "openvpn"
    ]
    assert entry["dco"] is True
    assert entry["detail"].endswith("; DCO yes: the kernel has ovpn-dco 0.2")
    absent = Program(False, "openvpn is not installed")
    entry = doctor.collect(_caps(absent, missing)).to_json()["implementations"]["openvpn"]
    assert entry["status"] == "no" and entry["detail"] == "openvpn is not installed"
    assert "userspace openvpn" in doctor.render(doctor.collect(_caps(found, missing)))


# --- what this machine cannot run ---


def test_a_machine_without_openvpn_or_openssl_skips_it_naming_the_programs():
    from tests.unit.test_skips import FULL, config, without

    tunnel = TunnelSettings(kind=TunnelKind.OPENVPN)
    assert skips.unmet(config(tunnel=tunnel), FULL) is None
    bare = without(FULL, "programs", "openvpn", Program(False, "openvpn is not installed"))
    assert skips.unmet(config(tunnel=tunnel), bare) == (
        "tunnel.kind: openvpn needs openvpn, not installed here"
    )
    bare = without(bare, "programs", "openssl", Program(False, "openssl is not installed"))
    assert skips.unmet(config(tunnel=tunnel), bare) == (
        "tunnel.kind: openvpn needs openvpn and openssl, not installed here"
    )


def test_a_cpu_budget_is_skipped_when_the_data_channel_runs_in_the_kernel():
    from tests.unit.test_skips import FULL, config

    first = VERSION.splitlines()[0]
    with_openvpn = replace(
        FULL,
        programs={**FULL.programs, "openvpn": Program(True, first, path="/o", version=first)},
    )
    budget = config(tunnel=TunnelSettings(kind=TunnelKind.OPENVPN, cpu_budget=0.5))
    userspace = replace(with_openvpn, openvpn_dco=Check(False, "no ovpn-dco-v2"))
    assert skips.unmet(budget, userspace) is None
    offloaded = replace(with_openvpn, openvpn_dco=Check(True, "ovpn-dco 0.2"))
    assert skips.unmet(budget, offloaded) == (
        "tunnel.cpu_budget: needs a userspace tunnel daemon; openvpn's data channel runs in "
        "the kernel here (DCO)"
    )
