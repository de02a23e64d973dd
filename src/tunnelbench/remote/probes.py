"""What tunnelbench reads on a real host, with nothing but busybox there.

A sampler is a POSIX sh loop on the host that writes, five times a second, the uptime,
every core's ``/proc/stat`` line, each thermal zone's temperature and each core's
current clock, streamed back over the SSH connection as it runs. It stops at a flag
file and reports its own CPU time (its shell and every ``sleep`` it waited for): the
probe's cost on the host, recorded with the trial. The cores' lines are read by the
shell itself, not by a ``grep`` a sample: under dash that halved the loop's own CPU (0.99
to 0.59% of a core over 5 s), and three such loops beside CPU-bound OpenVPN in the lab
took its goodput from a median of 679 to 616 Mbit/s with ``grep``, 655 without.

One-shot reads (the host's facts, its processes' CPU times) are single scripts whose
output is parsed here; the parsers are pure functions, unit-tested on real hosts' text.
A host's interface, queue and TCP counters are the lab's trial probes'
(:mod:`tunnelbench.probes`), read over the connection.
"""

import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from statistics import fmean

from tunnelbench.model.hostsrecord import HostFacts
from tunnelbench.model.remotefacts import CryptoDriver
from tunnelbench.probes.cpu import Snapshot, parse_proc_stat, usage
from tunnelbench.remote import software
from tunnelbench.remote.host import RECORD_SELF, SshHost
from tunnelbench.remote.software import Software

SAMPLE_INTERVAL_S = 0.2
#: The kernel's unit of the times in /proc/PID/stat (USER_HZ): 100 on every Linux
#: architecture tunnelbench meets (it is fixed by the kernel ABI, not by CONFIG_HZ).
USER_HZ = 100

SAMPLER = r"""
stop="$TB_DIR/stop.$1"
zones=$(ls -d /sys/class/thermal/thermal_zone* 2>/dev/null)
freqs=$(ls /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq 2>/dev/null)
n=0
while [ ! -e "$stop" ] && [ $n -lt $2 ]; do
  read -r up idle </proc/uptime
  echo "T $up"
  while read -r l; do
    case $l in cpu[0-9]*) echo "$l";; cpu*) ;; *) break;; esac
  done </proc/stat
  for z in $zones; do read -r t <"$z/temp" 2>/dev/null && echo "Z ${z##*/} $t"; done
  for f in $freqs; do
    read -r v <"$f" 2>/dev/null && c=${f%/cpufreq/*} && echo "F ${c##*/cpu} $v"
  done
  echo E
  sleep 0.2
  n=$((n+1))
done
read -r up idle </proc/uptime
read -r s </proc/$$/stat
echo "C $up $s"
"""

FACTS = (
    r"""
echo "kernel $(uname -r)"
echo "machine $(uname -m)"
echo "cores $(grep -c '^cpu[0-9]' /proc/stat)"
for p in """
    + " ".join(software.HOST_PROGRAMS)
    + r"""; do
  if command -v "$p" >/dev/null 2>&1; then echo "program $p $(command -v "$p")"; fi
done
if command -v iperf3 >/dev/null 2>&1; then echo "iperf3 $(iperf3 --version 2>&1 | head -n 1)"; fi
if command -v iperf >/dev/null 2>&1; then echo "iperf2 $(iperf --version 2>&1 | head -n 1)"; fi
b="$(readlink "$(command -v cat)" 2>/dev/null) $(cat --help 2>&1 | head -n 1)"
case "$b" in *busybox*|*BusyBox*) echo "busybox yes";; *) echo "busybox no";; esac
echo "clock $(date +%s)"
for z in /sys/class/thermal/thermal_zone*; do
  [ -r "$z/type" ] || continue; read -r t <"$z/type"; echo "zone ${z##*/} $t"
  for tp in "$z"/trip_point_*_temp; do
    [ -r "$tp" ] && read -r v <"$tp" && echo "trip ${z##*/} $v"
  done
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  [ -r "$c/cpufreq/scaling_governor" ] || continue
  read -r g <"$c/cpufreq/scaling_governor"; read -r m <"$c/cpufreq/cpuinfo_max_freq"
  echo "governor ${c##*/cpu} $g $m"
done
[ -r /proc/sys/net/ipv4/ip_forward ] && echo "forwarding $(cat /proc/sys/net/ipv4/ip_forward)"
if [ -r /proc/crypto ]; then
  awk '/^name/ { n = $3 } /^driver/ { d = $3 }
       /^priority/ { print "crypto", n, d, $3 }' /proc/crypto
fi
"""
    + software.SCRIPT
)


