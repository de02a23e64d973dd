"""Every WireGuard implementation this machine has, for real: a plan with
``tunnel.implementation`` as its axis carries traffic through each (the tunnel devices
counted every byte iperf3 received), records the implementation and its exact version,
and samples each daemon's CPU; each daemon is the binary it claims to be; boringtun's
threads are held by a CPU budget and it carries jumbo frames from the first packet.

Kernel WireGuard is skipped with the kernel's reason where the kernel lacks it (this
VM); an implementation that is not installed is skipped with its reason.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench import capabilities, skips
from tunnelbench.bench.store import Store
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab import cgroup, netns
from tunnelbench.model.plan import LabSettings, LinkSettings, TrialConfig, TunnelSettings
from tunnelbench.system import programs
from tunnelbench.tunnels import REGISTRY
from tunnelbench.tunnels.wireguard import USERSPACE

ROOT = Path(__file__).resolve().parents[2]
WG = REGISTRY.get(TunnelKind.WIREGUARD)
PLAN = """
name = "wireguard-implementations-test"
repetitions = 1

[base.tunnel]
kind = "wireguard"

[base.traffic]
streams = 1
duration = 1
warmup = 0

[matrix]
"tunnel.implementation" = ["kernel", "wireguard-go", "wireguard-go-debian", "boringtun"]
"""


def pinned(script: str) -> str:
    match = re.search(r"^version=(\S+)$", (ROOT / "scripts" / script).read_text(), re.MULTILINE)
    assert match is not None
    return match.group(1)


def debian_version() -> str:
    return subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "wireguard-go"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def expected_version(implementation: str) -> list[str]:
    """Parts the recorded version of an implementation must contain."""
    if implementation == "kernel":
        return [f"linux {os.uname().release}"]
    binary = programs.find(USERSPACE[implementation].program)
    assert binary is not None
    if implementation == "wireguard-go":
        go = pinned("install-wireguard-go")
        return ["wireguard-go v", f"built from golang.zx2c4.com/wireguard@{go}", f"({binary})"]
    if implementation == "wireguard-go-debian":
        package = f"Debian package wireguard-go {debian_version()}"
        return ["wireguard-go v", package, "(/usr/bin/wireguard-go)"]
    crate = pinned("install-boringtun")
    return [f"boringtun {crate}, built from crates.io boringtun-cli {crate}", f"({binary})"]


def runnable(implementation: str) -> str | None:
    """Why this machine cannot run the implementation, or None."""
    config = TrialConfig(tunnel=TunnelSettings(TunnelKind.WIREGUARD, implementation))
    return skips.unmet(config, capabilities.probe())


def received_bytes(store: Store, trial: Any) -> int:
    docs = store.artifact(trial.id, "iperf3")
    return sum(int(doc["end"]["sum_received"]["bytes"]) for doc in docs)


def test_a_plan_compares_every_implementation_and_records_each_version(tmp_path):
    plan, db = tmp_path / "impls.toml", tmp_path / "r.db"
    plan.write_text(PLAN)
    done = tunnelbench("run", str(plan), "-q", "--no-reports", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store(db)
    run = store.run("latest")
    trials = {
        t.config.tunnel.implementation: t
        for t in store.trials(run.id)
        if t.config.tunnel.kind == "wireguard"
    }
    assert tuple(trials) == WG.implementations
    for implementation, trial in trials.items():
        assert implementation is not None  # each was named
        if (reason := runnable(implementation)) is not None:
            # Skipped with the reason, naming the setting; never run as something else.
            assert trial.status == "skipped", trial.error
            assert trial.error is not None and trial.error.startswith("tunnel.implementation: ")
            assert trial.resolved.to_dict() == {}
            print(f"{implementation}: skipped here: {trial.error} ({reason})")
            continue
        assert trial.status == "ok", trial.error
        version = trial.resolved.to_dict()["tunnel_version"]
        assert trial.resolved.to_dict()["tunnel_implementation"] == implementation
        for part in expected_version(implementation):
            assert part in version, (implementation, version)
        assert (run.environment.versions or {})[f"wireguard/{implementation}"] == version
        # The traffic crossed the tunnel: the sender's tunnel device took in, and the
        # receiver's gave out, at least every byte iperf3 counted.
        metrics, got = trial.metrics, received_bytes(store, trial)
        assert got > 1e6
        assert metrics["tunnel.client.tx_bytes"] >= got, metrics
        assert metrics["tunnel.gw.rx_bytes"] >= got, metrics
        if implementation != "kernel":
            # Each daemon's CPU was sampled under its implementation's name.
            for role in ("client", "gw"):
                assert metrics[f"proc.{implementation}@{role}"] > 1, metrics
    # The run's table names each implementation.
    table = tunnelbench("report", "--db", str(db))
    for implementation, trial in trials.items():
        if trial.status == "ok":
            assert f"wireguard ({implementation})" in table.stdout


def _daemons_exe(handle: Any) -> set[str]:
    return {os.readlink(f"/proc/{d.pid}/exe") for d in handle.daemons.values()}


@pytest.mark.parametrize("implementation", list(USERSPACE))
def test_each_daemon_is_its_own_binary_and_carries_traffic(implementation):
    if reason := runnable(implementation):
        pytest.skip(reason)
    spec = WG.resolve(TunnelSettings(TunnelKind.WIREGUARD, implementation), 1500)
    binary = programs.find(USERSPACE[implementation].program)
    assert binary is not None
    lab = netns.build(LabSettings(), tunnel=True)
    try:
        handle = WG.setup(lab, spec)
        assert handle.implementation == implementation
        assert set(handle.daemons) == {"client", "gw"}
        assert _daemons_exe(handle) == {os.path.realpath(binary)}
        target = lab.address(lab.chain.server, lab.chain.roles[-2], 4)
        ping = lab.exec("client", ["ping", "-c", "1", "-W", "2", target], check=False)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        shown = lab.exec("gw", ["wg", "show", handle.devices["gw"], "transfer"]).stdout
        assert int(shown.split()[1]) > 0  # received through WireGuard, as wg reports it
    finally:
        lab.teardown()


def test_the_pinned_and_debians_wireguard_go_are_different_builds():
    for name in ("wireguard-go", "wireguard-go-debian"):
        if reason := runnable(name):
            pytest.skip(reason)
    pinned_path = programs.find("wireguard-go")
    assert pinned_path is not None and pinned_path != "/usr/bin/wireguard-go"
    assert Path(pinned_path).read_bytes() != Path("/usr/bin/wireguard-go").read_bytes()
    ours, debians = WG.version("wireguard-go"), WG.version("wireguard-go-debian")
    assert ours.split(",")[0] != debians.split(",")[0]  # what each prints: its own release
    assert f"({pinned_path})" in ours and "(/usr/bin/wireguard-go)" in debians


def test_a_cpu_budget_holds_every_boringtun_thread(monkeypatch):
    if reason := runnable("boringtun"):
        pytest.skip(reason)
    monkeypatch.setenv("WG_THREADS", "1")  # boringtun reads it; the explicit flag wins
    spec = WG.resolve(TunnelSettings(TunnelKind.WIREGUARD, "boringtun"), 1500)
    lab = netns.build(LabSettings(), tunnel=True)
    try:
        handle = WG.setup(lab, spec)
        limit = cgroup.limit_cpu(lab.state, handle.daemons, 0.25)
        members = "cgroup.threads" if limit.version == 2 else "tasks"
        for role, daemon in handle.daemons.items():
            threads = {t.name for t in Path(f"/proc/{daemon.pid}/task").iterdir()}
            assert len(threads) == 5, "boringtun runs 4 worker threads besides its main one"
            held = set((Path(limit.cgroups[role]) / members).read_text().split())
            assert threads <= held
    finally:
        lab.teardown()


def test_boringtun_carries_jumbo_frames_from_the_first_packet():
    """boringtun reads packets into a buffer of the MTU it last saw, and looks at the
    device's MTU once a second: set-up waits for it, so no large packet is cut short."""
    if reason := runnable("boringtun"):
        pytest.skip(reason)
    settings = LabSettings(wan=LinkSettings(mtu=9000), lan_mtu=9000)
    spec = WG.resolve(TunnelSettings(TunnelKind.WIREGUARD, "boringtun"), 9000)
    assert spec.mtu == 8920
    lab = netns.build(settings, tunnel=True)
    try:
        WG.setup(lab, spec)
        target = lab.address(lab.chain.server, lab.chain.roles[-2], 4)
        for size in (100, 8000):  # the first makes the handshake
            ping = ["ping", "-c", "1", "-W", "1", "-M", "do", "-s", str(size), target]
            done = lab.exec("client", ping, check=False)
            assert done.returncode == 0, f"{size}-byte ping lost: {done.stdout}"
    finally:
        lab.teardown()


