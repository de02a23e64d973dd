"""A guest cannot see its host's contention: with a busy process on the host, the guest's
own steal and outside load read 0. Its trials carry the host's figures over their
measured window instead (``vmhost.*``), and the reports list them as disturbed, as they
list outside load on the host. One boot, one short trial."""

import os
import shutil
import signal
import subprocess
from pathlib import Path

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store
from tunnelbench.report import view

PLAN = """name = "busy host"
repetitions = 1
[base]
"lab.kernel" = "debian"
"lab.wan.rate" = "3mbit"
"traffic.duration" = 3
"traffic.warmup" = 0
"""


def test_a_guest_trial_while_its_host_was_busy_is_flagged(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(PLAN)
    program = tmp_path / "tb-neighbour"  # its name is the process's name on the host
    program.symlink_to(shutil.which("sh") or "/bin/sh")
    neighbour = subprocess.Popen(
        [str(program), "-c", "while :; do :; done"], start_new_session=True
    )
    try:
        done = tunnelbench("run", "plan.toml", "--db", "r.db", cwd=tmp_path, timeout=600)
    finally:
        os.killpg(neighbour.pid, signal.SIGKILL)
        neighbour.wait()
    store = Store.read(tmp_path / "r.db")
    try:
        loaded = view.load(store, "latest")
        (trial,) = loaded.trials
        host = store.artifact(trial.id, "vmhost")
    finally:
        store.close()
    assert trial.status.value == "ok", (trial.error, done.stdout[-2000:], done.stderr[-2000:])
    m = trial.metrics
    assert m.get("load.outside_pct", 0.0) < 10.0  # what the guest saw of its host's load
    assert m["vmhost.vm_pct"] > 10.0  # QEMU ran the guest
    assert m["vmhost.outside_pct"] >= 10.0
    assert host["top_outside"].get("tb-neighbour", 0.0) >= 10.0
    assert m["vmhost.samples"] >= 5  # 3 s at 2 a second
    (disturbed,) = loaded.noise.disturbed
    assert disturbed.seq == trial.seq
    assert any(w.startswith("on the VM's host, processes outside the VM") for w in disturbed.what)