def process_stats(root: str = "/proc") -> str:
    """POSIX sh that prints ``P <stat line>`` for every process under ``root``.

    A process the glob listed may exit before its ``stat`` is read (1-2 of 20 trials
    failed so on a router running short-lived processes): it is skipped, silently. Any
    other ``stat`` that cannot be read (its process still there) fails the script.

    The read is inside braces so that their ``2>/dev/null`` is in place before its
    ``<`` is tried: in ``read -r s <f 2>/dev/null`` the ``<`` comes first, and the
    shell's error for it (and busybox's exit status 1) escapes.
    """
    return (
        f"for p in {shlex.quote(root)}/[0-9]*; do\n"
        '  if { read -r s <"$p/stat"; } 2>/dev/null; then echo "P $s"\n'
        '  elif [ -e "$p" ]; then echo "cannot read $p/stat" >&2; exit 1; fi\n'
        "done\n"
    )


#: ``P <stat line>`` of every process on the host.
PROCESSES = process_stats()


#: Between a host's TCP counters and its own processes in one read (:data:`OWN_PROCESSES`).
PROCESSES_MARK = "-- recorded processes"
#: ``P <stat line>`` of every process the session recorded on the host (``$TB_DIR/pids``:
#: PID and start time) that still runs as itself: a PID another process took since is
#: skipped by its start time.
OWN_PROCESSES = (
    f"echo {shlex.quote(PROCESSES_MARK)}\n"
    '[ -f "$TB_DIR/pids" ] && while read -r p t; do\n'
    '  { read -r s <"/proc/$p/stat"; } 2>/dev/null || continue\n'
    '  r=${s##*) }; set -- $r; [ "${20}" = "$t" ] && echo "P $s"\n'
    'done <"$TB_DIR/pids"\n'
    "exit 0\n"
)


@dataclass
class Facts:
    """What ``hosts check`` and a run record of a host."""

    kernel: str = ""
    machine: str = ""
    cores: int = 0
    programs: dict[str, str] = field(default_factory=dict)
    iperf3: str | None = None
    iperf2: str | None = None
    busybox: bool = False
    clock: int = 0
    zones: dict[str, str] = field(default_factory=dict)  # thermal_zoneN -> type
    trips_c: dict[str, float] = field(default_factory=dict)  # zone -> lowest trip point
    governors: dict[int, str] = field(default_factory=dict)
    max_mhz: dict[int, float] = field(default_factory=dict)
    forwarding: bool | None = None
    #: crypto algorithm -> (driver, priority) of the driver the kernel picks (highest priority)
    crypto: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: The tunnel daemons' versions and the kernel's WireGuard.
    software: Software = field(default_factory=Software)

    def record(self) -> HostFacts:
        """What a run records of the host (its environment's ``remote.facts``)."""
        drivers = self.cipher_drivers().items()
        return HostFacts(
            kernel=self.kernel,
            machine=self.machine,
            cores=self.cores,
            iperf3=self.iperf3,
            busybox=self.busybox,
            thermal_zones=dict(self.zones),
            trips_c=dict(self.trips_c),
            governors={str(k): v for k, v in self.governors.items()},
            max_mhz={str(k): v for k, v in self.max_mhz.items()},
            crypto_drivers={k: CryptoDriver(d, p) for k, (d, p) in drivers},
            software=self.software.record(),
        )

    def cipher_drivers(self) -> dict[str, tuple[str, int]]:
        """The tunnels' ciphers: ChaCha20, Poly1305 and AES (GCM, CBC), as served."""
        wanted = ("chacha", "poly1305", "aes", "gcm")
        return {n: d for n, d in sorted(self.crypto.items()) if any(w in n for w in wanted)}