SETUP_AS_LOGGED_IN_USER = """
import os, sys
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab import netns
from tunnelbench.model.plan import LabSettings, TunnelSettings
from tunnelbench.tunnels import REGISTRY
from tunnelbench.tunnels.wireguard import UAPI_DIR

wg = REGISTRY.get(TunnelKind.WIREGUARD)
lab = netns.build(LabSettings(), tunnel=True)
try:
    wg.setup(lab, wg.resolve(TunnelSettings(TunnelKind.WIREGUARD, "boringtun"), 1500))
    stat = UAPI_DIR.stat()
    print(stat.st_uid, stat.st_gid)
finally:
    lab.teardown()
"""


def test_boringtun_leaves_the_socket_directory_to_root():
    """boringtun gives /var/run/wireguard to the login user (getlogin(), e.g. whoever ran
    sudo: the audit login uid says who). Set-up gives it back."""
    if reason := runnable("boringtun"):
        pytest.skip(reason)
    # As after `sudo` from a session of user nobody: the login uid is nobody's.
    as_nobody = "echo 65534 > /proc/self/loginuid && exec " + " ".join(
        [sys.executable, "-c", shlex.quote(SETUP_AS_LOGGED_IN_USER)]
    )
    done = subprocess.run(["sh", "-c", as_nobody], capture_output=True, text=True, timeout=60)
    if "loginuid" in done.stderr:
        pytest.skip(f"cannot set a login uid here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0"]
    assert Path("/var/run/wireguard").stat().st_uid == 0
