"""The VM's host during a guest's trials: its CPU split between the VM, tunnelbench and
everything else; a guest trial's window mapped to the host's clock; the figures added to
the trial and flagged as outside load is on the host. No VM is booted: the pure parts on
captured and built inputs, the watcher on real processes standing in for QEMU, its
virtiofsd and a busy neighbour."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tunnelbench.analysis import noise
from tunnelbench.bench.guest_trials import with_host
from tunnelbench.bench.store import Store
from tunnelbench.probes import cpu, vmhost
from tunnelbench.probes.load import ProcessTimes, Seen
from tunnelbench.probes.process import TICKS_PER_SECOND
from tunnelbench.probes.vmhost import Clock, HostWatch, Interval, Sample

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def _seen(comm: str, ppid: int, own: int, reaped: int = 0, start: int = 1) -> Seen:
    return Seen(ProcessTimes(comm, ppid, start, own, reaped, False), 4026531840)


def test_the_vms_processes_are_the_tree_under_virtme_ng():
    parents = {100: 1, 101: 100, 102: 101, 103: 102, 200: 1, 201: 200, 300: 103}
    assert vmhost.descendants(100, parents) == {100, 101, 102, 103, 300}
    assert vmhost.descendants(999, parents) == {999}


def test_an_intervals_cpu_goes_to_the_vm_the_outside_or_tunnelbench():
    """QEMU (under virtme-ng) used 150 ticks and reaped a helper that used 20; a compiler
    outside used 80 and make reaped a child of 30; tunnelbench's own time is left out."""
    before = {
        10: _seen("python3", 1, own=500),  # tunnelbench
        100: _seen("vng", 10, own=5),
        101: _seen("qemu-system-x86", 100, own=1000),
        102: _seen("qemu-helper", 101, own=4),
        200: _seen("make", 1, own=10),
        201: _seen("cc1", 200, own=50),
    }
    after = {
        10: _seen("python3", 1, own=900),
        100: _seen("vng", 10, own=5),
        101: _seen("qemu-system-x86", 100, own=1150, reaped=24),  # 4 before + 20 after
        200: _seen("make", 1, own=10, reaped=60),  # the cc1 it reaped: 50 before + 10
        202: _seen("cc1", 200, own=80),
    }
    vm = vmhost.descendants(100, {p: s.times.ppid for p, s in after.items()})
    assert vmhost.split(before, after, vm, own=10) == Interval(
        vm=170, outside=90, top={"make": 10, "cc1": 80}
    )


