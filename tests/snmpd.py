"""A real net-snmp agent in a lab namespace: a router that gives no shell, only SNMP.

Debian's snmpd (unpacked by ``scripts/unpack-daemon``, never installed: the package would
start one on the host) runs inside the router's network namespace, so its IF-MIB lists
that namespace's interfaces and counters, as a router's agent lists its ports. It answers
on a unix socket in the test's directory (net-snmp's ``unix:`` transport): the host
namespace gets no listener and no route into the lab, as with the sshd of tests/sshd.py.
Its persistent state goes to the test's directory, not /var/lib/snmp.
"""

import os
import subprocess
import time
from pathlib import Path

from tests.sshd import REPO

SNMPD = REPO / ".tools" / "bin" / "snmpd"
STARTUP_SECONDS = 5.0
STOP_SECONDS = 5.0
# UNIX sockets: the community is mapped to a security name by com2secunix, read-only view
# of everything.
CONFIG = """[snmp] persistentDir {state}
[snmp] noPersistentLoad yes
agentAddress unix:{socket}
com2secunix readers default {community}
group readgroup v2c readers
view all included .1
access readgroup "" any noauth exact all none none
"""


class Snmpd:
    """One snmpd in ``namespace`` while the ``with`` block runs; :attr:`agent` is where
    it answers (a hosts file's ``snmp`` value)."""

    def __init__(self, workdir: Path, namespace: str, community: str) -> None:
        self.workdir, self.namespace, self.community = workdir, namespace, community
        self.socket = workdir / "agent.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def agent(self) -> str:
        return f"unix:{self.socket}"

    def __enter__(self) -> "Snmpd":
        if not os.access(SNMPD, os.X_OK):
            raise RuntimeError(f"{SNMPD} is missing: run `make setup`")
        state = self.workdir / "state"
        state.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "snmpd.conf"
        config.write_text(CONFIG.format(state=state, socket=self.socket, community=self.community))
        config.chmod(0o600)
        argv = [
            "ip", "netns", "exec", self.namespace, str(SNMPD), "-f", "-C", "-c", str(config),
            "-Lf", str(self.workdir / "snmpd.log"), "-I", "-smux,mteTrigger,mteTriggerConf",
        ]  # fmt: skip
        env = {**os.environ, "SNMP_PERSISTENT_DIR": str(state), "MIBS": ""}
        self.process = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self.socket.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"snmpd did not start: {self.log()[-500:]}")
            time.sleep(0.05)
        return self

    def log(self) -> str:
        path = self.workdir / "snmpd.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __exit__(self, *_: object) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
