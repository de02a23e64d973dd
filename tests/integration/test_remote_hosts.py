"""Real hosts over SSH, against real OpenSSH servers: one sshd per role in the lab's
namespaces (tests/sshd.py), reached through ssh's ProxyCommand, each its own "machine"
with its own host key, login and PATH. One role runs with busybox's tools only, as on
OpenWrt. Every figure is held against the hosts' own counters, and every host is checked
to keep nothing of the run afterwards."""

import json
import os
import platform
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.helpers import latest, remote, tunnelbench
from tests.sshd import REPO, SshdHosts
from tunnelbench.bench.store import Store
from tunnelbench.kinds import StreamMode
from tunnelbench.lab import netns
from tunnelbench.lab.state import process_start_time
from tunnelbench.model.plan import LabSettings, TrafficSettings
from tunnelbench.remote import hostsfile, masters, probes
from tunnelbench.remote.session import Session
from tunnelbench.report import view
from tunnelbench.traffic.iperf3 import Iperf3

ROLES = ("client", "gw", "server")


@dataclass
class Hosts:
    lab: netns.Lab
    farm: SshdHosts
    work: Path

    def file(self, tunnel: str = "", name: str = "hosts.toml", config: Path | None = None) -> Path:
        path = self.work / name
        path.write_text(
            f'ssh_config = "{config or self.farm.ssh_config}"\nconnect_timeout = 3\n'
            '[client]\nssh = "client"\n[gw]\nssh = "gw"\naddress = "198.18.0.2"\n'
            f'[server]\nssh = "server"\naddress = "198.18.1.2"\n{tunnel}'
        )
        return path


BUILD = '[tunnel]\nmode = "build"\nkind = "wireguard"\nvia = "198.18.1.1"\n'


def leftovers() -> list[str]:
    """What a run left on the hosts (their /tmp is this machine's): run directories."""
    return sorted(str(p) for p in Path("/tmp").glob("tunnelbench.*"))


def routes(lab: netns.Lab) -> dict[str, str]:
    return {
        r: subprocess.run(
            ["ip", "-n", lab.ns(r), "-o", "route"], capture_output=True, text=True
        ).stdout
        for r in ROLES
    }


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    """A plain lab (client - gw - server, no tunnel) with an sshd in each namespace; the
    server has busybox's tools only."""
    work = tmp_path_factory.mktemp("remote")
    lab = netns.build(LabSettings(), tunnel=False)
    try:
        with SshdHosts(
            work / "ssh", {r: lab.ns(r) for r in ROLES}, busybox=frozenset({"server"})
        ) as farm:
            yield Hosts(lab, farm, work)
    finally:
        lab.teardown()


def test_hosts_check_reports_each_host_and_changes_nothing(hosts):
    before = routes(hosts.lab)
    done = tunnelbench("hosts", "check", str(hosts.file(BUILD)))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert (
        "road-warrior, DUT gw, tunnel wireguard built by tunnelbench between client and gw" in out
    )
    assert "gw (DUT): ssh gw" in out
    kernel = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    assert out.count(f"kernel {kernel} ") == 3
    blocks = out.split("\nserver: ssh server\n")
    assert "busybox no" in blocks[0] and "busybox yes" in blocks[1]  # the server is busybox's
    assert "IPv4 forwarding on" in blocks[0].split("gw (DUT)")[1]
    assert "iperf3: iperf 3." in blocks[1]
    # each host's tunnel software: the others' PATH has tunnelbench's pinned wireguard-go
    # first, the busybox server has none; no host here has kernel WireGuard
    pinned = (REPO / ".tools" / "bin" / "wireguard-go.version").read_text().strip()
    for block in blocks[0].split("\ngw (DUT): ssh gw\n"):
        assert "  wireguard-go: wireguard-go v0.0." in block
        assert (
            f"built from golang.zx2c4.com/wireguard@{pinned} ({REPO}/.tools/bin/wireguard-go)"
            in block
        )
        assert "  kernel WireGuard: not found" in block
    assert "  wireguard-go: " not in blocks[1]
    assert "changed nothing on any host" in out
    # the server's shell is busybox's, with its applets only: no bash, no python
    shell = [
        "ssh",
        "-F",
        str(hosts.farm.ssh_config),
        "server",
        "for p in bash python3 awk; do command -v $p; done",
    ]
    assert subprocess.run(shell, capture_output=True, text=True).stdout.split() == ["awk"]
    assert leftovers() == [] and routes(hosts.lab) == before


