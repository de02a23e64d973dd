"""The hosts of a hosts file as a tunnel's site (:mod:`tunnelbench.tunnels.site`): the
tunnel kinds that build through a site (WireGuard, VXLAN, GRE, gretap, IPIP, GENEVE) run
on real hosts with the very code that runs them in the lab.

What is the lab's own there is the hosts file's here:

- the ends are ``tunnel.ends``; the underlay is what each end's routing says of the other
  end's address (``ip route get``: the device and the source address), so a tunnel binds
  where the host's traffic to its peer already goes;
- the inner addresses are ``tunnel.inner``, in the smallest prefix that holds both (an
  L2 tunnel's ends must share a subnet);
- the routes into the tunnel are one host route each: the near end sends the server's
  address, and between two routers the far end sends the client's back; a WireGuard
  peer's allowed IPs are the same (with the other end's inner address);
- every change is recorded on its host before it is made (:meth:`SshHost.undo`), so a
  run that dies leaves its hosts cleanable by ``lab clean --hosts``.
"""

import ipaddress
import random
import shlex
import subprocess
import time
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.lab.state import ProcessRecord
from tunnelbench.lab.topology import Underlay
from tunnelbench.remote.session import Session, SessionRoles
from tunnelbench.remote.software import BUILT_KINDS

#: How often a daemon's readiness is asked for over SSH, and for how long.
POLL_S = 0.2
READY_S = 10.0

#: Devices a site names: ``tb<tag>-<suffix>``, within the kernel's 15 characters.
TAG_CHARS = 4


