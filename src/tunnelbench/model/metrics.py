"""The names of the metrics a trial stores, with their units, in one place.

Stored names never change (old databases are read by today's reports). Fixed names are
constants; the patterned ones (one per core, process, qdisc or link) are built and read
back with the functions here, never by slicing strings where they are used.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str


GOODPUT: Final = Metric("goodput_bps", "bit/s")  # all directions together, at the receivers
# The length of the receivers' interval reports that goodput counts (the shortest of its
# directions and processes): the measured window as the receivers timed it. Runs recorded
# before it took iperf3's goodput from its end summary instead.
GOODPUT_WINDOW: Final = Metric("goodput.window_s", "s")
UPLOAD: Final = Metric("upload_bps", "bit/s")
DOWNLOAD: Final = Metric("download_bps", "bit/s")
RETRANSMITS: Final = Metric("retransmits", "segments")  # the generator's own count
KERNEL_RETRANSMITS: Final = Metric("tcp.window.retrans_segs", "segments")
UDP_LOST_PACKETS: Final = Metric("udp.lost_packets", "packets")
UDP_LOST_PCT: Final = Metric("udp.lost_pct", "%")
UDP_JITTER: Final = Metric("udp.jitter_ms", "ms")
GENERATOR_PROCESSES: Final = Metric("generator_processes", "processes")
SAMPLER_CPU: Final = Metric("sampler.cpu_pct", "% of one core")
SAMPLER_SAMPLES: Final = Metric("sampler.samples", "samples")
SAMPLER_WINDOW: Final = Metric("sampler.window_s", "s")
# How far the sampler's first and last samples fell after the traffic's window opened and
# closed (tunnelbench.probes.sampler): a starved sampler thread wakes late.
SAMPLER_OPEN_LAG: Final = Metric("sampler.open_lag_ms", "ms")
SAMPLER_CLOSE_LAG: Final = Metric("sampler.close_lag_ms", "ms")
LOAD_LAB: Final = Metric("load.lab_pct", "% of all cores")
LOAD_OUTSIDE: Final = Metric("load.outside_pct", "% of all cores")
LOAD_SCAN: Final = Metric("load.scan_ms", "ms")
# A VM guest's trial, as its host saw the measured window (tunnelbench.probes.vmhost): the
# VM's processes (QEMU), every other process on the host, all the host's cores, the
# host's most stolen core.
VMHOST_VM: Final = Metric("vmhost.vm_pct", "% of one host core")
VMHOST_OUTSIDE: Final = Metric("vmhost.outside_pct", "% of one host core")
VMHOST_BUSY: Final = Metric("vmhost.busy_pct", "% of one host core, all cores")
VMHOST_CORES: Final = Metric("vmhost.cores", "cores")
VMHOST_STEAL: Final = Metric("vmhost.steal_pct", "% of a host core")
VMHOST_SAMPLES: Final = Metric("vmhost.samples", "samples")
SPEED_COST: Final = Metric("speed.cost_ms", "ms")
# The probes' own cost per trial: time spent reading before and after the traffic.
PROBES_OVERHEAD: Final = Metric("probes.overhead_s", "s")  # CPU time of the cores' speed timings
# Round trips from the client to the server (tunnelbench.probes.rtt): before the traffic,
# and over the measured window while it runs.
RTT_IDLE: Final = Metric("rtt.idle_ms", "ms")
RTT_LOADED: Final = Metric("rtt.loaded_ms", "ms")
RTT_LOADED_P95: Final = Metric("rtt.loaded_p95_ms", "ms")
RTT_LOADED_MAX: Final = Metric("rtt.loaded_max_ms", "ms")
RTT_LOST: Final = Metric("rtt.lost", "requests")
RTT_SAMPLES: Final = Metric("rtt.samples", "replies")
# Steady state (tunnelbench.analysis.steadiness): the median loaded round trip over the
# first and the last third of the measured window, and the mean goodput over the same.
RTT_FIRST: Final = Metric("rtt.loaded_first_ms", "ms")
RTT_LAST: Final = Metric("rtt.loaded_last_ms", "ms")
GOODPUT_FIRST: Final = Metric("goodput.first_bps", "bit/s")
GOODPUT_LAST: Final = Metric("goodput.last_bps", "bit/s")
# The t statistic of the least-squares slope of the loaded round trips and of the 0.1 s
# goodput over the measured window (a rise is judged only where it is significant).
RTT_TREND: Final = Metric("rtt.loaded_trend_t", "t")
GOODPUT_TREND: Final = Metric("goodput.trend_t", "t")
# An "auto" warm-up (tunnelbench.traffic.warmup): how long it took, and whether the path
# settled (1) or its bound ended it (0).
WARMUP_S: Final = Metric("warmup.s", "s")
WARMUP_STEADY: Final = Metric("warmup.steady", "1 settled, 0 bound reached")
# The measured window's own verdict (tunnelbench.analysis.steadiness.window_rising): 1
# nothing rose across it, 0 something did (a queue still filling, the RTT or goodput).
WINDOW_STEADY: Final = Metric("window.steady", "1 steady, 0 rising")

#: The parts of a core's time the sampler records (each in % of that core); steal is
#: time the hypervisor gave to another guest while this core had work.
CPU_PARTS: Final = ("user", "system", "softirq", "irq", "idle", "steal")
_CPU = re.compile(r"cpu(\d+)\.([a-z_]+)")
PROCESS_PREFIX: Final = "proc."  # proc.<label>: % of one core


def cpu(core: int, part: str) -> str:
    """``cpu<N>.<part>``: % of core N spent in ``part`` over the measured window."""
    return f"cpu{core}.{part}"


def parse_cpu(name: str) -> tuple[int, str] | None:
    """(core, part) of a per-core metric's name; None for any other name."""
    match = _CPU.fullmatch(name)
    return (int(match[1]), match[2]) if match else None