def test_a_run_across_a_tunnel_tunnelbench_builds(hosts):
    """none, then WireGuard built between the client and the DUT; the DUT's cores and
    counters, every host's sampler cost; nothing left on any host."""
    before = routes(hosts.lab)
    work = hosts.work / "build"
    work.mkdir()
    # The router's owner gave its server-side port a queue: its counters are read too.
    lan = hosts.lab.link_device("gw", "server")
    queue = ["ip", "netns", "exec", hosts.lab.ns("gw"), "tc", "qdisc"]
    subprocess.run(
        [*queue, "add", "dev", lan, "root", "handle", "1:", "pfifo", "limit", "1000"], check=True
    )
    try:
        done = tunnelbench(
            "run", "--hosts", str(hosts.file(BUILD)), "--duration", "2", "--runs", "1",
            "--streams", "2", "--db", str(work / "r.db"), "-q", cwd=work,
        )  # fmt: skip
    finally:
        subprocess.run([*queue, "del", "dev", lan, "root"], check=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    store = Store.read(work / "r.db")
    try:
        run = view.load(store, "latest")
    finally:
        store.close()
    assert [t.config.tunnel.kind for t in run.trials] == ["none", "wireguard"]
    plain, tunnelled = run.trials
    # The lab's own generator run: 2 streams as the client's iperf3 runs them (before 3.16
    # a process each, measured over one common window), the warm-up ended on evidence.
    mode = Iperf3().resolve_mode(TrafficSettings(streams=2))  # the hosts' iperf3 is ours
    for trial in run.trials:
        assert trial.resolved.traffic.stream_mode is mode
        expected = 2 if mode is StreamMode.PROCESSES else 1
        assert trial.metrics["generator_processes"] == expected
        assert 0 < trial.metrics["warmup.s"] <= TrafficSettings().warmup_max
    for trial in run.trials:
        m = trial.metrics
        delivered = m["goodput_bps"] * 2 / 8
        # the DUT forwarded at least what iperf3 says arrived: its busiest interface's bytes
        sent = [v for n, v in m.items() if n.startswith("link.gw.") and n.endswith(".tx_bytes")]
        assert max(sent) >= delivered
        # The kernel counts what iperf3 counts: over the whole trial at least as many
        # retransmits, and over the measured window no more than over the trial. The
        # window opens when the begin snapshot's SSH reads return, on a machine the
        # traffic saturates: CI saw 684 of 781 and 295 of 385 in it (a flow's
        # retransmits come in bursts), so the window's count is not held to iperf3's.
        whole = m["tcp.client.retrans_segs"] + m["tcp.server.retrans_segs"]
        assert whole >= m["retransmits"], (whole, m["retransmits"])
        assert m["tcp.window.retrans_segs"] <= whole
        # the DUT's cores are the trial's; every host measured its sampler's cost
        assert {"cpu0.idle", "cpu1.idle"} <= m.keys()
        for role in ROLES:
            # counted in ticks of 10 ms: a loop that starts nothing but sleep (busybox
            # runs it in-process) may spend less than one over a short trial
            assert 0 <= m[f"remote.{role}.sampler_cpu_pct"] < 50
            assert m[f"remote.{role}.samples"] >= 8  # 5 a second over 2 s
        assert remote(trial).dut == "gw"
        # what the diagnosis reads of the DUT (this VM exposes no zones or clocks: empty)
        assert remote(trial).dut_view == "ssh"
        facts = {"crypto_drivers", "thermal_zones", "trips_c", "max_mhz"}
        assert facts <= remote(trial).to_dict().keys()
        # the DUT's queue on the server side sent the tunnel's decrypted traffic, or the plain
        assert remote(trial).dut_qdiscs[lan] == "pfifo"
        assert m[f"qdisc.gw.{lan}.sent_bytes"] >= delivered
    # The ends' generator processes are sampled as the lab samples its own, under labels
    # the generator's rules know; every process is named with its machine.
    assert plain.metrics["proc.iperf3-client@client"] >= 10.0  # unshaped: it works hard
    # The lab's pings from the client, in the window by the client's own clock (ping -D),
    # the same figures a lab trial has.
    store = Store.read(work / "r.db")
    try:
        for trial in run.trials:
            m = trial.metrics
            # (a busy path may answer faster than an idle one: no core wakes from sleep)
            assert m["rtt.samples"] >= 10 and m["rtt.idle_ms"] > 0 and m["rtt.loaded_ms"] > 0
            ping = store.artifact(trial.id, "probe_readings")["rtt"]
            assert abs(ping["clock_offset_s"]) < 0.05  # the machines share one clock
    finally:
        store.close()
    for trial in run.trials:
        labels = [n.removeprefix("proc.") for n in trial.metrics if n.startswith("proc.")]
        assert all(label.rsplit("@", 1)[-1] in ROLES for label in labels), labels
    assert remote(plain).tunnel_built_by is None
    assert remote(tunnelled).tunnel_built_by == "tunnelbench"
    assert tunnelled.resolved.setup.implementation == "wireguard-go"  # no kernel WireGuard here
    # which wireguard-go, on both ends: the version, build and path each host has
    pinned = (REPO / ".tools" / "bin" / "wireguard-go.version").read_text().strip()
    built = f"built from golang.zx2c4.com/wireguard@{pinned} ({REPO}/.tools/bin/wireguard-go)"
    assert (tunnelled.resolved.setup.version or "").endswith(f"{built} (client and gw)")
    ends = remote(tunnelled).tunnel_ends
    assert {r: e.implementation for r, e in ends.items()} == {
        "client": "wireguard-go",
        "gw": "wireguard-go",
    }
    # No tunnel: the kernel that routes is what ran, recorded as the lab records its own.
    assert plain.resolved.setup.version == f"linux {platform.release()}"
    report = " ".join((work / "r-run1.md").read_text().split())  # its lines wrap
    assert "wireguard/wireguard-go: wireguard-go v0.0." in report.split("**Software:**")[1]
    # the traffic crossed the tunnel: the DUT's WireGuard device received it
    devices = remote(tunnelled).tunnel_devices
    assert devices["gw"].startswith("tb")  # recorded; its counters are named as the lab's
    received = tunnelled.metrics["link.gw.tunnel.rx_bytes"]
    assert received >= tunnelled.metrics["goodput_bps"] * 2 / 8
    assert not any(".tunnel." in n for n in plain.metrics)
    assert "Hosts:** client" in report
    assert leftovers() == [] and routes(hosts.lab) == before


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            "unknown_host",
            "server: its host key is not in known_hosts; refusing to accept it unseen",
        ),
        ("wrong_key", "authentication failed"),
        ("no_iperf3", "server: iperf3 is not installed"),
        ("management", "client.ssh: this machine reaches client from 127.0.0.1"),
    ],
)
def test_faults_are_one_clear_message_and_leave_nothing(hosts, setup, message):
    before = routes(hosts.lab)
    config = None
    tunnel = ""
    if setup == "unknown_host":
        config = hosts.farm.unknown_host_config("server")
    elif setup == "wrong_key":
        config = hosts.work / "wrong_config"
        config.write_text(
            hosts.farm.ssh_config.read_text().replace(
                str(hosts.farm.identity), str(hosts.farm.wrong_key)
            )
        )
    elif setup == "management":
        tunnel = BUILD
    path = hosts.file(tunnel, name=f"{setup}.toml", config=config)
    if setup == "management":
        # the server's traffic address is where this machine's SSH reaches the client from
        path.write_text(path.read_text().replace('address = "198.18.1.2"', 'address = "127.0.0.1"'))
    iperf3 = hosts.farm.workdir / "busybox-bin" / "iperf3"
    if setup == "no_iperf3":
        target = iperf3.readlink()
        iperf3.unlink()
    try:
        done = tunnelbench(
            "run",
            "--hosts",
            str(path),
            "--duration",
            "1",
            "--runs",
            "1",
            "--db",
            str(hosts.work / f"{setup}.db"),
        )
    finally:
        if setup == "no_iperf3":
            iperf3.symlink_to(target)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (hosts.work / f"{setup}.db").exists()  # nothing stored
    assert leftovers() == [] and routes(hosts.lab) == before


