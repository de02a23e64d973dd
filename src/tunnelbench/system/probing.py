"""Probes of what this machine can do, found by trying it, one capability at a time.

Kernels differ (this VM lacks kernel WireGuard and fq_codel; users' kernels have them),
so tunnelbench asks the kernel instead of guessing. Each kernel probe is one command run
in an anonymous network namespace (``unshare --net``) that disappears with the command:
nothing is named, nothing needs cleaning up and the host's own namespace is untouched.
Without root an unprivileged user namespace is tried; when that is impossible too the
capability is "not probed" with the reason, and :mod:`tunnelbench.bench.skips` never skips a
configuration on that basis (the run then meets the real error). Results are cached per
process. Which links and programs there are to probe is the registries' knowledge:
:mod:`tunnelbench.bench.capabilities` asks each kind and generator and calls these.
"""

import functools
import os
import platform
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.model import cpulist
from tunnelbench.system import programs, versions
from tunnelbench.system.command import run

#: What dpkg-query reads: a package's version is asked again once it changed.
DPKG_STATUS = "/var/lib/dpkg/status"
PROBE_DEVICE = "tbprobe0"
#: Benchmarking addresses (RFC 2544) a link probe may name; the probe namespace has no
#: routes, nothing is sent.
PROBE_LOCAL, PROBE_REMOTE = "198.18.0.1", "198.18.0.2"
_LOCAL, _REMOTE = PROBE_LOCAL, PROBE_REMOTE
QDISC_ARGS = {
    "pfifo": ["limit", "100"],
    "bfifo": ["limit", "100000"],
    "pfifo_fast": [],
    "fq_codel": [],
    "cake": [],
    "fq": [],
    "tbf": ["rate", "1mbit", "burst", "10kb", "limit", "10kb"],
    "htb": ["default", "1"],
    "netem": ["delay", "1ms"],
    "ingress": [],
}
ESP_ARGS = {
    "rfc4106(gcm(aes))": ["aead", "rfc4106(gcm(aes))", "0x" + "11" * 20, "128"],
    "rfc7539esp(chacha20,poly1305)": [
        "aead", "rfc7539esp(chacha20,poly1305)", "0x" + "11" * 36, "128",
    ],
    "cbc(aes)+hmac(sha256)": [
        "enc", "cbc(aes)", "0x" + "11" * 16, "auth-trunc", "hmac(sha256)", "0x" + "11" * 32, "128",
    ],
}  # fmt: skip
#: The generic netlink family of the ovpn-dco kernel module that OpenVPN 2.6 drives (its
#: ``dco_available()`` asks for exactly this; Linux 6.16's in-tree ``ovpn`` is 2.7's).
OPENVPN_DCO_FAMILY = "ovpn-dco-v2"


@dataclass(frozen=True)
class Check:
    """One finding: ``ok`` None means it could not be probed, and ``detail`` says why;
    otherwise ``detail`` holds the kernel's refusal, a version or a path."""

    ok: bool | None
    detail: str = ""

    @property
    def status(self) -> str:
        return "not probed" if self.ok is None else "yes" if self.ok else "no"


@dataclass(frozen=True)
class Program(Check):
    path: str | None = None
    version: str = ""  # the first line the program prints about its version
    #: A project-built tool's pinned version, as its install script recorded it beside it
    #: (``<path>.version``): wireguard-go prints its last release tag, not the commit.
    pinned: str = ""


@dataclass(frozen=True)
class CgroupCpu(Check):
    version: int | None = None  # 1 or 2
    path: str | None = None  # the mount point of the hierarchy holding the cpu controller


@dataclass(frozen=True)
class Congestion(Check):
    available: tuple[str, ...] = ()  # loaded: tcp_available_congestion_control
    loadable: tuple[str, ...] = ()  # modules the kernel would load when asked
    default: str | None = None


@dataclass(frozen=True)
class Capabilities:
    kernel: str
    euid: int
    netns: Check  # detail: how probes get a namespace, or why they cannot
    links: Mapping[str, Check]
    qdiscs: Mapping[str, Check]
    esp: Mapping[str, Check]
    congestion: Congestion
    cgroup: CgroupCpu
    programs: Mapping[str, Program] = field(default_factory=dict)
    cpus: tuple[int, ...] = ()  # online CPU numbers
    openvpn_dco: Check = Check(None, "not probed")  # detail: the module's version, or why not
    pppoe: Check = Check(None, "not probed")  # a PPPoE session's kernel parts
    packages: Mapping[str, str | None] = field(default_factory=dict)  # Debian: version

    @property
    def root(self) -> bool:
        return self.euid == 0


# --- probe commands (pure) ---


def link_probe_argv(kind: str, args: tuple[str, ...] = ()) -> list[str]:
    """The command creating a ``kind`` link with what that kind needs (``args``, so that
    a refusal is the kernel's, not ip's): success is the signal."""
    if kind == "tun":
        return ["ip", "tuntap", "add", "dev", PROBE_DEVICE, "mode", "tun"]
    return ["ip", "link", "add", PROBE_DEVICE, "type", kind, *args]


