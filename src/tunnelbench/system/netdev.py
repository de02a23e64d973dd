"""A network device's offloads and state, and a namespace's ``net.*`` sysctls, set and
read through the kernel's own interfaces by the calling thread (in its network
namespace: see :func:`tunnelbench.system.netns_files.inside`), without a process.

Offloads are set as ``ethtool -K DEV tso off`` sets them: each name stands for the
kernel features its pattern matches (``tso`` is every ``tx-tcp*-segmentation``, which
on Linux 6.18 includes ``tx-tcp-accecn-segmentation``, a bit the old one-feature
request ``ETHTOOL_STSO`` leaves on), features the device cannot change are left out,
and what the device then has is read back: a change it did not take is reported, as
ethtool's "[requested on]" is.
"""

import array
import fcntl
import fnmatch
import socket
import struct
from collections.abc import Mapping
from pathlib import Path

SIOCGIFFLAGS = 0x8913  # linux/sockios.h
SIOCETHTOOL = 0x8946
IFF_RUNNING = 0x40  # linux/if.h: up, and its operational state up (carrier)
IFNAMSIZ = 16
IFREQ_SIZE = 40  # struct ifreq on 64-bit machines: the name and a 24-byte union
# linux/ethtool.h
ETHTOOL_GSTRINGS, ETHTOOL_GSSET_INFO = 0x1B, 0x37
ETHTOOL_GFEATURES, ETHTOOL_SFEATURES = 0x3A, 0x3B
ETH_SS_FEATURES = 4
ETH_GSTRING_LEN = 32
#: What each offload name of a plan stands for, as ethtool's own table has it.
PATTERNS = {"tso": "tx-tcp*-segmentation", "gso": "tx-generic-segmentation", "gro": "rx-gro"}


def set_offloads(device: str, features: Mapping[str, bool]) -> list[str]:
    """Set each of ``features`` (``tso``, ``gso``, ``gro``) on or off; the changes the
    device did not take, as ``tso: requested off, tx-tcp-segmentation is on``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        names = _feature_names(sock, device)
        blocks = (len(names) + 31) // 32
        available = [block[0] for block in _features(sock, device, blocks)]
        valid, requested = [0] * blocks, [0] * blocks
        wanted: dict[int, tuple[str, bool]] = {}
        refused = []
        for name, on in features.items():
            bits = [
                bit
                for bit, feature in enumerate(names)
                if fnmatch.fnmatchcase(feature, PATTERNS[name])
                and available[bit // 32] >> (bit % 32) & 1
            ]
            if not bits:
                refused.append(f"{name}: the device cannot change it")
            for bit in bits:
                valid[bit // 32] |= 1 << (bit % 32)
                requested[bit // 32] |= (1 << (bit % 32)) if on else 0
                wanted[bit] = (name, on)
        pairs = [value for pair in zip(valid, requested, strict=True) for value in pair]
        _ethtool(sock, device, struct.pack(f"II{2 * blocks}I", ETHTOOL_SFEATURES, blocks, *pairs))
        active = [block[2] for block in _features(sock, device, blocks)]
        for bit, (name, on) in sorted(wanted.items()):
            if bool(active[bit // 32] >> (bit % 32) & 1) != on:
                state = "off" if on else "on"
                refused.append(
                    f"{name}: requested {'on' if on else 'off'}, {names[bit]} is {state}"
                )
    return refused


def offloads(device: str) -> dict[str, bool]:
    """Whether each name of :data:`PATTERNS` is on: any feature it stands for active."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        names = _feature_names(sock, device)
        active = [block[2] for block in _features(sock, device, (len(names) + 31) // 32)]
    return {
        name: any(
            active[bit // 32] >> (bit % 32) & 1
            for bit, feature in enumerate(names)
            if fnmatch.fnmatchcase(feature, pattern)
        )
        for name, pattern in PATTERNS.items()
    }


def running(device: str) -> bool:
    """Whether ``device`` is up with its operational state up (a veth: its peer is up
    and the kernel has noted the carrier)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(f"{IFNAMSIZ}s", device.encode()).ljust(IFREQ_SIZE, b"\0")
        answer = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request)
    (flags,) = struct.unpack_from("H", answer, IFNAMSIZ)
    return bool(flags & IFF_RUNNING)


def write_sysctls(values: Mapping[str, str]) -> None:
    """Write ``net.*`` sysctls (``net.ipv4.ip_forward`` -> ``1``) under ``/proc/sys``. Only
    ``net.*``: those are the calling thread's namespace's; any other key would change the
    whole machine, and is refused."""
    for key, value in values.items():
        if not key.startswith("net.") or "/" in key or ".." in key:
            raise ValueError(f"{key!r} is not a network namespace's sysctl")
        Path("/proc/sys", *key.split(".")).write_text(f"{value}\n")


def _ethtool(sock: socket.socket, device: str, request: bytes) -> bytes:
    """One ethtool request (its struct, command first); the struct as the kernel left it."""
    buffer = array.array("B", request)
    address, _ = buffer.buffer_info()
    ifreq = struct.pack(f"{IFNAMSIZ}sP", device.encode(), address).ljust(IFREQ_SIZE, b"\0")
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
    return buffer.tobytes()


def _feature_names(sock: socket.socket, device: str) -> list[str]:
    """The kernel's feature names, in bit order."""
    info = _ethtool(
        sock, device, struct.pack("IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_FEATURES, 0)
    )
    (count,) = struct.unpack_from("I", info, 16)
    strings = _ethtool(
        sock,
        device,
        struct.pack("III", ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count)
        + bytes(count * ETH_GSTRING_LEN),
    )
    return [
        strings[12 + k * ETH_GSTRING_LEN : 12 + (k + 1) * ETH_GSTRING_LEN].split(b"\0")[0].decode()
        for k in range(count)
    ]


def _features(sock: socket.socket, device: str, blocks: int) -> list[tuple[int, int, int, int]]:
    """Per 32 features: (available, requested, active, never changed) bit masks."""
    answer = _ethtool(
        sock, device, struct.pack("II", ETHTOOL_GFEATURES, blocks) + bytes(16 * blocks)
    )
    values = struct.unpack_from(f"{4 * blocks}I", answer, 8)
    return [tuple(values[4 * k : 4 * k + 4]) for k in range(blocks)]
