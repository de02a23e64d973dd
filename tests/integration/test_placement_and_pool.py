"""Pinned placement read back from the kernel, and labs kept between a run's trials.

Placement: each role's processes carry the role's CPU affinity (``Cpus_allowed_list`` of
a process the role started, and of its threads), and every receive queue of the role's
links and of its tunnel device has the role's RPS mask.

Kept labs: a run's trials share one lab per lab-and-tunnel setting (recorded as
``lab_fresh``/``lab_trial``), ``fresh_labs`` builds one per trial, nothing is left after
the run; a kept lab whose daemon died, or with a process of the last trial still inside,
is never handed on.
"""

import os
import signal
import time
from pathlib import Path

import pytest

from tunnelbench.bench import labpool, runner
from tunnelbench.bench.labpool import LabPool
from tunnelbench.bench.progress import Progress
from tunnelbench.bench.store import Store
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Placement, Topology, TunnelKind
from tunnelbench.lab import netns
from tunnelbench.lab import state as lab_state
from tunnelbench.lab.placement import layout
from tunnelbench.model import cpulist
from tunnelbench.model.plan import (
    Experiment,
    LabSettings,
    RoleCpus,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
)
from tunnelbench.model.records import TrialStatus
from tunnelbench.system import probing

CORES = probing.cpus()
SHORT = TrafficSettings(duration=1, warmup=0)


def _allowed(pid: int) -> str:
    """The CPU affinity of ``pid`` once it runs its program (``ip netns exec`` and
    ``taskset`` exec into it under the same PID; read before that, it is theirs)."""
    for _ in range(500):
        if Path(f"/proc/{pid}/comm").read_text().strip() not in ("ip", "taskset"):
            break
        time.sleep(0.01)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def _rps_masks(lab: netns.Lab, role: str, device: str) -> set[str]:
    found = lab.exec(role, ["find", f"/sys/class/net/{device}/queues/", "-name", "rps_cpus"])
    paths = found.stdout.split()
    assert paths, f"no receive queues of {device} in {role}"
    text = lab.exec(role, ["cat", *paths]).stdout
    return {f"{int(line.replace(',', ''), 16):x}" for line in text.split()}


@pytest.mark.parametrize("topology", list(Topology))
def test_pinned_roles_run_their_processes_and_receive_work_on_their_cores(topology):
    lab = netns.build(LabSettings(topology=topology, placement=Placement.PINNED))
    try:
        expected = layout(lab.chain.roles, CORES)
        assert lab.state.facts.placement == {r: cpulist.canonical(c) for r, c in expected.items()}
        for role in lab.chain.roles:
            proc = lab.start(role, ["sleep", "30"])
            try:
                assert _allowed(proc.pid) == cpulist.canonical(expected[role]), role
            finally:
                proc.kill()
                proc.wait()
            mask = f"{int(cpulist.mask(expected[role]).replace(',', ''), 16):x}"
            for (owner, _), iface in lab.interfaces.items():
                if owner == role:
                    assert _rps_masks(lab, role, iface.name) == {mask}, (role, iface.name)
    finally:
        lab.teardown()


def test_a_free_lab_leaves_affinity_and_steering_alone():
    lab = netns.build(LabSettings())
    try:
        assert lab.state.facts.placement is None and lab.state.facts.rps is None
        proc = lab.start("client", ["sleep", "30"])
        try:
            assert _allowed(proc.pid) == cpulist.canonical(os.sched_getaffinity(0))
        finally:
            proc.kill()
            proc.wait()
        assert _rps_masks(lab, "client", lab.link_device("client", "gw")) == {"0"}
    finally:
        lab.teardown()


