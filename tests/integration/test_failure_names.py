"""A failed trial names what failed (issue 42): a killed iperf3 server was reported as
its client, and a deleted router namespace as "iperf3 server did not finish". Each test
breaks one thing of a real lab while real iperf3 runs through it (about 1-2 s each)."""

import contextlib
import functools
import os
import signal
import subprocess

import pytest

from tunnelbench.bench.testbeds.lab import broken_lab
from tunnelbench.errors import LabError
from tunnelbench.kinds import StreamMode
from tunnelbench.lab import netns
from tunnelbench.model.plan import LabSettings, TrafficSettings
from tunnelbench.traffic.base import WindowClosed
from tunnelbench.traffic.iperf3 import Iperf3

#: One process, a fixed warm-up of 0: the client runs its 2 s and exits by itself.
SETTINGS = TrafficSettings(duration=2, warmup=0)


def _closed(timeout: float) -> bool:
    return True


def test_a_killed_iperf3_server_is_named_not_its_client():
    lab = netns.build(LabSettings())
    killed: list[str] = []

    def kill_server(watched: dict[str, int], begin: float) -> WindowClosed:
        ((name, pid),) = [(n, p) for n, p in watched.items() if n.startswith("iperf3-server")]
        os.kill(pid, signal.SIGKILL)
        killed.append(f"iperf3 server on port {name.rsplit(':', 1)[1]} (pid {pid})")
        return _closed

    try:
        with pytest.raises(LabError) as caught:
            Iperf3().run(lab, SETTINGS, StreamMode.SINGLE, kill_server)
    finally:
        lab.teardown()
    # The cause first, then the client's own symptom, kept as evidence.
    assert str(caught.value).startswith(f"{killed[0]} was ended by SIGKILL; then: ")


def test_a_deleted_router_namespace_is_named_not_the_server_that_could_not_finish():
    lab = netns.build(LabSettings())
    router = lab.chain.roles[1]

    def delete_router(watched: dict[str, int], begin: float) -> WindowClosed:
        subprocess.run(["ip", "netns", "delete", lab.ns(router)], check=True)
        return _closed

    stop_reason = functools.partial(broken_lab, lab, {}, {})
    try:
        with pytest.raises(LabError) as caught:
            Iperf3().run(lab, SETTINGS, StreamMode.SINGLE, delete_router, stop_reason)
    finally:
        with contextlib.suppress(LabError):  # its namespace is already gone
            lab.teardown()
    assert str(caught.value) == f"namespace {lab.ns(router)} ({router}) vanished during the trial"