class HostsSite(SessionRoles):
    def __init__(self, session: Session) -> None:
        self.session = session
        plan = session.file.tunnel
        self.near, self.far = plan.ends
        self.inner = dict(zip(plan.ends, plan.inner, strict=True))
        self.inner6 = dict(zip(plan.ends, plan.inner6, strict=True))
        self.prefix = shared_prefix(*plan.inner)
        self.prefix6 = shared_prefix(*plan.inner6)
        #: role -> the commands that remove what was made there, in the order made.
        self.undo: dict[str, list[list[str]]] = {}
        self._underlays: dict[str, Underlay] = {}

    @property
    def tunnel_ends(self) -> tuple[str, str]:
        return self.near, self.far

    @property
    def families(self) -> tuple[int, ...]:
        return self.session.file.families

    def ifname(self, suffix: str) -> str:
        name = f"tb{self.session.tag[:TAG_CHARS]}-{suffix}"
        if len(name) > 15:
            raise ValueError(f"interface name {name!r} is longer than 15 characters")
        return name

    def wan_underlay(self, role: str) -> Underlay:
        if role not in self._underlays:
            self._underlays |= self._find_underlays()
        return self._underlays[role]

    def _find_underlays(self) -> dict[str, Underlay]:
        """The near end's route to the far end's address gives its device and source
        address; the far end's route back to that source gives its own."""
        far_address = self.session.file.hosts[self.far].address
        assert far_address is not None  # required by the hosts file for a built tunnel
        near_dev, near_src = route_to(self.session, self.near, far_address)
        far_dev, far_src = route_to(self.session, self.far, near_src)
        return {
            self.near: Underlay(near_src, far_address, near_dev),
            self.far: Underlay(far_src, near_src, far_dev),
        }

    def underlay_mtu(self) -> int:
        """The smaller of the two ends' underlay devices' MTUs."""
        found = []
        for role in self.tunnel_ends:
            device = self.wan_underlay(role).device
            text = self.session.hosts[role].run(["cat", f"/sys/class/net/{device}/mtu"]).stdout
            found.append(int(text.strip()))
        return min(found)

    def ip_batch(self, role: str, commands: list[list[str]]) -> None:
        """Each command on its own (busybox's ``ip`` has no ``-batch``), its reversal
        recorded on the host before it runs."""
        host = self.session.hosts[role]
        for command in commands:
            if (reverse := undo_of(command)) is not None:
                host.undo(reverse)
                self.undo.setdefault(role, []).append(reverse)
            host.run(["ip", *command])

    def inner_address(self, role: str, family: int) -> str:
        if family == 6:
            return f"{self.inner6[role]}/{self.prefix6}"
        return f"{self.inner[role]}/{self.prefix}"

    def inner_peer(self, role: str, family: int) -> str:
        peer = self.far if role == self.near else self.near
        return (self.inner6 if family == 6 else self.inner)[peer]

    def inner_routes(self, role: str, family: int) -> list[str]:
        """The near end sends the server's address into the tunnel; the far end reaches
        the client's inner address on the tunnel's subnet, and between two routers
        sends the client's own address back."""
        hosts = self.session.file
        host = 32 if family == 4 else 128
        if role == self.near:
            return [f"{hosts.target(False, family)}/{host}"]
        if self.near == "client":
            return []
        return [f"{hosts.client.reached(family)}/{host}"]

    def selected(self, role: str, family: int) -> list[str]:
        """Each host route the peer sends into the tunnel, widened to the smallest prefix
        that also holds ``role``'s own source address towards it."""
        peer = self.far if role == self.near else self.near
        found = []
        for prefix in self.inner_routes(peer, family):
            address = prefix.partition("/")[0]
            _, source = route_to(self.session, role, address)
            length = shared_prefix(address, source)
            found.append(str(ipaddress.ip_network(f"{address}/{length}", strict=False)))
        return found

    def record_removal(self, role: str, command: list[str]) -> None:
        self.session.hosts[role].undo(command)
        self.undo.setdefault(role, []).append(command)

    # -- what a kind with a daemon needs (WireGuard's userspace implementations) --------
    # (host, files and program: SessionRoles's)

    def can_create(self, role: str, link_type: str) -> bool:
        """From the host's facts: its WireGuard module, or a kind's module and ``ip``."""
        found = self.session.facts[role].software
        kinds = [k for k, (_, t) in BUILT_KINDS.items() if t == link_type]
        if not kinds:  # a link no kind's ``ip`` makes (WireGuard's): its module says
            return found.has_module(link_type)
        return found.can_build(kinds[0])[0] is not False

    def free_udp_port(self, role: str, ports: range) -> int:
        """A port of ``ports`` no socket of the host is bound to (/proc/net/udp{,6})."""
        text = (
            self.session.hosts[role]
            .run(["cat", "/proc/net/udp", "/proc/net/udp6"], check=False)
            .stdout
        )
        used = set()
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) > 1 and ":" in parts[1]:
                used.add(int(parts[1].rsplit(":", 1)[1], 16))
        free = [p for p in ports if p not in used]
        if not free:
            raise LabError(f"{role}: no free UDP port in {ports.start}-{ports.stop - 1}")
        return random.choice(free)

    def await_daemon(
        self,
        role: str,
        proc: "subprocess.Popen[bytes]",
        name: str,
        log: Path,
        device: str | None,
        socket: Path | None = None,
    ) -> ProcessRecord | None:
        """Asked over SSH every :data:`POLL_S`: the device listed, the socket there. The
        local ``ssh`` process stands for the daemon: it ends when the daemon does. The
        device's removal is recorded first. The host's process sampler, not this
        machine's, sees the daemon's CPU: no record."""
        host = self.session.hosts[role]
        # The daemon and its device go with the site, between trials without the tunnel
        # too: undone newest first, the device is deleted (a TUN daemon such as
        # wireguard-go exits with it), then the daemon is ended if it has not (openvpn
        # outlives its device; charon removes its SAs and routes as it ends).
        self.undo.setdefault(role, []).append(host.end_on_undo(proc))
        checks = []
        if device is not None:
            reverse = ["ip", "link", "del", device]
            host.undo(reverse)
            self.undo[role].append(reverse)
            checks.append(f"ip link show dev {shlex.quote(device)} >/dev/null 2>&1")
        if socket is not None:
            checks.append(f"[ -S {shlex.quote(str(socket))} ]")
        check = " && ".join(checks) or "true"
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LabError(f"{role}: {name} exited during start-up: {self._tail(host, log)}")
            if host.run(["sh", "-c", check], check=False).returncode == 0:
                return None
            time.sleep(POLL_S)
        made = " and ".join(
            str(w) for w in (device, socket and f"its socket {socket}") if w is not None
        )
        raise LabError(
            f"{role}: {name} did not create {made} within {READY_S:.0f} s: {self._tail(host, log)}"
        )

    @staticmethod
    def _tail(host: Host, log: Path) -> str:
        lines = host.run(["cat", str(log)], check=False).stdout.strip().splitlines()
        return " | ".join(lines[-3:]) or "no output"


def shared_prefix(a: str, b: str) -> int:
    """The longest prefix length whose network holds both addresses (at most /30, or
    /126 for IPv6, so the two are host addresses of it)."""
    x, y = ipaddress.ip_address(a), ipaddress.ip_address(b)
    bits = x.max_prefixlen
    length = bits - (int(x) ^ int(y)).bit_length()
    return min(length, bits - 2)


def route_to(session: Session, role: str, address: str) -> tuple[str, str]:
    """(device, source address) of ``role``'s route to ``address``."""
    text = session.hosts[role].run(["ip", "route", "get", address]).stdout
    words = text.split()
    try:
        return words[words.index("dev") + 1], words[words.index("src") + 1]
    except (ValueError, IndexError):
        raise LabError(f"{role}: no route to {address} ({text.strip() or 'no output'})") from None


def undo_of(command: list[str]) -> list[str] | None:
    """How to reverse one ``ip`` command a site is given: a link is deleted (its addresses
    and routes go with it), a route added elsewhere is deleted; None for what the link's
    removal takes with it."""
    match command:
        case ["link", "add", device, *_]:
            return ["ip", "link", "del", device]
        case ["route", "add", prefix, *_]:
            return ["ip", "route", "del", prefix]
        case ["link", "set", *_] | ["address", "add", *_]:
            return None
    raise ValueError(f"a site is not given `ip {' '.join(command)}`")