def test_a_roles_own_cores_override_the_layout_and_reach_its_tunnel_device():
    config = TrialConfig(
        lab=LabSettings(placement=Placement.PINNED, cpus=RoleCpus(gw=str(CORES[0]))),
        tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD),
        traffic=SHORT,
    )
    try:
        spec = runner.resolve_tunnel(config)
    except UserError as exc:
        pytest.skip(str(exc))
    with LabPool() as labs:
        standing = labs.acquire(config, spec)
        lab, handle = standing.session.lab, standing.session.handle
        assert lab.cpus["gw"] == (CORES[0],)
        daemon = handle.daemons["gw"].pid
        tasks = list(Path(f"/proc/{daemon}/task").iterdir())
        assert len(tasks) > 1  # wireguard-go's threads, all born under the affinity
        assert {_allowed(int(t.name)) for t in tasks} == {str(CORES[0])}
        mask = f"{1 << CORES[0]:x}"
        assert _rps_masks(lab, "gw", handle.devices["gw"]) == {mask}
        assert standing.session.steered["gw"] == handle.devices["gw"]


def _run(experiment: Experiment, db: Path) -> list:
    prepared = runner.prepare(experiment, strict=True)
    store = Store(db)
    run_id = runner.start(prepared, store, command_line="test")
    runner.execute(prepared, store, run_id, progress=Progress())
    trials = store.trials(run_id)
    store.close()
    return trials


def _configs() -> tuple[TrialConfig, ...]:
    return tuple(
        TrialConfig(traffic=TrafficSettings(streams=n, duration=1, warmup=0)) for n in (1, 2)
    ) + (TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN), traffic=SHORT),)


def test_a_run_keeps_one_lab_per_lab_and_tunnel_and_leaves_none(tmp_path):
    before = set(lab_state.list_namespaces())
    trials = _run(Experiment(_configs(), repetitions=2), tmp_path / "kept.db")
    assert [t.status for t in trials] == [TrialStatus.OK] * 6
    # none/1, none/2 share a lab (traffic differs only); vxlan has its own.
    labs = [t.resolved.lab.id for t in trials]
    assert labs[0] == labs[1] == labs[3] == labs[4] and labs[2] == labs[5] != labs[0]
    assert [t.resolved.lab.fresh for t in trials] == [True, False, True, False, False, False]
    assert [t.resolved.lab.trial for t in trials] == [1, 2, 1, 3, 4, 2]
    assert set(lab_state.list_namespaces()) == before


def test_fresh_labs_build_one_lab_per_trial(tmp_path):
    experiment = Experiment(_configs()[:1], repetitions=2, fresh_labs=True)
    trials = _run(experiment, tmp_path / "fresh.db")
    assert [t.resolved.lab.fresh for t in trials] == [True, True]
    assert trials[0].resolved.lab.id != trials[1].resolved.lab.id


def test_a_kept_lab_whose_daemon_died_is_not_handed_on():
    config = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD), traffic=SHORT)
    try:
        spec = runner.resolve_tunnel(config)
    except UserError as exc:
        pytest.skip(str(exc))
    if not spec.implementation or spec.implementation == "kernel":
        pytest.skip("needs a userspace WireGuard daemon to end (this kernel has WireGuard)")
    with LabPool() as labs:
        standing = labs.acquire(config, spec)
        labs.release(standing)
        daemon = standing.session.handle.daemons["client"]
        lab_id, namespace = standing.session.lab.lab_id, standing.session.lab.ns("client")
        os.kill(daemon.pid, signal.SIGKILL)  # a daemon this test's lab started
        # The signal is delivered at once but the exit takes a moment: a CI run checked
        # the daemon while it was still exiting, found it alive and handed the lab on.
        deadline = time.monotonic() + 5
        while lab_state.is_alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.02)
        with pytest.raises(LabError, match=r"died while lab \w+ stood between trials"):
            labs.acquire(config, spec)
        assert namespace not in lab_state.list_namespaces()
        again = labs.acquire(config, spec)  # the next trial builds a fresh lab
        assert again.fresh and again.session.lab.lab_id != lab_id
        labs.release(again)


