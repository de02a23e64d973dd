"""Reading a generator's sockets from a host's /proc/net tables (traffic.waiting): several
tables as one text, as a real host's ``cat`` gives them. And what a failed trial names
first: a server a signal ended, or the trial's own reason (real processes, ended for it)."""

import signal
import socket
import subprocess
from pathlib import Path
from typing import cast

from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.traffic import waiting

TABLES = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0200A8C0:1451 0100A8C0:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0200A8C0:1451 0100A8C0:D2A6 01 00000000:00000000 00:00000000 00000000     0        0 3 1
  sl  local_address                         remote_address                        st tx_queue
   0: 00000000000000000000000000000000:1452 00000000000000000000000000000000:0000 0A 00000000
"""


def test_each_tables_sockets_are_read_and_their_headings_skipped():
    found = waiting.sockets(TABLES)
    assert found == [(5201, "0A"), (5201, "01"), (5201, "01"), (5202, "0A")]
    assert found.count((5201, waiting.ESTABLISHED)) == 2


def test_a_listener_of_this_machine_is_found_in_its_own_table():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        text = Path("/proc/net/tcp").read_text()
        assert (port, waiting.LISTEN) in waiting.sockets(text)


def _server(proc: "subprocess.Popen[bytes]") -> waiting.Server:
    # The host is not read: only the process is asked how it ended.
    return waiting.Server("iperf3 server on port 5201", cast(Host, None), proc, 5201, Path("/x"))


def test_a_client_failure_names_the_server_a_signal_ended_first():
    proc = subprocess.Popen(["sleep", "30"])
    proc.send_signal(signal.SIGKILL)
    proc.wait(5)
    symptom = LabError("iperf3 client on port 5201 ended before it was stopped (exit 1)")
    told = waiting.explained(symptom, [_server(proc)], lambda: None)
    assert str(told) == (
        f"iperf3 server on port 5201 (pid {proc.pid}) was ended by SIGKILL; then: iperf3"
        " client on port 5201 ended before it was stopped (exit 1)"
    )


def test_the_trials_own_reason_comes_before_a_server_and_is_not_said_twice():
    proc = subprocess.Popen(["true"])
    proc.wait(5)  # exited 0 as a one-off server does when its client ends: not a cause
    daemon = "tunnel daemon charon on gw (pid 7) died during the trial"
    symptom = LabError("iperf3: unable to connect to server: Connection timed out")
    told = waiting.explained(symptom, [_server(proc)], lambda: daemon)
    assert str(told) == f"{daemon}; then: iperf3: unable to connect to server: Connection timed out"
    assert waiting.explained(LabError(daemon), [], lambda: daemon).args == (daemon,)
    assert waiting.explained(symptom, [_server(proc)], lambda: None) is symptom


def test_a_reset_with_no_known_cause_says_the_servers_were_running():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        reset = LabError("iperf3: unable to write to stream socket: Connection reset by peer")
        told = waiting.explained(reset, [_server(proc)], lambda: None)
        assert str(told) == f"{reset} (the servers were still running)"
    finally:
        proc.kill()
        proc.wait(5)
