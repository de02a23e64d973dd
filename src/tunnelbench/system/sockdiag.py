"""The TCP sockets of one network namespace and their state, asked of the kernel over
``NETLINK_SOCK_DIAG`` (``inet_diag``), as ``ss -ti`` asks: no process, and no walk of
``/proc/net/tcp``, whose read took 5 ms of CPU time here (it visits every bucket of the
host's connection table, for each of ``tcp`` and ``tcp6``) where this dump takes a
fraction of one.

The socket is opened by a thread in the namespace (:func:`open_here`) and stays bound to
it, so every later dump is one request and its answer, from any thread; so does the
namespace's ``/proc/net/netstat`` opened beside it (a file of ``/proc/PID/net`` stays
bound to the namespace it was opened in), read again from its start each time.
"""

import os
import socket
import struct
from dataclasses import dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2  # the attribute holding struct tcp_info
TCP_ESTABLISHED = 1  # include/net/tcp_states.h

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
#: inet_diag_req_v2: family, protocol, extensions, pad, states, then inet_diag_sockid
#: (ports, addresses, interface and cookie: 48 bytes, zero to ask for every socket).
_REQUEST = struct.Struct("=BBBBI48x")
#: inet_diag_msg: family, state, timer, retransmits, inet_diag_sockid (its ports in
#: network order, then addresses, interface and cookie), then expires, rqueue, wqueue,
#: uid, inode.
_MESSAGE = struct.Struct("=BBBB2H44xIIIII")
_ATTR = struct.Struct("=HH")  # rtattr: length, type
#: Where struct tcp_info (include/uapi/linux/tcp.h) holds ``tcpi_snd_cwnd``.
SND_CWND_OFFSET = 80


@dataclass(frozen=True)
class TcpSocket:
    """One established TCP socket: its ports, its congestion window (segments) and its
    write queue (bytes written and not yet acknowledged: in flight plus not yet sent, as
    ``/proc/net/tcp`` prints ``tx_queue``)."""

    local_port: int
    remote_port: int
    cwnd: int
    write_queue: int


def _align(n: int) -> int:
    return (n + 3) & ~3


def _cwnd(attributes: bytes) -> int | None:
    at = 0
    while at + _ATTR.size <= len(attributes):
        length, kind = _ATTR.unpack_from(attributes, at)
        if length < _ATTR.size:
            break
        if kind == INET_DIAG_INFO and length - _ATTR.size >= SND_CWND_OFFSET + 4:
            (found,) = struct.unpack_from("=I", attributes, at + _ATTR.size + SND_CWND_OFFSET)
            return int(found)
        at += _align(length)
    return None


def parse(data: bytes) -> tuple[list[TcpSocket], bool]:
    """The sockets of one ``recv`` of a dump's answer, and whether the dump is done; an
    :class:`OSError` for the kernel's error or a socket without its ``tcp_info``."""
    found: list[TcpSocket] = []
    at = 0
    while at + _HEADER.size <= len(data):
        length, kind, _, _, _ = _HEADER.unpack_from(data, at)
        if length < _HEADER.size:
            raise OSError(f"sock_diag: a message of {length} bytes")
        payload = data[at + _HEADER.size : at + length]
        at += _align(length)
        if kind == NLMSG_DONE:
            return found, True
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", payload)
            if code:
                raise OSError(-code, f"sock_diag: {os.strerror(-code)}")
            continue
        if kind != SOCK_DIAG_BY_FAMILY:
            continue
        fields = _MESSAGE.unpack_from(payload)
        cwnd = _cwnd(payload[_MESSAGE.size :])
        if cwnd is None:
            raise OSError("sock_diag: a TCP socket came without its tcp_info")
        local, remote = socket.ntohs(fields[4]), socket.ntohs(fields[5])
        found.append(TcpSocket(local, remote, cwnd, write_queue=fields[8]))
    return found, False


class TcpSockets:
    """A ``NETLINK_SOCK_DIAG`` socket and the ``/proc/net/netstat`` of one network
    namespace (:func:`open_here`)."""

    def __init__(self, sock: socket.socket, netstat: int) -> None:
        self.sock = sock
        self.netstat_fd = netstat
        self._sequence = 0

    def netstat(self) -> str:
        """The namespace's ``/proc/net/netstat`` now."""
        chunks, offset = [], 0
        while chunk := os.pread(self.netstat_fd, 1 << 16, offset):
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks).decode()

    def established(self) -> list[TcpSocket]:
        """Every established TCP socket of the namespace, IPv4 and IPv6."""
        found: list[TcpSocket] = []
        for family in (socket.AF_INET, socket.AF_INET6):
            self._sequence += 1
            request = _REQUEST.pack(
                family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0, 1 << TCP_ESTABLISHED
            )
            self.sock.send(
                _HEADER.pack(_HEADER.size + len(request), SOCK_DIAG_BY_FAMILY,
                             NLM_F_REQUEST | NLM_F_DUMP, self._sequence, 0) + request
            )  # fmt: skip
            done = False
            while not done:
                sockets, done = parse(self.sock.recv(1 << 16))
                found += sockets
        return found

    def close(self) -> None:
        self.sock.close()
        os.close(self.netstat_fd)


def open_here() -> TcpSockets:
    """A :class:`TcpSockets` of the calling thread's network namespace."""
    netstat = os.open("/proc/thread-self/net/netstat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                             NETLINK_SOCK_DIAG)  # fmt: skip
        sock.bind((0, 0))
    except OSError:
        os.close(netstat)
        raise
    return TcpSockets(sock, netstat)
