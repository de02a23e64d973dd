"""A namespace's /proc/net files read by a thread that joins it: that namespace's
counters, no process started, and the reading process itself left where it was."""

import os
import subprocess
from pathlib import Path

import pytest

from tunnelbench.errors import LabError
from tunnelbench.lab.host import NetnsHost
from tunnelbench.lab.state import LabState
from tunnelbench.system import netns_files


def _echoes(snmp: str) -> int:
    header, values = (line.split() for line in snmp.splitlines() if line.startswith("Icmp:"))
    return int(values[header.index("InEchos")])


def test_a_namespaces_counters_are_its_own_and_no_process_reads_them(monkeypatch):
    name = f"tbx-netns-files-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        subprocess.run(
            ["ip", "netns", "exec", name, "ping", "-c", "3", "-i", "0.01", "-q", "127.0.0.1"],
            check=True, capture_output=True,
        )  # fmt: skip
        host_before = Path("/proc/thread-self/net/snmp").read_text()

        def no_process(*args: object, **kwargs: object) -> None:
            raise AssertionError("a process was started to read the namespace's files")

        with monkeypatch.context() as patched:
            patched.setattr(subprocess.Popen, "__init__", no_process)
            text = netns_files.read(name, ["snmp", "netstat"])
            devices = netns_files.read(name, ["dev"])
        # A fresh namespace counts only its own three echo requests; both files are read.
        assert _echoes(text) == 3 and "TcpExt:" in text
        # This thread still reads the host's namespace (its own counters, not the lab's).
        assert _echoes(Path("/proc/thread-self/net/snmp").read_text()) == _echoes(host_before)
        assert [line.split(":")[0].strip() for line in devices.splitlines()[2:]] == ["lo"]
        host = NetnsHost(name, LabState(lab_id="x", topology="road-warrior"))
        with pytest.raises(LabError, match=f"cannot read /proc/net in {name}: .*no_such"):
            host.read_net(["no_such"])
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)
    with pytest.raises(OSError, match="No such file"):
        netns_files.read(name, ["snmp"])