def qdisc_probe_argv(kind: str) -> list[str]:
    """A valid minimal ``tc qdisc add`` of ``kind`` on the probe namespace's loopback."""
    if kind in ("ingress", "clsact"):
        return ["tc", "qdisc", "add", "dev", "lo", kind]
    return ["tc", "qdisc", "add", "dev", "lo", "root", kind, *QDISC_ARGS.get(kind, [])]


def esp_probe_argv(algorithm: str) -> list[str]:
    """An ESP security association using ``algorithm`` (a key of the ESP table)."""
    return [
        "ip", "xfrm", "state", "add", "src", _LOCAL, "dst", _REMOTE, "proto", "esp",
        "spi", "0x100", "mode", "tunnel", *ESP_ARGS[algorithm],
    ]  # fmt: skip


def openvpn_dco_argv() -> list[str]:
    """Asks the kernel for ovpn-dco's generic netlink family (asking loads the module
    when it is installed): success means OpenVPN 2.6 can offload its data channel."""
    return ["genl", "ctrl", "get", "name", OPENVPN_DCO_FAMILY]


def dco_refusal(detail: str) -> str:
    """Why a kernel has no DCO, from ``genl``'s refusal to name the family."""
    return (
        f"no {OPENVPN_DCO_FAMILY} netlink family in this kernel: the ovpn-dco module "
        f"(openvpn-dco-dkms) is not available ({detail})"
    )


def refusal(stderr: str) -> str:
    """The reason a failed ip/tc/unshare command gives: the kernel's last "Error:" line,
    else the first line (a usage message, or unshare's own)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    if errors:
        return errors[-1].removeprefix("Error:").strip().rstrip(".")
    return lines[0] if lines else "refused"  # a usage error, or a tool's own message


# --- parsing (pure) ---


def version_line(stdout: str, stderr: str) -> str:
    """The first line a program prints for ``--version``; iperf2 prints it on stderr
    (and exits 1), so both streams count."""
    lines = [line.strip() for line in (stdout + "\n" + stderr).splitlines() if line.strip()]
    return lines[0] if lines else "unknown version"


def iperf2_version(text: str) -> str | None:
    match = re.search(r"iperf version (\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def cpu_list(text: str) -> tuple[int, ...]:
    """CPU numbers from the kernel's list format, e.g. ``0-1,4``."""
    return cpulist.parse(text.strip()) if text.strip() else ()


def mask_cpus(mask: str) -> set[int]:
    """CPU numbers named by a hexadecimal mask (``0x`` prefix and commas allowed)."""
    value = int(mask.strip().lower().removeprefix("0x").replace(",", ""), 16)
    return {bit for bit in range(value.bit_length()) if value >> bit & 1}


def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def cgroup_cpu(mountinfo: str, read: Callable[[str], str | None]) -> CgroupCpu:
    """Where CPU bandwidth control lives, from ``/proc/self/mountinfo``.

    cgroup v2 when the unified hierarchy's root delegates ``cpu`` to its children
    (``cgroup.subtree_control``; lab/cgroup.py enables no controller itself); else a v1
    hierarchy mounted with ``cpu`` whose ``cpu.cfs_quota_us`` exists (quotas need CFS
    bandwidth control). ``read`` returns a file's text or None.
    """
    mounts = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if sep and len(left.split()) > 4 and len(right.split()) > 2:
            fstype, _, superoptions = right.split()[:3]
            mounts.append((fstype, _unescape(left.split()[4]), superoptions.split(",")))
    seen: list[str] = []
    for fstype, point, _ in mounts:
        if fstype == "cgroup2":
            if "cpu" in (read(f"{point}/cgroup.subtree_control") or "").split():
                return CgroupCpu(True, f"cgroup v2 at {point}", version=2, path=point)
            controllers = (read(f"{point}/cgroup.controllers") or "").split()
            seen.append(
                f"cgroup v2 at {point} does not delegate cpu"
                if "cpu" in controllers
                else f"cgroup v2 at {point} has {' '.join(controllers) or 'no controllers'}"
            )
    for fstype, point, options in mounts:
        if fstype == "cgroup" and "cpu" in options:
            if read(f"{point}/cpu.cfs_quota_us") is not None:
                return CgroupCpu(True, f"cgroup v1 at {point}", version=1, path=point)
            seen.append(f"cgroup v1 cpu at {point} has no cpu.cfs_quota_us")
    return CgroupCpu(False, "; ".join(seen or ["no cgroup hierarchy is mounted"]))


# --- probes (touch the system) ---


def read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


@functools.cache
def namespace() -> tuple[tuple[str, ...] | None, str]:
    """The prefix running one command in a fresh anonymous network namespace and how it
    gets one; with no prefix, why none can be created."""
    unshare = programs.find("unshare")
    if unshare is None:
        return None, "unshare (util-linux) is not installed"
    user = (unshare, "--user", "--map-root-user", "--net", "--")
    attempts: list[tuple[str, tuple[str, ...]]] = [("in an unprivileged user namespace", user)]
    if os.geteuid() == 0:
        attempts.insert(0, ("as root", (unshare, "--net", "--")))
    reason = ""
    for how, prefix in attempts:
        done = run([*prefix, "true"], check=False)
        if done.returncode == 0:
            return prefix, how
        reason = refusal(done.stderr)
    return None, f"cannot create a network namespace: {reason}"


