"""The facts about this machine that every run records alongside its results."""

import os
import platform
import sys
from pathlib import Path
from typing import Any

from tunnelbench import __version__
from tunnelbench.command import run


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


def collect(versions: dict[str, str]) -> dict[str, Any]:
    """Kernel, CPU and its flags, core count, frequency governor, versions of the tools."""
    ip_version = run(["ip", "-V"], check=False).stdout.strip()
    cpuinfo = _read("/proc/cpuinfo") or ""
    return {
        "kernel": platform.release(),
        "kernel_build": platform.version(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(cpuinfo),
        "cpu_flags": cpu_flags(cpuinfo),
        "cores": os.cpu_count(),
        "cpu_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "python": sys.version.split()[0],
        "tunnelbench": __version__,
        "iproute2": ip_version,
        "versions": versions,
    }