def cores(names: Iterable[str]) -> list[int]:
    """The cores that per-core metrics name, in order."""
    return sorted({found[0] for name in names if (found := parse_cpu(name)) is not None})


def budget(role: str, field: str) -> str:
    """``budget.<role>.<field>``: the role's CPU budget cgroup over the traffic
    (tunnelbench.probes.budget): ``throttled_pct`` of its periods, ``throttled_s``."""
    return f"budget.{role}.{field}"


def scheduling(name: str) -> str:
    """``sched.<name>``: the lab's threads' migrations or context switches over the
    measured window (tunnelbench.probes.scheduling)."""
    return f"sched.{name}"


def process(label: str) -> str:
    """``proc.<label>``: a process's CPU in % of one core (``wireguard-go@client``)."""
    return PROCESS_PREFIX + label


def process_label(name: str) -> str | None:
    """The label of a process metric's name; None for any other name."""
    return name.removeprefix(PROCESS_PREFIX) if name.startswith(PROCESS_PREFIX) else None


def qdisc(role: str, link: str, field: str) -> str:
    """``qdisc.<role>.<link>.<field>``: a queue discipline's counter over the window."""
    return f"qdisc.{role}.{link}.{field}"


def link(role: str, link_name: str, field: str) -> str:
    """``link.<role>.<link>.<field>``: a lab link's counter over the window (e.g.
    ``tx_dropped``)."""
    return f"link.{role}.{link_name}.{field}"


#: A black-box router's figures read over SNMP (tunnelbench.remote.snmp): every core's
#: busy share together and softirq's over the window, the seconds the agent's CPU
#: counters covered (they refresh on its own clock), the measured window's seconds; the
#: agent's refresh intervals as measured (interfaces, CPU), how long after the traffic
#: the refresh the closing counts came from was seen, and how many refreshes the agent
#: discarded (:mod:`tunnelbench.remote.snmp_watch`).
SNMP_CPU_BUSY: Final = "cpu_busy_pct"
SNMP_CPU_SOFTIRQ: Final = "cpu_softirq_pct"
SNMP_CPU_COVERED: Final = "cpu_covered_s"
SNMP_WINDOW: Final = "window_s"
SNMP_IF_REFRESH: Final = "if_refresh_s"
SNMP_CPU_REFRESH: Final = "cpu_refresh_s"
SNMP_CLOSE_DELAY: Final = "close_delay_s"
SNMP_DISCARDED: Final = "discarded_refreshes"


def remote(role: str, field: str) -> str:
    """``remote.<role>.<field>``: a real host's probe figure (``sampler_cpu_pct``, the
    sampler's cost; ``samples``; ``busiest_core_pct``)."""
    return f"remote.{role}.{field}"


def thermal_max(role: str, zone: str) -> str:
    """``thermal.<role>.<zone>.max_c``: a host's hottest reading of a zone (°C)."""
    return f"thermal.{role}.{zone}.max_c"


def tcp(role: str, field: str, *, window: bool = False) -> str:
    """``tcp.<role>.<field>``: a role's TCP counter over the trial; ``window``: over the
    measured window (``tcp.window.<role>.<field>``, :mod:`tunnelbench.probes.tcp`)."""
    return f"tcp.window.{role}.{field}" if window else f"tcp.{role}.{field}"


def snmp(role: str, field: str) -> str:
    """``snmp.<role>.<field>``: a figure of a router read over SNMP (``SNMP_*``)."""
    return f"snmp.{role}.{field}"


def tunnel_device(role: str, field: str) -> str:
    """``tunnel.<role>.<field>``: the tunnel device's counter over the window."""
    return f"tunnel.{role}.{field}"


def parse_device(name: str, family: str) -> tuple[str, str] | None:
    """(``<role>.<link>``, field) of a ``qdisc.`` or ``link.`` metric (``family``); None
    for any other name. For ``tunnel``, (role, field) of a tunnel device's counter."""
    head, dot, field = name.rpartition(".")
    if not dot or not head.startswith(family + "."):
        return None
    return head.removeprefix(family + "."), field


def device_names(
    names: Iterable[str], family: str, field: str, *, link: str | None = None
) -> list[str]:
    """The names among ``names`` of the ``family`` (``qdisc``, ``link``, ``tunnel``)
    counters of ``field`` (of ``link`` alone when given; any role), in order."""
    found = []
    for name in names:
        device = parse_device(name, family)
        if device is None or device[1] != field:
            continue
        if link is None or device[0].partition(".")[2] == link:
            found.append(name)
    return sorted(found)
