"""``tunnelbench tune --hosts`` on the sshd "machines" (tests/sshd.py; the server on
busybox): the lab's tiny FIFO, put on the real WAN link between the client and the
router by ``lab.wan``, is fixed by a larger queue as in the lab (tests/integration/
test_tune.py), and the session measures nothing a hosts run could not set; interrupted,
it is resumed on the same hosts."""

import json
import signal
import sqlite3
import subprocess
from pathlib import Path

from tests.integration.helpers import latest, tunnelbench
from tests.integration.test_remote_hosts import _wait_for_trials, tunnelbench_argv
from tests.integration.test_remote_kinds import Farm, farm, roots, state  # noqa: F401
from tests.integration.test_tune import TINY_FIFO, _kept_significant
from tunnelbench.model.tuning import TuneRecord

PLAN = '[base.tunnel]\nkind = "none"\n' + TINY_FIFO


def _record(db: Path) -> TuneRecord:
    with sqlite3.connect(db) as conn:
        return TuneRecord.from_dict(json.loads(conn.execute("SELECT tune FROM runs").fetchone()[0]))


def test_a_tiny_fifo_on_the_hosts_wan_is_fixed_by_a_larger_queue(farm: Farm) -> None:  # noqa: F811
    work = farm.work / "tune"
    work.mkdir()
    (work / "hosts.toml").write_text(farm.hosts_file("vxlan"))
    (work / "plan.toml").write_text(PLAN)
    before, queues = state(farm.lab), roots(farm.lab)
    # Interrupted (Ctrl-C) once its first trial is stored, the hosts left as they were,
    # then resumed on the same hosts: the session goes on to the same end.
    session = subprocess.Popen(
        [*tunnelbench_argv(), "tune", "plan.toml", "--hosts", "hosts.toml", "--db", "t.db",
         "--no-reports", "--max-steps", "1", "--max-runs", "5", "-q"],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for_trials(work / "t.db", 1, session)
        session.send_signal(signal.SIGINT)
        out, err = session.communicate(timeout=60)
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()
    assert session.returncode == 130, out + err
    assert roots(farm.lab) == queues and state(farm.lab) == before
    done = tunnelbench(
        "tune", "--resume", "1", "--hosts", "hosts.toml", "--db", "t.db", "--no-reports",
        cwd=work, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = _record(work / "t.db")
    assert "dropped" in record.steps[1].diagnosis, record.steps[1].diagnosis
    kept = _kept_significant(record, "lab.wan.queue_limit")
    assert kept.value > 4 and record.final_key == kept.key
    # Only what a hosts run can set was measured; a queue the WAN ends' kernel lacks
    # (fq_codel and cake, on this machine's) failed with tc's words.
    for candidate in record.steps[1].candidates:
        assert candidate.setting.startswith(("lab.wan.", "traffic.")), candidate.setting
        if candidate.outcome == "failed":
            assert candidate.setting == "lab.wan.queue" and "tc qdisc add" in candidate.note
    # Every trial ran on the hosts, with their real path's MTUs recorded.
    run = latest(work / "t.db")
    assert run.environment.remote is not None and run.run.status.value == "complete"
    for trial in run.trials:
        assert (trial.config.lab.wan.mtu, trial.config.lab.lan_mtu) == (1500, 1500)
    assert roots(farm.lab) == queues and state(farm.lab) == before
