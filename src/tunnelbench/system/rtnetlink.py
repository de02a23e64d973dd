"""The queue disciplines of this thread's network namespace and their statistics, asked of
the kernel over rtnetlink (``RTM_GETQDISC``), as ``tc -s -j qdisc show`` asks: no process.

An emulated guest takes 0.2-0.5 s to start each ``tc``, and a lab trial read them nine
times (the kept lab's drain check, the probe before and after the traffic). The answer
is given in the shape of tc's JSON (:func:`qdiscs`), so that one parser reads both:
``kind``, ``handle``, ``root`` or ``parent``, ``dev`` and the counters ``bytes``,
``packets``, ``drops``, ``overlimits``, ``requeues``, ``backlog`` and ``qlen``, from the
same attributes tc reads (``TCA_STATS2``'s basic and queue statistics, its 64-bit packet
count where the kernel gives one). tests/integration/test_netdev.py holds the two
readings of one lab against each other.
"""

import os
import socket
import struct
from typing import Any

NETLINK_ROUTE = 0
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCA_KIND, TCA_STATS2 = 1, 7
TCA_STATS_BASIC, TCA_STATS_QUEUE, TCA_STATS_PKT64 = 1, 3, 8
TC_H_ROOT, TC_H_UNSPEC = 0xFFFFFFFF, 0

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_TCMSG = struct.Struct("=BBHiIII")  # family, pads, ifindex, handle, parent, info
_ATTR = struct.Struct("=HH")  # rtattr: length, type


def _align(n: int) -> int:
    return (n + 3) & ~3


def _attributes(data: bytes) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    at = 0
    while at + _ATTR.size <= len(data):
        length, kind = _ATTR.unpack_from(data, at)
        if length < _ATTR.size:
            break
        found[kind & 0x3FFF] = data[at + _ATTR.size : at + length]  # without the nested flag
        at += _align(length)
    return found


def parent_text(handle: int) -> str:
    """A parent as tc prints it: ``1:1``, ``ffff:fff1``, ``1:``; ``none`` for none."""
    if handle == TC_H_UNSPEC:
        return "none"
    major, minor = handle >> 16, handle & 0xFFFF
    if major == 0:
        return f":{minor:x}"
    return f"{major:x}:" if minor == 0 else f"{major:x}:{minor:x}"


def qdisc(message: bytes, names: dict[int, str]) -> dict[str, Any]:
    """One ``RTM_NEWQDISC`` message's payload as tc's JSON has its entry."""
    _, _, _, ifindex, handle, parent, _ = _TCMSG.unpack_from(message)
    attrs = _attributes(message[_TCMSG.size :])
    entry: dict[str, Any] = {
        "kind": attrs.get(TCA_KIND, b"").split(b"\0", 1)[0].decode(),
        "handle": f"{handle >> 16:x}:",  # a qdisc's: its major number
    }
    if parent == TC_H_ROOT:
        entry["root"] = True
    else:
        entry["parent"] = parent_text(parent)
    if ifindex not in names:
        names[ifindex] = socket.if_indextoname(ifindex)
    entry["dev"] = names[ifindex]
    stats = _attributes(attrs.get(TCA_STATS2, b""))
    basic = stats.get(TCA_STATS_BASIC, b"")
    sent_bytes, packets = struct.unpack_from("=QI", basic.ljust(12, b"\0"))
    if TCA_STATS_PKT64 in stats:
        (packets,) = struct.unpack_from("=Q", stats[TCA_STATS_PKT64])
    queue = stats.get(TCA_STATS_QUEUE, b"").ljust(20, b"\0")
    qlen, backlog, drops, requeues, overlimits = struct.unpack_from("=5I", queue)
    entry |= {
        "bytes": sent_bytes, "packets": packets, "drops": drops, "overlimits": overlimits,
        "requeues": requeues, "backlog": backlog, "qlen": qlen,
    }  # fmt: skip
    return entry


def qdiscs() -> list[dict[str, Any]]:
    """Every qdisc of the calling thread's network namespace, with its statistics."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                       NETLINK_ROUTE) as sock:  # fmt: skip
        sock.bind((0, 0))
        request = _TCMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0, 0, 0)
        sock.send(
            _HEADER.pack(_HEADER.size + len(request), RTM_GETQDISC,
                         NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + request
        )  # fmt: skip
        found: list[dict[str, Any]] = []
        names: dict[int, str] = {}
        while True:
            data = sock.recv(1 << 16)
            at = 0
            while at + _HEADER.size <= len(data):
                length, kind, _, _, _ = _HEADER.unpack_from(data, at)
                payload = data[at + _HEADER.size : at + length]
                at += _align(length)
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", payload)
                    if code:
                        raise OSError(-code, f"RTM_GETQDISC: {os.strerror(-code)}")
                    continue
                if kind == RTM_NEWQDISC:
                    found.append(qdisc(payload, names))