def _sample(at: float, busy: int, steal: int, interval: Interval | None) -> Sample:
    """Two cores at 100 ticks a second each: core 0 ``busy`` ticks a second busy
    (``steal`` of them stolen), core 1 idle."""
    t = round(at * 100)
    cores: cpu.Snapshot = {
        0: (busy * t // 100 - steal * t // 100, 0, 0, t - busy * t // 100, 0, 0, 0,
            steal * t // 100),
        1: (0, 0, 0, t, 0, 0, 0, 0),
    }  # fmt: skip
    return Sample(at, cores, interval)


def test_the_hosts_figures_over_a_window_come_from_the_samples_nearest_its_edges():
    per = Interval(vm=TICKS_PER_SECOND // 2, outside=TICKS_PER_SECOND // 4, top={"cc1": 25})
    samples = [_sample(10.0 + 0.5 * i, 80, 4, None if i == 0 else per) for i in range(9)]
    found = vmhost.over_window(samples, 11.1, 13.4)  # nearest samples: 11.0 and 13.5
    assert found is not None
    assert (found.begin, found.end, found.samples) == (11.0, 13.5, 6)
    # 5 intervals of 0.5 s: the VM 1/2 tick-second per interval = 100% of a core
    assert found.vm_pct == pytest.approx(100.0)
    assert found.outside_pct == pytest.approx(50.0)
    assert found.busy_pct == pytest.approx(80.0) and found.cores == 2
    assert found.steal_pct == pytest.approx(4.0)
    assert found.metrics() == {
        "vmhost.outside_pct": found.outside_pct,
        "vmhost.vm_pct": found.vm_pct,
        "vmhost.busy_pct": found.busy_pct,
        "vmhost.cores": 2,
        "vmhost.steal_pct": found.steal_pct,
        "vmhost.samples": 6,
    }
    assert vmhost.over_window(samples, 9.0, 12.0) is None  # before the first sample
    assert vmhost.over_window(samples, 12.0, 14.5) is None  # after the last
    assert vmhost.over_window(samples, 12.0, 12.1) is None  # no interval in it


def test_the_guests_clock_is_the_hosts_less_the_smallest_gap_of_the_latest_events():
    clock = Clock()
    assert clock.to_host(100.0) is None
    # the guest's clock is 7 s behind; each event read 10-200 ms after it was written
    for delay in (0.9, 0.2, 0.05, 0.12, 0.08, 0.15):
        clock.saw({"event": "started", "at": 1000.0, "host_at": 1007.0 + delay})
    assert clock.offset == pytest.approx(7.05)
    clock.saw({"event": "ready", "uptime_s": 3.1})  # an event without stamps changes nothing
    assert clock.to_host(1000.0) == pytest.approx(1007.05)
    # a drifting guest clock: only the latest events count
    for _ in range(4):
        clock.saw({"event": "trial", "at": 2000.0, "host_at": 2007.3})
    assert clock.offset == pytest.approx(7.3)


def _guest_record() -> dict:
    """A trial record in the form the guest sends it (Store.add_trial's fields), from a
    captured run: its probes' process scans mark the measured window."""
    store = Store.read(RUNS / "timeline.db")
    try:
        trial = store.trials(store.run("latest").id)[0]
        probes = store.artifact(trial.id, "probes")
    finally:
        store.close()
    return {
        "seq": trial.seq, "repetition": trial.repetition, "config_key": trial.config_key,
        "config": trial.config, "resolved": trial.resolved.to_dict(), "status": "ok",
        "error": None, "started_at": 0.0, "metrics": dict(trial.metrics),
        "artifacts": {"probes": probes},
    }  # fmt: skip


def test_a_guest_trial_gets_its_hosts_figures_over_its_window():
    record = _guest_record()
    begin, end = vmhost.guest_window(record) or (0.0, 0.0)
    assert end - begin == pytest.approx(3.0)  # the captured window: 3 s
    offset = 12.5  # the host's clock is ahead
    clock = Clock()
    clock.saw({"at": begin - 20.0, "host_at": begin - 20.0 + offset})
    per = Interval(vm=TICKS_PER_SECOND, outside=TICKS_PER_SECOND // 2, top={"cc1": 50})
    watch = HostWatch(leader=1)
    watch.samples = [
        _sample(begin + offset - 1.0 + 0.5 * i, 90, 0, per) for i in range(12)
    ]  # every 0.5 s: the VM a full core, a compiler half of one
    added = with_host(record, watch, clock)
    assert added["metrics"]["vmhost.vm_pct"] == pytest.approx(200.0)
    assert added["metrics"]["vmhost.outside_pct"] == pytest.approx(100.0)
    assert added["metrics"]["vmhost.samples"] == 7  # 3 s: 6 intervals
    assert added["artifacts"]["vmhost"]["top_outside"] == {"cc1": 100.0}
    assert added["artifacts"]["vmhost"]["clock_offset_s"] == pytest.approx(offset)
    assert added["artifacts"]["probes"] == record["artifacts"]["probes"]
    assert record["metrics"].keys() < added["metrics"].keys()  # the guest's own are kept
    # and the noise layer flags the trial as it flags outside load on the host
    assert noise.disturbances(added["metrics"]) == (
        "on the VM's host, processes outside the VM 100% of a core",
    )
    failed = record | {"status": "failed"}
    assert with_host(failed, watch, clock) is failed
    assert with_host(record, watch, Clock()) is record  # no stamps: no mapping


def test_a_quiet_host_flags_nothing_and_its_steal_is_flagged():
    quiet = {"vmhost.outside_pct": 3.0, "vmhost.steal_pct": 0.2, "vmhost.vm_pct": 180.0}
    assert noise.disturbances(quiet) == ()
    stolen = quiet | {"vmhost.steal_pct": 2.5}
    assert noise.disturbances(stolen) == ("on the VM's host, steal 2.5% of a core",)


def _named(directory: Path, name: str, target: str) -> str:
    """A program path whose file name is ``name`` (the kernel's ``comm``)."""
    path = directory / name
    path.symlink_to(shutil.which(target) or target)
    return str(path)


def test_the_watcher_tells_the_vm_and_its_detached_helper_from_a_busy_neighbour(tmp_path):
    """Stand-ins: virtme-ng (a shell) running "QEMU" (busy, its command line naming a
    socket), a detached "virtiofsd" serving that socket (busy, not in the VM's tree), and
    a busy process outside the VM."""
    socket = tmp_path / "virtme-sock"
    busy = "end=$(($(date +%s) + 20)); while [ $(date +%s) -lt $end ]; do :; done"
    qemu = _named(tmp_path, "qemu-system-x86_64", "sh")
    leader = subprocess.Popen(
        ["sh", "-c", f"\"$0\" -c '{busy}' qemu -chardev socket,id=c,path={socket}; :", qemu],
        start_new_session=True,
    )
    helper = subprocess.Popen(
        [_named(tmp_path, "virtiofsd", "sh"), "-c", busy, "x", "--socket-path", str(socket)],
        start_new_session=True,
    )
    neighbour = subprocess.Popen(
        [_named(tmp_path, "tb-neighbour", "sh"), "-c", busy], start_new_session=True
    )
    watch = HostWatch(leader.pid, period=0.25)
    try:
        time.sleep(0.3)  # QEMU's stand-in started under the leader
        watch.start()
        time.sleep(2.5)
    finally:
        watch.stop()
        for process in (leader, helper, neighbour):
            os.killpg(process.pid, 9)
            process.wait()
    assert len(watch.samples) >= 4
    found = watch.window(watch.samples[1].at, watch.samples[-1].at)
    assert found is not None
    assert found.vm_pct >= 20.0  # two busy stand-ins, on a shared 2-core machine
    assert found.top_outside.get("tb-neighbour", 0.0) >= 10.0
    assert found.outside_pct >= found.top_outside["tb-neighbour"] - 0.1  # rounded to 0.1
    assert "qemu-system-x86_64" not in found.top_outside
    assert "virtiofsd" not in found.top_outside  # the VM's, found by its socket
    assert found.cores == os.cpu_count()
    assert 0.0 < watch.cost_s < 1.0


def test_the_watcher_keeps_sampling_once_the_vm_has_ended():
    """virtme-ng gone (the guest stopping): the intervals are all the outside's."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    watch = HostWatch(gone.pid, period=0.1)
    watch.start()
    time.sleep(0.5)
    watch.stop()
    assert len(watch.samples) >= 3
    assert all(s.interval is None or s.interval.vm == 0 for s in watch.samples)
