"""A router read over SNMP: the DUT that gives no shell (RouterOS, pfSense, a switch), its
interface counters and whole-box CPU counters read from this machine with net-snmp's
``snmpget`` and ``snmpbulkwalk`` (Debian's ``snmp``).

The read community is a credential: it is written to a private ``snmp.conf`` in the
session's own directory (``SNMPCONFPATH``), never on a command line, where every local
user could read it in ``/proc``. That file also keeps the tools from loading MIBs (the
numeric OIDs below need none; Debian ships without the IETF MIBs and would print pages
of warnings) and from saving state in ``/var/lib/snmp``.

What SNMP can tell, and what it cannot:

- interface counters (IF-MIB): bytes, unicast packets, discards and errors per
  interface, the 64-bit ``ifHC*`` byte and packet counters and the 32-bit discard and
  error counters (wrapped modulo 2^32). They are the second instrument of a black-box
  run: the DUT's busiest interface must have sent what iperf3 says arrived.
- the whole box's CPU time (UCD-SNMP-MIB ``ssCpuRaw*``, net-snmp's agent on Linux and
  OpenWrt), summed over every core: a box at 90% or more is CPU-bound, but one core
  saturated on a 4-core box reads 25% and cannot be told from four at 25% each.
- every figure is as old as the agent's last refresh of it: a trial polls the agent and
  places its refreshes (:mod:`tunnelbench.remote.snmp_watch`), waits for one after the
  traffic before its closing reading, and gives the CPU only between two refreshes.
- nothing of queues, processes, clocks or temperatures: the verdict says so.
"""

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from tunnelbench.errors import LabError, UserError
from tunnelbench.model import metrics as metric
from tunnelbench.system.command import run

#: net-snmp's transport prefixes a hosts file may give (``udp:`` is the default).
TRANSPORTS = ("udp", "tcp", "udp6", "tcp6", "unix")
#: One request's wait and retries: an agent on a busy router answers late, not never.
TIMEOUT_S = 2
RETRIES = 1
#: Variables per GET request: agents cap a response's size (RouterOS near 1,500 bytes
#: of UDP), so a box with many interfaces is read in several requests.
PER_REQUEST = 24

SYS_DESCR = "1.3.6.1.2.1.1.1.0"
IF_NAME = "1.3.6.1.2.1.31.1.1.1.1"
IF_DESCR = "1.3.6.1.2.1.2.2.1.2"
IF_TYPE = "1.3.6.1.2.1.2.2.1.3"
IF_OPER_STATUS = "1.3.6.1.2.1.2.2.1.8"
SOFTWARE_LOOPBACK = "24"
UP = "1"
#: The interface counters read at each edge of the window: (field, column OID, bits).
#: The field names are those of the link counters read over SSH (``link.<role>.<if>.*``),
#: so the checks and rules that read those read these alike; packets are unicast only.
IF_COUNTERS = (
    ("rx_bytes", "1.3.6.1.2.1.31.1.1.1.6", 64),  # ifHCInOctets
    ("tx_bytes", "1.3.6.1.2.1.31.1.1.1.10", 64),  # ifHCOutOctets
    ("rx_packets", "1.3.6.1.2.1.31.1.1.1.7", 64),  # ifHCInUcastPkts
    ("tx_packets", "1.3.6.1.2.1.31.1.1.1.11", 64),  # ifHCOutUcastPkts
    ("rx_dropped", "1.3.6.1.2.1.2.2.1.13", 32),  # ifInDiscards
    ("tx_dropped", "1.3.6.1.2.1.2.2.1.19", 32),  # ifOutDiscards
    ("rx_errors", "1.3.6.1.2.1.2.2.1.14", 32),  # ifInErrors
    ("tx_errors", "1.3.6.1.2.1.2.2.1.20", 32),  # ifOutErrors
)
#: UCD-SNMP-MIB's raw CPU counters (ticks of 1/100 s, summed over every core).
CPU_RAW = {
    "user": "1.3.6.1.4.1.2021.11.50.0",
    "nice": "1.3.6.1.4.1.2021.11.51.0",
    "system": "1.3.6.1.4.1.2021.11.52.0",
    "idle": "1.3.6.1.4.1.2021.11.53.0",
    "wait": "1.3.6.1.4.1.2021.11.54.0",
    "interrupt": "1.3.6.1.4.1.2021.11.56.0",
    "softirq": "1.3.6.1.4.1.2021.11.61.0",
    "steal": "1.3.6.1.4.1.2021.11.64.0",
}
CPU_COUNT = "1.3.6.1.4.1.2021.11.67.0"  # ssCpuNumCpus
TICKS_PER_S = 100
#: Answers that mean "this agent has no such variable", not a failure.
ABSENT = ("No Such Object", "No Such Instance", "No more variables")


