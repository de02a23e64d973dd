"""A guest's process group ends when nothing in it runs: QEMU and virtme-run, orphaned
when virtme-ng ends, stay zombies until init reaps them, and stopping the guest must not
wait for that (it took 1.2-1.5 s here)."""

import os
import signal
import subprocess
import sys
import time

from tunnelbench.vm.machine import _group_alive

#: A session leader that leaves a zombie in its group and exits: its child forks a
#: grandchild (same group) that exits at once, then moves itself to a group of its own
#: and sleeps without reaping it, so the zombie stays until the child is ended.
ZOMBIE_LEFT = """
import os, sys, time
child = os.fork()
if child == 0:
    grandchild = os.fork()
    if grandchild == 0:
        os._exit(0)
    os.setpgid(0, 0)
    print(grandchild, os.getpid(), flush=True)
    time.sleep(30)
    os._exit(0)
sys.stdout.close()
os._exit(0)
"""


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_a_group_of_only_zombies_has_ended_and_a_running_member_keeps_it_alive():
    leader = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE_LEFT], stdout=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    assert leader.stdout is not None
    zombie, child = (int(pid) for pid in leader.stdout.readline().decode().split())
    try:
        leader.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _state(zombie) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(zombie) == "Z"
        assert os.getpgid(zombie) == leader.pid  # a signal to the group still reaches it
        assert not _group_alive(leader)
    finally:
        os.kill(child, signal.SIGKILL)
    running = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert _group_alive(running)
    finally:
        running.kill()
        running.wait()
    assert not _group_alive(running)