#: The counter script's process reading as it was: its ``2>/dev/null`` came after the
#: ``<`` that fails for a process gone since the glob.
RACY_READER = 'for p in /proc/[0-9]*; do read -r s <"$p/stat" 2>/dev/null && echo "P $s"; done'


def test_the_process_reader_survives_processes_that_come_and_go(hosts):
    """Short-lived processes on the busybox server (a router's cron jobs, hotplug
    scripts): the counters read its /proc while they start and exit. The racy form
    meets a vanished process under the same churn (its shell's error escapes; it fails
    the script when that process was the glob's last, which depends on where the PIDs
    are), so the churn does reach the race."""
    churn = subprocess.Popen(
        hosts.farm.inside("server", ["busybox", "sh", "-c", "while :; do /bin/true; done"]),
        start_new_session=True,
    )
    racy, failed = 0, []
    read: list[dict[int, tuple[str, int]]] = []
    try:
        with Session(hostsfile.load(hosts.file()), begin=False) as session:
            server = session.hosts["server"]
            # Until the racy form has met the race a few times (it did in 17 of 100 reads
            # on a quiet machine; a busy one can go longer without): the fixed form must
            # have read through every one of those moments, and as many again.
            for attempt in range(600):
                if racy >= 3 and attempt >= 60:
                    break
                racy += "/stat" in server.run(["sh", "-c", RACY_READER], check=False).stderr
                done = server.run(["sh", "-c", probes.PROCESSES], check=False)
                if done.returncode != 0 or done.stderr:
                    failed.append(done.stderr)
                read.append(probes.parse_processes(done.stdout))
    finally:
        os.killpg(churn.pid, signal.SIGKILL)
        churn.wait()
    assert racy > 0, "the churn never hit the race: this test shows nothing"
    assert failed == []
    # every process that stayed was read: the machine's init (PID 1) and its sshd
    assert all(found.get(1, ("",))[0] == "sh" for found in read)
    assert all("sshd" in {comm for comm, _ in found.values()} for found in read)
    assert leftovers() == []


