"""The facts about this machine that every run records alongside its results.

Besides the kernel, CPU and tool versions, a run records what this kernel can do (the
capability probes of :mod:`tunnelbench.bench.capabilities`, run once per process and already
run by the runner's check): the advice reads them, so it never recommends what this
machine cannot do, and a report written later on another machine still knows.
"""

import os
import platform
import sys
from pathlib import Path

from tunnelbench import __version__
from tunnelbench.bench import capabilities
from tunnelbench.model.capability_record import CongestionFound, Found, KernelCapabilities
from tunnelbench.model.environment import Environment
from tunnelbench.system import programs
from tunnelbench.system.probing import Capabilities, Check
from tunnelbench.system.versions import ask


def cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def cpu_flags(cpuinfo: str) -> list[str]:
    """The first CPU's feature flags (x86 ``flags``, Arm ``Features``)."""
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            return sorted(line.split(":", 1)[1].split())
    return []


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _check(found: Check) -> Found:
    return Found(found.ok, found.detail)


def capability_record(caps: Capabilities) -> KernelCapabilities:
    """What the kernel can do that advice depends on: per link kind, queue discipline
    and ESP algorithm whether it is there (None: could not be probed, and the detail
    says why; False: the detail is the kernel's refusal), OpenVPN's data channel offload
    likewise, and the congestion controls."""
    congestion = caps.congestion
    return KernelCapabilities(
        links={kind: _check(found) for kind, found in caps.links.items()},
        qdiscs={kind: _check(found) for kind, found in caps.qdiscs.items()},
        esp={name: _check(found) for name, found in caps.esp.items()},
        openvpn_dco=_check(caps.openvpn_dco),
        congestion=CongestionFound(
            congestion.ok,
            congestion.detail,
            tuple(congestion.available),
            tuple(congestion.loadable),
            congestion.default,
        ),
    )


def machine(cpuinfo: str | None = None) -> Environment:
    """What :func:`describe` records of the machine itself: its kernel, CPU and cores
    (``cpuinfo``: ``/proc/cpuinfo``'s text, read here if not given)."""
    return Environment().with_keys(
        kernel=platform.release(),
        cpu_model=cpu_model(_read("/proc/cpuinfo") or "" if cpuinfo is None else cpuinfo),
        cores=os.cpu_count(),
    )


def describe(versions: dict[str, str], caps: Capabilities | None = None) -> Environment:
    """Kernel, CPU and its flags, core count, frequency governor, versions of the tools,
    and what the kernel can do (``caps``, else probed: once per process)."""
    ip = programs.find("ip") or "ip"
    ip_version = ask([ip, "-V"], check=False).stdout.strip()
    cpuinfo = _read("/proc/cpuinfo") or ""
    return machine(cpuinfo).with_keys(
        kernel_build=platform.version(),
        machine=platform.machine(),
        cpu_flags=tuple(cpu_flags(cpuinfo)),
        cpu_governor=_read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        python=sys.version.split()[0],
        tunnelbench=__version__,
        iproute2=ip_version,
        versions=versions,
        capabilities=capability_record(caps or capabilities.probe()),
    )
