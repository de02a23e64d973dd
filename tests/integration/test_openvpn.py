"""OpenVPN end to end: both ciphers carry real traffic through the tunnel, what ran is
recorded, the per-lab key material never reaches the store or a report and goes with the
lab, and a daemon that does not do what was asked fails the set-up."""

import re
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store
from tunnelbench.cli import main as cli
from tunnelbench.errors import LabError
from tunnelbench.kinds import Cipher, TunnelKind
from tunnelbench.lab import netns
from tunnelbench.model.plan import LabSettings, TunnelSettings
from tunnelbench.system import probing
from tunnelbench.system.probing import Check
from tunnelbench.tunnels import REGISTRY, openvpn, openvpn_pki

pytestmark = pytest.mark.skipif(
    probing.program("openvpn").ok is not True, reason="openvpn is not installed"
)

# AES-256-GCM with IPv4 traffic, ChaCha20-Poly1305 with IPv6 (the tunnel is IPv4 outside).
PLAN = """
name = "openvpn-ciphers"
repetitions = 1
[base.tunnel]
kind = "openvpn"
[base.traffic]
duration = 1
warmup = 0
[matrix]
cipher = [
    { "tunnel.cipher" = "aes-256-gcm", "traffic.family" = 4 },
    { "tunnel.cipher" = "chacha20-poly1305", "traffic.family" = 6 },
]
"""


def _received_bytes(store: Store, trial) -> int:
    return sum(
        int(doc["end"][k]["bytes"])
        for doc in store.artifact(trial.id, "iperf3")
        for k in doc["end"]
        if k.startswith("sum_received")
    )


def test_both_ciphers_carry_traffic_through_the_tunnel_and_are_recorded(tmp_path):
    plan, db = tmp_path / "plan.toml", tmp_path / "r.db"
    plan.write_text(PLAN)
    done = tunnelbench("run", str(plan), "--db", str(db), "-q", "--no-reports")
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store(db)
    trials = store.trials(store.run("latest").id)
    assert all(t.status == "ok" for t in trials), [t.error for t in trials]
    tunnels = [t for t in trials if t.config.tunnel.kind == "openvpn"]
    assert [(t.config.tunnel.cipher, t.config.traffic.family) for t in tunnels] == [
        ("aes-256-gcm", 4),
        ("chacha20-poly1305", 6),
    ]
    dco = probing.openvpn_dco()
    for trial, name in zip(tunnels, ("AES-256-GCM", "CHACHA20-POLY1305"), strict=True):
        resolved = trial.resolved.to_dict()
        assert resolved["tunnel_implementation"] == "openvpn"
        assert re.match(
            r"OpenVPN 2\.6\.\d+, OpenSSL \S+ \(/\S+/openvpn\)$", resolved["tunnel_version"]
        )
        assert resolved["tunnel_mtu"] == 1448
        assert resolved["tunnel_cipher"] == trial.config.tunnel.cipher
        assert resolved["openvpn_data_cipher"] == name
        assert resolved["openvpn_dco"] is bool(dco.ok)
        assert dco.detail in resolved["openvpn_dco_reason"]
        # Every byte iperf3 counted crossed the tunnel devices: sent into the client's,
        # decapsulated out of the gateway's.
        received = _received_bytes(store, trial)
        assert trial.metrics["goodput_bps"] > 50e6
        assert trial.metrics["tunnel.client.tx_bytes"] >= received
        assert trial.metrics["tunnel.gw.rx_bytes"] >= received
        # ... each packet in one UDP datagram over the WAN: full-sized segments (1448
        # bytes) fit the 1500-byte WAN with OpenVPN's 52 bytes, unfragmented. (The
        # gateway receives more datagrams than it decrypts: its socket buffer overflows.)
        sent, datagrams = (
            trial.metrics["tunnel.client.tx_packets"],
            trial.metrics["link.client.wan.tx_packets"],
        )
        assert datagrams <= sent * 1.01 + 20
        assert trial.metrics["tunnel.gw.rx_packets"] <= trial.metrics["link.gw.wan.rx_packets"]
        # Both daemons were sampled.
        assert trial.metrics["proc.openvpn@client"] > 0 and trial.metrics["proc.openvpn@gw"] > 0
    versions = store.run("latest").environment.versions or {}
    assert versions["openvpn/openvpn"].startswith("OpenVPN 2.6.")
    report = tunnelbench("report", "latest", "--db", str(db))
    assert "aes-256-gcm" in report.stdout and "chacha20-poly1305" in report.stdout