def test_a_lab_handed_out_and_never_returned_is_removed_with_the_pool():
    """A caller that fails between acquire and release (as a failed assertion once did)
    leaves no lab behind: the pool removes what it handed out too."""
    config = TrialConfig(traffic=SHORT)
    spec = runner.resolve_tunnel(config)
    with pytest.raises(RuntimeError, match="between acquire and release"), LabPool() as labs:
        namespace = labs.acquire(config, spec).session.lab.ns("client")
        assert namespace in lab_state.list_namespaces()
        raise RuntimeError("failed between acquire and release")
    assert namespace not in lab_state.list_namespaces()


def test_a_lab_with_a_process_left_from_its_trial_is_removed_not_kept():
    config = TrialConfig(traffic=SHORT)
    spec = runner.resolve_tunnel(config)
    with LabPool() as labs:
        standing = labs.acquire(config, spec)
        lab = standing.session.lab
        stray = lab.start("server", ["sleep", "30"])
        labs.release(standing)
        assert lab.ns("server") not in lab_state.list_namespaces()
        assert stray.wait(timeout=5) is not None  # teardown ended it
        again = labs.acquire(config, spec)
        assert again.fresh
        labs.release(again)


def test_a_kept_lab_has_no_tcp_metrics_from_the_last_trial(tmp_path):
    config = TrialConfig(traffic=SHORT)
    spec = runner.resolve_tunnel(config)
    with LabPool() as labs:
        standing = labs.acquire(config, spec)
        lab = standing.session.lab
        server = lab.server_address(4)
        listener = lab.start("server", ["iperf3", "-s", "-1", "-p", "5299"])
        try:
            for _ in range(100):
                if lab.exec("server", ["ss", "-Htln", "sport", "= :5299"]).stdout.strip():
                    break
            lab.exec("client", ["iperf3", "-c", server, "-p", "5299", "-t", "1", "-J"])
        finally:
            listener.wait(timeout=10)
        # The endpoints save none (tcp_no_metrics_save): a cached ssthresh or RTT would
        # start the next trial's connection where this one ended, and no flush is needed
        # before it (three processes a trial; 1 s of an emulated guest's).
        for role in ("client", "server"):
            assert lab.exec(role, ["ip", "tcp_metrics", "show"]).stdout.strip() == ""
        labs.release(standing)
        again = labs.acquire(config, spec)
        assert again is standing and not again.fresh
        assert lab.exec("client", ["ip", "tcp_metrics", "show"]).stdout.strip() == ""
        labs.release(again)


def test_a_plan_with_cores_this_machine_lacks_is_refused_before_anything_is_built():
    missing = max(CORES) + 1
    config = TrialConfig(lab=LabSettings(cpus=RoleCpus(client=str(missing))), traffic=SHORT)
    before = set(lab_state.list_namespaces())
    with pytest.raises(UserError, match=f"lab.cpus.client: core {missing} is not online here"):
        runner.prepare(Experiment((config,), repetitions=1), strict=True)
    assert set(lab_state.list_namespaces()) == before


def _interrupt(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "step",
    [
        "built, before the session holds it",
        "built, before the pool notes its residents",
        "released, while its leftovers are looked for",
    ],
)
def test_a_ctrl_c_at_any_step_of_the_pools_bookkeeping_leaves_no_lab(step, monkeypatch):
    # CI once found a run's lab standing after a Ctrl-C that landed just after a trial
    # was stored: the pool had let go of the lab before looking inside it.
    config = TrialConfig(traffic=SHORT)
    before = set(lab_state.known_labs())
    if step.startswith("built, before the session"):
        real = netns.build

        def build_then_interrupt(*args, **kwargs):
            real(*args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(netns, "build", build_then_interrupt)
    elif step.startswith("built, before the pool"):
        monkeypatch.setattr(labpool, "_living", _interrupt)
    with pytest.raises(KeyboardInterrupt), LabPool() as labs:
        standing = labs.acquire(config, runner.resolve_tunnel(config))
        monkeypatch.setattr(labpool, "leftovers", _interrupt)
        labs.release(standing)
    assert set(lab_state.known_labs()) == before
    assert not [n for n in lab_state.list_namespaces() if n.startswith("tb-")]
