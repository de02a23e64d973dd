"""Two measurements at once: the second is refused, or, asked to, runs and says so.

Two runs side by side on 2 cores stored 38-65% lower figures as if they were true; a
run now takes a host-wide lock (:mod:`tunnelbench.bench.measurement_lock`) before it creates
anything.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.measurement_lock import LOCK_PATH
from tunnelbench.bench.store import Store
from tunnelbench.model.lockrecord import LockMode


def _holder_pid() -> int | None:
    try:
        return int(json.loads(LOCK_PATH.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def test_a_second_run_is_refused_and_a_concurrent_one_is_recorded(tmp_path: Path):
    first_db, second_db, third_db = (tmp_path / f"{n}.db" for n in ("a", "b", "c"))
    first = subprocess.Popen(
        [sys.executable, "-m", "tunnelbench", "run", "-q", "--tunnels", "none"]
        + ["--streams", "1", "--runs", "1", "--duration", "8", "--db", str(first_db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while _holder_pid() != first.pid:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never took the lock"
            time.sleep(0.05)

        refused = tunnelbench("run", "--quick", "--tunnels", "none", "--db", str(second_db))
        assert refused.returncode == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert f"another tunnelbench measurement is running (pid {first.pid}," in line
        assert not second_db.exists()  # nothing created

        beside = tunnelbench(
            "run", "--quick", "-q", "--tunnels", "none", "--streams", "1",
            "--allow-concurrent", "--db", str(third_db),
        )  # fmt: skip
        assert beside.returncode == 0, beside.stderr
        environment = Store(third_db).run("latest").environment
        lock = environment.measurement_lock
        assert lock is not None and lock.mode is LockMode.NONE
        assert lock.concurrent_with is not None and lock.concurrent_with.pid == first.pid
    finally:
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    held = Store(first_db).run("latest").environment.measurement_lock
    assert held is not None and (held.mode, held.concurrent_with) == (LockMode.EXCLUSIVE, None)
    # The run that held the lock records who measured beside it.
    assert [str(third_db) in b.command for b in held.beside or ()] == [True]