def _secret_lines(text: str) -> list[str]:
    """The lines of a PEM or OpenVPN key file that carry key material."""
    return [
        line.strip()
        for line in text.splitlines()
        if len(line.strip()) >= 16 and not line.startswith(("-----", "#"))
    ]


def test_key_material_stays_out_of_the_store_and_reports_and_goes_with_the_lab(
    tmp_path, monkeypatch
):
    made: dict[Path, str] = {}
    real_install = openvpn_pki.install

    def spying(site, role, texts, own):
        credentials = real_install(site, role, texts, own)
        for path in [credentials.ca, credentials.cert, credentials.key, credentials.tls_crypt]:
            assert path.parent == site.directory
            assert path.stat().st_mode & 0o777 == 0o600, path
            assert str(path) in site.state.files
            made[path] = path.read_text()
        return credentials

    monkeypatch.setattr(openvpn_pki, "install", spying)
    db = tmp_path / "r.db"
    handler = signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(
            ["run", "--tunnels", "openvpn", "--streams", "1", "--runs", "1"]
            + ["--duration", "1", "--warmup", "0", "-q", "--db", str(db)]
        )
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert code == 0
    assert len(made) == 8  # each end: the CA's certificate, its own and its key, tls-crypt
    # The CA's key never reached a disk: the only private keys written are the ends' own.
    keys = sorted(p.name for p, text in made.items() if "PRIVATE KEY" in text)
    assert keys == ["openvpn-client-client.key", "openvpn-gw-server.key"]
    secrets = [line for text in made.values() for line in _secret_lines(text)]
    assert len(secrets) > 20
    connection = sqlite3.connect(db)
    dumped = "\n".join(connection.iterdump())
    connection.close()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".toml"]
    assert {p.suffix for p in written} >= {".db", ".html", ".md"}
    everything = dumped + "".join(p.read_bytes().decode("latin-1") for p in written)
    assert "PRIVATE KEY" not in everything and "BEGIN CERTIFICATE" not in everything
    assert "OpenVPN Static key" not in everything
    assert [line for line in secrets if line in everything] == []
    assert [p for p in made if p.exists()] == []


@pytest.mark.parametrize("fault", ["dco fallback", "cipher mismatch"])
def test_a_daemon_that_does_not_do_what_was_asked_fails_the_set_up(monkeypatch, fault):
    if fault == "dco fallback":
        # The kernel "has" DCO, so no --disable-dco: openvpn falls back to a TUN device.
        monkeypatch.setattr(openvpn, "kernel_dco", lambda host: Check(True, "ovpn-dco (test)"))
        expected = r"openvpn on \w+ made a tun device, not ovpn-dco .*disabling data channel"
    else:
        real = openvpn.daemon_argv

        def client_wants_chacha(binary, peer, credentials, mtu, cipher, dco):
            own = cipher if peer.server else "CHACHA20-POLY1305"
            return real(binary, peer, credentials, mtu, own, dco)

        monkeypatch.setattr(openvpn, "daemon_argv", client_wants_chacha)
        expected = "openvpn on client negotiated CHACHA20-POLY1305 data cipher, not AES-256-GCM"
    tunnel = REGISTRY.get(TunnelKind.OPENVPN)
    spec = tunnel.resolve(TunnelSettings(kind=TunnelKind.OPENVPN, cipher=Cipher.AES_256_GCM), 1500)
    lab = netns.build(LabSettings(), tunnel=True)
    try:
        with pytest.raises(LabError, match=expected):
            tunnel.setup(lab, spec)
    finally:
        lab.teardown()
    assert not lab.directory.exists()
