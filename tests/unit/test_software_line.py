"""The reports' software line names every tunnel implementation that ran, with its
version: this machine's, a VM guest's and a remote run's hosts' (whose versions only the
trials record), and ESP around another tunnel."""

from pathlib import Path

from tunnelbench.bench.store import Store
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import Experiment, TrialConfig, TunnelSettings
from tunnelbench.model.records import (
    Resolved,
    RunRecord,
    RunStatus,
    TrialRecord,
    TrialStatus,
    TunnelSetup,
)
from tunnelbench.report import software

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
PINNED = (
    "wireguard-go v0.0.20250522, built from golang.zx2c4.com/wireguard@"
    "v0.0.0-20260522210424-ecfc5a8d5446 (/work/main/.tools/bin/wireguard-go)"
)
DEBIAN = (
    "wireguard-go v0.0.20220316, Debian package wireguard-go 0.0.20220316-1+b4"
    " (/usr/bin/wireguard-go)"
)


def _run(versions: dict[str, str]) -> RunRecord:
    env = {"versions": versions, "iproute2": "iproute2-6.1.0", "tunnelbench": "0.1.0"}
    return RunRecord(
        1,
        0.0,
        1.0,
        RunStatus.COMPLETE,
        "tunnelbench run",
        Experiment(()),
        Environment.from_dict(env),
    )


def _trial(
    seq: int, kind: str, implementation: str, version: str, esp: str | None = None
) -> TrialRecord:
    """A trial of ``kind`` that ran ``implementation`` (and ESP by the kernel, with
    strongSwan ``esp``, around it)."""
    resolved = Resolved(TunnelSetup(implementation, version))
    if esp is not None:
        resolved.esp.implementation, resolved.esp.version = "kernel", esp
    config = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind(kind)))
    return TrialRecord(seq, 1, seq, 1, kind, config, resolved, TrialStatus.OK, None, {})


def test_a_local_run_names_what_this_machine_resolved_once():
    store = Store.read(RUNS / "wireguard-implementations.db")
    try:
        run = store.run("1")
        trials = store.trials(1)
    finally:
        store.close()
    names = [name for name, _ in software.entries(run, trials)]
    assert names == [
        "wireguard/wireguard-go",
        "wireguard/wireguard-go-debian",
        "wireguard/boringtun",
        "iperf3",
        "iproute2",
        "tunnelbench",
    ]  # the baseline's none/kernel is no implementation; each named once
    assert software.tunnel_line(run, trials).startswith(
        "wireguard-go: wireguard-go v0.0.20250522, built from golang.zx2c4.com/wireguard@"
        "v0.0.0-20260522210424-ecfc5a8d5446; wireguard-go-debian: wireguard-go v0.0.20220316,"
        " Debian package wireguard-go 0.0.20220316-1+b4; boringtun:"
    )


def test_a_guests_and_a_remote_runs_implementations_come_from_their_trials():
    """A guest resolves its tunnels on its own kernel and a remote run's tunnel is built
    on the hosts: the run's environment has only the generator's version."""
    run = _run({"iperf3": "iperf 3.12"})
    esp = "strongSwan 5.9.8"
    trials = [
        _trial(1, "none", "kernel", "linux 6.1"),
        _trial(2, "wireguard", "kernel", "linux 6.1"),
        _trial(3, "wireguard", "kernel", "linux 6.1"),
        _trial(4, "wireguard", "wireguard-go", f"{DEBIAN} (client and gw)"),
        _trial(5, "gretap", "kernel", "linux 6.1", esp),
        _trial(6, "ipsec", "kernel", "strongSwan 5.9.8, ESP by linux 6.1", esp),
    ]
    assert software.entries(run, trials) == [
        ("wireguard/kernel", "linux 6.1"),
        ("wireguard/wireguard-go", f"{DEBIAN} (client and gw)"),
        ("gretap/kernel", "linux 6.1"),
        ("esp/kernel", "strongSwan 5.9.8"),
        ("ipsec/kernel", "strongSwan 5.9.8, ESP by linux 6.1"),
        ("iperf3", "iperf 3.12"),
        ("iproute2", "iproute2-6.1.0"),
        ("tunnelbench", "0.1.0"),
    ]
    assert software.line(run, trials).startswith(
        f"wireguard/kernel: linux 6.1; wireguard/wireguard-go: {DEBIAN} (client and gw); "
    )


def test_an_implementation_that_ran_in_two_versions_is_named_twice():
    """The host's pinned wireguard-go and a guest's, or the host's kernel and a guest's."""
    run = _run({"wireguard/wireguard-go": PINNED, "wireguard/kernel": "linux 6.18.44"})
    trials = [
        _trial(1, "wireguard", "wireguard-go", PINNED),
        _trial(2, "wireguard", "wireguard-go", DEBIAN),
        _trial(3, "wireguard", "kernel", "linux 6.1.0-28-amd64"),
    ]
    assert [e for e in software.entries(run, trials) if "/" in e[0]] == [
        ("wireguard/wireguard-go", PINNED),
        ("wireguard/kernel", "linux 6.18.44"),
        ("wireguard/wireguard-go", DEBIAN),
        ("wireguard/kernel", "linux 6.1.0-28-amd64"),
    ]
    assert software.tunnel_line(run, trials) == (
        "wireguard-go: wireguard-go v0.0.20250522, built from"
        " golang.zx2c4.com/wireguard@v0.0.0-20260522210424-ecfc5a8d5446; kernel: linux 6.18.44;"
        " wireguard-go: wireguard-go v0.0.20220316, Debian package wireguard-go"
        " 0.0.20220316-1+b4; kernel: linux 6.1.0-28-amd64"
    )