@dataclass(frozen=True)
class Agent:
    """Where the DUT's agent answers (net-snmp's form: ``[transport:]address[:port]``)."""

    target: str

    @staticmethod
    def parse(raw: str) -> "Agent":
        """A hosts file's ``snmp`` value; a :class:`UserError` says what is wrong."""
        text = raw.strip()
        if not text or any(c.isspace() for c in text) or text.startswith("-"):
            raise UserError(f"{raw!r} is not an SNMP agent address")
        head, colon, rest = text.partition(":")
        if colon and head.isalpha() and head not in TRANSPORTS:
            raise UserError(f"{raw!r}: transport {head!r} is none of {', '.join(TRANSPORTS)}")
        if head == "unix" and not rest.startswith("/"):
            raise UserError(f"{raw!r}: a unix socket needs an absolute path")
        return Agent(text)


@dataclass
class Device:
    """What discovery found on the agent: its description, the interfaces up (index ->
    name) and whether it keeps the CPU counters."""

    description: str
    interfaces: dict[str, str]
    cpu_counters: bool
    cores: int | None


@dataclass
class Snapshot:
    at: float  # time.monotonic() when the answer came
    counters: dict[str, dict[str, int]] = field(default_factory=dict)  # ifindex -> field -> value
    cpu: dict[str, int] = field(default_factory=dict)  # CPU_RAW's part -> ticks


class Reader:
    """net-snmp's tools against one agent, SNMPv2c with a read community kept in a
    private configuration file under ``directory`` (which must exist and be private)."""

    def __init__(self, agent: Agent, community: str, directory: Path, name: str) -> None:
        self.agent = agent
        self.name = name
        self.directory = directory
        path = directory / "snmp.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(
                f"defVersion 2c\ndefCommunity {community}\n"
                f"persistentDir {directory}\nnoPersistentLoad yes\nnoPersistentSave yes\n"
            )
        self.env = {"SNMPCONFPATH": str(directory)}

    def _argv(self, tool: str, oids: list[str]) -> list[str]:
        # -m "": no MIBs; -On numeric OIDs; -OQ "oid = value"; -Oe enumerations as numbers
        return [
            tool, "-m", "", "-On", "-OQ", "-Oe", "-t", str(TIMEOUT_S), "-r", str(RETRIES),
            self.agent.target, *oids,
        ]  # fmt: skip

    def _ask(self, tool: str, oids: list[str]) -> dict[str, str]:
        wait = (TIMEOUT_S * (RETRIES + 1)) * max(1, len(oids)) + 5
        done = run(self._argv(tool, oids), check=False, timeout=wait, env=self.env)
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            reason = why[-1] if why else f"exit status {done.returncode}"
            if "Timeout" in reason:
                reason += " (is the agent reachable, and the community right? an agent"
                reason += " ignores a wrong one)"
            raise LabError(f"{self.name}: SNMP agent {self.agent.target}: {reason}")
        return parse(done.stdout)

    def get(self, oids: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(oids), PER_REQUEST):
            found |= self._ask("snmpget", oids[start : start + PER_REQUEST])
        return found

    def walk(self, oid: str) -> dict[str, str]:
        """The column under ``oid``: index (the OID's rest) -> value."""
        prefix = f".{oid}."
        return {
            key.removeprefix(prefix): value
            for key, value in self._ask("snmpbulkwalk", [oid]).items()
            if key.startswith(prefix)
        }

    def discover(self) -> Device:
        description = self.get([SYS_DESCR]).get(f".{SYS_DESCR}", "")
        names = self.walk(IF_NAME) or self.walk(IF_DESCR)
        status, kinds = self.walk(IF_OPER_STATUS), self.walk(IF_TYPE)
        up = {
            index: name
            for index, name in names.items()
            if status.get(index) == UP and kinds.get(index) != SOFTWARE_LOOPBACK
        }
        cpu = self.get([*CPU_RAW.values(), CPU_COUNT])
        has_cpu = all(_number(cpu.get(f".{CPU_RAW[p]}")) is not None for p in ("user", "idle"))
        cores = _number(cpu.get(f".{CPU_COUNT}"))
        return Device(description, up, has_cpu, cores)

    def snapshot(self, device: Device) -> Snapshot:
        oids = [f"{column}.{index}" for index in device.interfaces for _, column, _ in IF_COUNTERS]
        if device.cpu_counters:
            oids += list(CPU_RAW.values())
        values = self.get(oids)
        taken = Snapshot(time.monotonic())
        for index in device.interfaces:
            row = {}
            for name, column, _ in IF_COUNTERS:
                if (value := _number(values.get(f".{column}.{index}"))) is not None:
                    row[name] = value
            taken.counters[index] = row
        for part, oid in CPU_RAW.items():
            if (value := _number(values.get(f".{oid}"))) is not None:
                taken.cpu[part] = value
        return taken