def attempt(argv: list[str]) -> Check:
    prefix, how = namespace()
    if prefix is None:
        return Check(None, how)
    if programs.find(argv[0]) is None:
        return Check(None, f"{argv[0]} is not installed")
    try:
        done = run([*prefix, *argv], check=False)
    except LabError as exc:
        # It did not finish (a module loading under emulation on a busy host took over
        # 30 s): unknown, not refused; set-up then meets the real answer.
        return Check(None, f"not probed: {exc}")
    if done.returncode == 0:
        return Check(True)
    reason = refusal(done.stderr)
    # A permission refusal (e.g. /dev/net/tun is root-only) says nothing about the kernel.
    denied = any(text in reason for text in ("Permission denied", "Operation not permitted"))
    return Check(None, f"not permitted: {reason}") if denied else Check(False, reason)


@functools.cache
def link(kind: str, args: tuple[str, ...] = ()) -> Check:
    return attempt(link_probe_argv(kind, args))


def kernel_link_type(kind: str, args: tuple[str, ...] = ()) -> str | None:
    """None when the kernel can create a ``kind`` link; else the kernel's refusal.

    A link that could not be probed also gives None, so set-up meets the real error
    instead of acting on a guess.
    """
    found = link(kind, args)
    return found.detail if found.ok is False else None


@functools.cache
def esp(algorithm: str) -> Check:
    """Whether the kernel can make an ESP security association with ``algorithm`` (a key
    of the ESP table, e.g. ``rfc4106(gcm(aes))``)."""
    return attempt(esp_probe_argv(algorithm))


AF_PPPOX, PX_PROTO_OE = 24, 0  # linux/if_pppox.h


@functools.cache
def pppoe() -> Check:
    """Whether the kernel carries PPPoE sessions: a PPPoX socket of the PPPoE protocol
    (making one loads the pppoe module where it is a module) and ``/dev/ppp``
    (ppp_generic's device, which pppd opens)."""
    try:
        socket.socket(AF_PPPOX, socket.SOCK_STREAM, PX_PROTO_OE).close()
    except OSError as exc:
        return Check(False, f"no PPPoE in this kernel (a PPPoE socket: {exc.strerror})")
    if not Path("/dev/ppp").exists():
        return Check(False, "no /dev/ppp: the ppp_generic module is not loaded")
    return Check(True, "PPPoE sockets and /dev/ppp")


@functools.cache
def openvpn_dco() -> Check:
    """Whether OpenVPN's data channel offload (the ovpn-dco-v2 kernel module) is usable;
    detail: the module's version, or why not."""
    found = attempt(openvpn_dco_argv())
    if found.ok is False:
        return Check(False, dco_refusal(found.detail))
    if found.ok:
        version = (read("/sys/module/ovpn_dco_v2/version") or "").strip()
        return Check(True, f"ovpn-dco {version}" if version else "ovpn-dco")
    return found


@functools.cache
def program(name: str) -> Program:
    path = programs.find(name)
    if path is None:
        return Program(False, f"{name} is not installed")
    done = versions.ask([path, "--version"], check=False)
    version = version_line(done.stdout, done.stderr)
    pinned = (read(f"{path}.version") or "").strip() if name in programs.PROJECT_BUILT else ""
    return Program(True, f"{version} ({path})", path=path, version=version, pinned=pinned)


@functools.cache
def debian_package(name: str) -> str | None:
    """The installed version of a Debian package; None when it is not installed (or this
    is not a Debian system)."""
    if programs.find("dpkg-query") is None:
        return None
    done = versions.ask(
        ["dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", name],
        file=DPKG_STATUS,
        check=False,
    )
    status, _, version = done.stdout.strip().partition(" ")
    return version if done.returncode == 0 and status == "installed" and version else None


def congestion() -> Congestion:
    base = Path("/proc/sys/net/ipv4")
    text = read(str(base / "tcp_available_congestion_control"))
    if text is None:
        return Congestion(None, "cannot read tcp_available_congestion_control")
    available = tuple(text.split())
    deps = read(f"/lib/modules/{platform.release()}/modules.dep") or ""
    modules = sorted(set(re.findall(r"/tcp_(\w+)\.ko", deps)) - set(available))
    default = (read(str(base / "tcp_congestion_control")) or "").strip() or None
    detail = " ".join(available) + (f"; loadable: {' '.join(modules)}" if modules else "")
    return Congestion(True, detail, available, tuple(modules), default)


def cpus() -> tuple[int, ...]:
    online = read("/sys/devices/system/cpu/online")
    return cpu_list(online) if online else tuple(range(os.cpu_count() or 1))


@functools.cache
def cgroup() -> CgroupCpu:
    """Where this machine's CPU bandwidth control lives (see :func:`cgroup_cpu`)."""
    return cgroup_cpu(read("/proc/self/mountinfo") or "", read)