def parse_facts(text: str) -> Facts:
    facts = Facts()
    for line in text.splitlines():
        key, _, rest = line.partition(" ")
        parts = rest.split()
        if key == "kernel":
            facts.kernel = rest.strip()
        elif key == "machine":
            facts.machine = rest.strip()
        elif key == "cores" and rest.strip().isdigit():
            facts.cores = int(rest)
        elif key == "program" and len(parts) == 2:
            facts.programs[parts[0]] = parts[1]
        elif key == "iperf3":
            facts.iperf3 = rest.strip()
        elif key == "iperf2":
            facts.iperf2 = rest.strip()
        elif key == "busybox":
            facts.busybox = rest.strip() == "yes"
        elif key == "clock" and rest.strip().isdigit():
            facts.clock = int(rest)
        elif key == "zone" and len(parts) >= 2:
            facts.zones[parts[0]] = " ".join(parts[1:])
        elif key == "trip" and len(parts) == 2 and parts[1].lstrip("-").isdigit():
            trip = int(parts[1]) / 1000
            if trip > 0:
                facts.trips_c[parts[0]] = min(trip, facts.trips_c.get(parts[0], trip))
        elif key == "governor" and len(parts) == 3 and parts[0].isdigit():
            facts.governors[int(parts[0])] = parts[1]
            if parts[2].isdigit():
                facts.max_mhz[int(parts[0])] = int(parts[2]) / 1000
        elif key == "forwarding":
            facts.forwarding = rest.strip() == "1"
        elif key == "crypto" and len(parts) == 3 and parts[2].lstrip("-").isdigit():
            name, driver, priority = parts[0], parts[1], int(parts[2])
            if name not in facts.crypto or priority > facts.crypto[name][1]:
                facts.crypto[name] = (driver, priority)
        else:
            facts.software.parse_line(key, rest)
    return facts


Processes = dict[int, tuple[str, int]]  # pid -> (comm, utime + stime in ticks)


def parse_processes(text: str) -> Processes:
    """The ``P <stat line>`` lines of :func:`process_stats`, by PID."""
    processes: Processes = {}
    for line in text.splitlines():
        if line.startswith("P "):
            stat = _process_stat(line[2:])
            if stat is not None:
                processes[stat[0]] = (stat[1], stat[2])
    return processes


def _process_stat(text: str) -> tuple[int, str, int] | None:
    """(pid, comm, utime + stime) of a /proc/PID/stat line."""
    head, sep, tail = text.rpartition(")")
    if not sep or " (" not in head:
        return None
    pid, _, comm = head.partition(" (")
    fields = tail.split()
    if not pid.isdigit() or len(fields) < 13:
        return None
    return int(pid), comm, int(fields[11]) + int(fields[12])


def process_cpu(
    before: Processes, after: Processes, seconds: float, top: int = 5
) -> dict[str, float]:
    """The busiest processes over the window, ``comm`` -> % of one core (the same
    program's processes added: a daemon's threads are one process, its workers not)."""
    used: dict[str, float] = {}
    for pid, (comm, ticks) in after.items():
        if pid in before and before[pid][0] == comm:
            delta = ticks - before[pid][1]
            if delta > 0:
                used[comm] = used.get(comm, 0.0) + 100.0 * delta / USER_HZ / seconds
    ranked = sorted(used.items(), key=lambda item: -item[1])[:top]
    # Below a tenth of a core a process is no candidate for what held the DUT.
    return {comm: round(pct, 1) for comm, pct in ranked if pct >= 10.0}


@dataclass
class Sample:
    at: float  # this machine's monotonic clock when the sample arrived
    cores: Snapshot
    temps_c: dict[str, float]
    mhz: dict[int, float]


@dataclass
class SamplerResult:
    samples: list[Sample]
    cost_pct: float | None  # the sampler's own CPU, % of one core of the host
    lifetime_s: float | None