def parse(text: str) -> dict[str, str]:
    """``snmpget -On -OQ`` lines (``.1.3.6... = value``) as OID -> value, strings
    unquoted; variables the agent lacks are left out."""
    found = {}
    for line in text.splitlines():
        oid, sep, value = line.partition(" = ")
        if not sep or not oid.startswith("."):
            continue
        value = value.strip()
        if value.startswith(ABSENT):
            continue
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        found[oid] = value
    return found


def _number(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def link_metrics(role: str, device: Device, first: Snapshot, last: Snapshot) -> dict[str, float]:
    """``link.<role>.<ifname>.<field>`` between two snapshots, the 32-bit counters
    unwrapped (modulo 2^32: the window is far shorter than a wrap of the discards)."""
    metrics: dict[str, float] = {}
    bits = {name: width for name, _, width in IF_COUNTERS}
    for index, name in device.interfaces.items():
        start, end = first.counters.get(index, {}), last.counters.get(index, {})
        for counter, value in end.items():
            if counter in start:
                delta = (value - start[counter]) % (1 << bits[counter])
                metrics[metric.link(role, name, counter)] = float(delta)
    return metrics


def cpu_metrics(role: str, device: Device, first: Snapshot, last: Snapshot) -> dict[str, float]:
    """The whole box's busy share between two snapshots (``snmp.<role>.cpu_busy_pct``),
    softirq's, and the seconds the agent's counters covered (``cpu_covered_s``): the
    span between the two refreshes that gave them, whatever the moments they were read
    at (:mod:`tunnelbench.remote.snmp_watch` chooses the refreshes and checks the span).
    Without the number of cores the span's length is unknown, and nothing is given."""
    metrics: dict[str, float] = {}
    spent = {
        part: last.cpu[part] - first.cpu[part]
        for part in CPU_RAW
        if part in first.cpu and part in last.cpu
    }
    total = sum(spent.values())
    if total <= 0 or "idle" not in spent or not device.cores:
        return metrics
    covered = round(total / TICKS_PER_S / device.cores, 2)
    metrics[metric.snmp(role, metric.SNMP_CPU_COVERED)] = covered
    idle = spent["idle"] + spent.get("wait", 0)
    metrics[metric.snmp(role, metric.SNMP_CPU_BUSY)] = round(100.0 * (1 - idle / total), 2)
    if "softirq" in spent:
        softirq = round(100.0 * spent["softirq"] / total, 2)
        metrics[metric.snmp(role, metric.SNMP_CPU_SOFTIRQ)] = softirq
    return metrics