def test_an_unreachable_host_is_named(hosts):
    hosts.farm.stop("gw")
    try:
        done = tunnelbench("hosts", "check", str(hosts.file()))
    finally:
        hosts.farm.start("gw")
    assert done.returncode == 2
    assert done.stderr.startswith("tunnelbench: error: gw: unreachable")


def test_a_connection_lost_mid_trial_keeps_the_finished_trials_and_lab_clean_removes_the_rest(
    tmp_path,
):
    lab = netns.build(LabSettings(), tunnel=False)
    try:
        with SshdHosts(tmp_path / "ssh", {r: lab.ns(r) for r in ROLES}) as farm:
            h = Hosts(lab, farm, tmp_path)
            path = h.file()
            db = tmp_path / "r.db"
            run = subprocess.Popen(
                [*tunnelbench_argv(), "run", "--hosts", str(path), "--tunnels", "none",
                 "--runs", "2", "--duration", "3", "--streams", "1", "--db", str(db), "-q"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            try:
                _wait_for_trials(db, 1, run)
                time.sleep(2.0)  # into the second trial's traffic
                farm.stop("client")
                out, err = run.communicate(timeout=60)
            finally:
                if run.poll() is None:
                    run.kill()
                    run.wait()
            assert run.returncode == 1, out + err
            assert "lost a host mid-run: client" in err
            assert f"`tunnelbench lab clean --hosts {path}`" in err
            store = Store.read(db)
            try:
                trials = view.load(store, "latest").trials
            finally:
                store.close()
            assert [t.status.value for t in trials] == ["ok", "failed"]
            assert [p for p in leftovers() if p.endswith(".client")]  # the client's is left
            farm.start("client")
            cleaned = tunnelbench("lab", "clean", "--hosts", str(path))
            assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
            assert (
                cleaned.stdout.startswith("client: /tmp/tunnelbench.")
                and "removed" in cleaned.stdout
            )
            assert leftovers() == []
    finally:
        lab.teardown()


def _processes_naming(text: str) -> list[int]:
    """Live processes whose command line holds ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


def _sessions_of(path: Path) -> list[masters.SessionRecord]:
    root = masters.state_root()
    records = []
    for directory in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            record = masters.SessionRecord.load(directory)
        except (OSError, ValueError):
            continue
        if record.hosts_file == str(path.resolve()):
            records.append(record)
    return records


def test_lab_clean_ends_the_ssh_masters_and_logins_a_killed_run_left(hosts):
    """A SIGKILLed run leaves one OpenSSH master per host, each holding a login (an sshd
    session), and its directory on each host; `lab clean --hosts` ends the masters it
    recorded, by PID, says so, and removes the rest; `run --resume RUN --hosts FILE` then
    runs the trial the kill cut short, to the same trials as planned."""
    path = hosts.file(name="killed.toml")
    db = hosts.work / "killed.db"
    logins = {role: set(hosts.farm.sessions(role)) for role in ROLES}
    run = subprocess.Popen(
        [*tunnelbench_argv(), "run", "--hosts", str(path), "--tunnels", "none",
         "--runs", "2", "--duration", "3", "--streams", "1", "--db", str(db), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        _wait_for_trials(db, 1, run)
        time.sleep(1.0)  # into the second trial's traffic
        (session,) = _sessions_of(path)
    finally:
        run.kill()  # SIGKILL: nothing of the run's own cleanup runs
        run.wait()
    # stored as running, its process gone: `runs` reads it as killed
    listed = tunnelbench("runs", "--db", str(db), "--json")
    assert [r["status"] for r in json.loads(listed.stdout)] == ["killed"], listed.stderr
    assert [m.role for m in session.masters] == list(ROLES)
    assert all(masters.is_master(m) for m in session.masters)  # left running
    for role in ROLES:
        assert set(hosts.farm.sessions(role)) - logins[role], f"{role} kept no login"
    left = leftovers()
    assert len(left) == 3  # the hosts share this machine's /tmp: each lists all three
    done = tunnelbench("lab", "clean", "--hosts", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        f"{m.role}: the SSH master of a killed run (pid {m.pid}): ended; its login on"
        f" {m.role} with it"
        for m in session.masters
    ]
    assert [line.split(": ", 1)[1] for line in lines[3:]] == [f"{p}: removed" for p in left]
    assert not any(masters.is_master(m) for m in session.masters)
    assert not session.directory.exists()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
        _processes_naming(str(session.directory))
        or any(set(hosts.farm.sessions(r)) - logins[r] for r in ROLES)
    ):
        time.sleep(0.1)
    assert _processes_naming(str(session.directory)) == []  # no master, no client of one
    assert all(set(hosts.farm.sessions(r)) <= logins[r] for r in ROLES)  # the logins ended
    assert leftovers() == []
    # --resume finishes it on the same hosts: the trial the kill cut short, nothing more
    (kept,) = latest(db).trials
    resumed = tunnelbench(
        "run", "--resume", "1", "--hosts", str(path), "--db", str(db), "-q", "--no-reports"
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    trials = latest(db).trials
    assert [(t.seq, t.config_key, t.status.value) for t in trials] == [
        (1, kept.config_key, "ok"), (2, kept.config_key, "ok"),
    ]  # fmt: skip
    assert [
        r["status"] for r in json.loads(tunnelbench("runs", "--db", str(db), "--json").stdout)
    ] == ["complete"]
    assert leftovers() == []


def test_lab_clean_runs_nothing_from_a_directory_it_did_not_make_private(hosts):
    """Anyone on a host can make a directory named like a run's in /tmp, with an owner
    record of a process that has ended and an undo line; `lab clean --hosts` (root on the
    host) runs nothing from one that is not the connecting user's or that others may
    write to, and says so in one line."""
    marker = hosts.work / "ran-as-root"
    gone = subprocess.Popen(["true"])
    record = {
        "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
        "pid": gone.pid,
        "start_time": process_start_time(gone.pid),
    }
    gone.wait()
    made = {"tunnelbench.5ca1ab1e.gw": (65534, 0o700), "tunnelbench.0ddba11d.gw": (0, 0o777)}
    for name, (uid, mode) in made.items():
        d = Path("/tmp") / name
        d.mkdir()
        (d / "owner").write_text(json.dumps(record) + "\n")
        (d / "undo").write_text(f"touch {marker}\n")
        d.chmod(mode)
        os.chown(d, uid, -1)
    try:
        done = tunnelbench("lab", "clean", "--hosts", str(hosts.file(name="foreign.toml")))
        assert done.returncode == 1, done.stdout + done.stderr
        for role in ROLES:
            assert (
                f"{role}: /tmp/tunnelbench.5ca1ab1e.gw: refused: it belongs to uid 65534, not to"
                " the user tunnelbench connects as; ran nothing from it"
            ) in done.stdout.splitlines()
            assert (
                f"{role}: /tmp/tunnelbench.0ddba11d.gw: refused: others may write to it"
                " (drwxrwxrwx); ran nothing from it"
            ) in done.stdout.splitlines()
        assert len(done.stdout.splitlines()) == 6
        assert not marker.exists()
        assert sorted(leftovers()) == sorted(f"/tmp/{name}" for name in made)
    finally:
        for name in made:
            shutil.rmtree(Path("/tmp") / name)


def tunnelbench_argv() -> list[str]:
    import sys

    return [sys.executable, "-m", "tunnelbench"]


def _wait_for_trials(db: Path, count: int, run: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        if db.exists():
            done = subprocess.run(
                ["sqlite3", str(db), "select count(*) from trials"], capture_output=True, text=True
            )
            if done.returncode == 0 and done.stdout.strip().isdigit() and int(done.stdout) >= count:
                return
        time.sleep(0.1)
    raise AssertionError("the run stored no trial in time")


def test_an_existing_tunnel_is_used_and_left_as_it_was(tmp_path):
    """The user's WireGuard is up (here: a lab's, built before); tunnelbench only drives
    traffic across it and probes, with the DUT on busybox, and leaves it up."""
    up = tunnelbench("lab", "up", "--tunnel", "wireguard", "--name", "rmtx")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        namespaces = {r: f"tb-rmtx-{r}" for r in ROLES}
        # The user's daemon is the lab's, started outside the machines: they share this
        # machine's PIDs, so gw's /proc shows it as a router's shows its own.
        with SshdHosts(
            tmp_path / "ssh", namespaces, busybox=frozenset({"gw"}), own_pids=False
        ) as farm:
            path = tmp_path / "hosts.toml"
            path.write_text(
                f'ssh_config = "{farm.ssh_config}"\n[client]\nssh = "client"\n[gw]\nssh = "gw"\n'
                '[server]\nssh = "server"\naddress = "198.18.1.2"\n'
                '[tunnel]\nmode = "existing"\nkind = "wireguard"\naddress = "198.18.1.2"\n'
            )
            links = subprocess.run(
                ["ip", "-n", namespaces["gw"], "-j", "link"], capture_output=True, text=True
            ).stdout
            done = tunnelbench(
                "run", "--hosts", str(path), "--duration", "2", "--runs", "1", "--streams", "1",
                "--db", str(tmp_path / "r.db"), "--json", cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            store = Store.read(tmp_path / "r.db")
            try:
                (trial,) = view.load(store, "latest").trials  # none is refused: one path only
            finally:
                store.close()
            assert remote(trial).tunnel_built_by == "user"
            m = trial.metrics
            wg = [
                n for n in m if n.startswith("link.gw.tb") and "wg" in n and n.endswith(".rx_bytes")
            ]
            assert wg and m[wg[0]] >= m["goodput_bps"] * 2 / 8  # it crossed the user's tunnel
            assert m.get("proc.wireguard-go@gw", 0) > 0  # the daemon's CPU, read on busybox
            after = subprocess.run(
                ["ip", "-n", namespaces["gw"], "-j", "link"], capture_output=True, text=True
            ).stdout
            assert [x["ifname"] for x in json.loads(after)] == [
                x["ifname"] for x in json.loads(links)
            ]
            assert leftovers() == []
    finally:
        down = tunnelbench("lab", "down", "rmtx")
        assert down.returncode == 0, down.stdout + down.stderr