def parse_sample(block: list[str], at: float) -> Sample:
    cores = parse_proc_stat("\n".join(line for line in block if line.startswith("cpu")))
    temps: dict[str, float] = {}
    mhz: dict[int, float] = {}
    for line in block:
        parts = line.split()
        if parts[0] == "Z" and len(parts) == 3 and parts[2].lstrip("-").isdigit():
            temps[parts[1]] = int(parts[2]) / 1000
        elif parts[0] == "F" and len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            mhz[int(parts[1])] = int(parts[2]) / 1000
    return Sample(at, cores, temps, mhz)


def sampler_cost(line: str) -> tuple[float, float] | None:
    """(CPU % of one core, lifetime s) from the sampler's last line: ``C <uptime> <stat>``.
    Its utime, stime and its waited-for children's (cutime, cstime) over its life."""
    parts = line.split(" ", 2)
    if len(parts) < 3 or parts[0] != "C":
        return None
    _, _, tail = parts[2].rpartition(")")
    fields = tail.split()
    try:
        uptime = float(parts[1])
        ticks = sum(int(v) for v in fields[11:15])
        started = int(fields[19]) / USER_HZ
    except (ValueError, IndexError):
        return None
    lifetime = uptime - started
    if lifetime <= 0:
        return None
    return 100.0 * ticks / USER_HZ / lifetime, lifetime


class RemoteSampler:
    """The sampler loop on one host, read by a thread of this process."""

    def __init__(self, host: SshHost, name: str, max_seconds: float) -> None:
        self.host = host
        self.name = name
        self.samples: list[Sample] = []
        self.cost: tuple[float, float] | None = None
        self.error: str | None = None
        count = int(max_seconds / SAMPLE_INTERVAL_S) + 1
        script = (
            f"{host.env()}{RECORD_SELF}; exec sh -c {shlex.quote(SAMPLER)} sampler {name} {count}"
        )
        self.proc = host.connection.popen(script)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        block: list[str] = []
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            if line == "E":
                self.samples.append(parse_sample(block, time.monotonic()))
                block = []
            elif line.startswith("C "):
                self.cost = sampler_cost(line)
            elif line:
                block.append(line)

    def stop(self, timeout: float = 5.0) -> SamplerResult:
        self.host.connection.run(["touch", f"{self.host.directory}/stop.{self.name}"], check=False)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # a hung ssh: ours, ended by its PID
            self.proc.kill()
            self.proc.wait()
        self.thread.join(timeout=2)
        cost, lifetime = self.cost if self.cost else (None, None)
        return SamplerResult(self.samples, cost, lifetime)


@dataclass(frozen=True)
class WindowFigures:
    """A host's cores, temperatures and clocks over the measured window."""

    #: core -> part -> % (user, system, softirq, irq, idle, steal)
    cores: dict[int, dict[str, float]]
    temp_max_c: dict[str, float]
    mhz_mean: dict[int, float]
    mhz_min: dict[int, float]
    samples: int


def window(samples: list[Sample], begin: float, end: float) -> WindowFigures | None:
    """Per-core shares between the samples nearest ``begin`` and ``end`` (monotonic
    times of this machine), and the temperatures and clocks sampled in between."""
    inside = [s for s in samples if begin <= s.at <= end]
    if len(inside) < 2:
        return None
    first, last = inside[0], inside[-1]
    parts = ("user", "system", "softirq", "irq", "idle", "steal")
    cores = {u.core: {p: getattr(u, p) for p in parts} for u in usage(first.cores, last.cores)}
    temps: dict[str, float] = {}
    clocks: dict[int, list[float]] = {}
    for s in inside:
        for zone, c in s.temps_c.items():
            temps[zone] = max(c, temps.get(zone, c))
        for core, mhz in s.mhz.items():
            clocks.setdefault(core, []).append(mhz)
    return WindowFigures(
        cores,
        temps,
        {c: round(fmean(v), 1) for c, v in clocks.items()},
        {c: min(v) for c, v in clocks.items()},
        len(inside),
    )
