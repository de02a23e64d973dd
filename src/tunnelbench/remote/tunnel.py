"""The tunnel of a remote run: built by tunnelbench between two hosts (WireGuard, the
kernel's or wireguard-go), or the user's own, already up, which is only used.

A built tunnel changes each host only through recorded steps (:meth:`SshHost.undo`
before each change): the device, the daemon, the key file, one route per host. The
client routes only the server's address into the tunnel; the far end and the server
route only the client's tunnel address back. Nothing else of the hosts' routing moves.
"""

import random
import subprocess
from dataclasses import dataclass, field
from typing import Any

from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.remote.host import SshHost, wait_until
from tunnelbench.remote.hostsfile import HostsFile
from tunnelbench.remote.probes import Facts
from tunnelbench.remote.session import Session
from tunnelbench.remote.site import HostsSite
from tunnelbench.remote.ssh import Unreachable
from tunnelbench.tunnels import REGISTRY as TUNNELS

PORTS = range(51820, 51900)
WG_MTU = 1420  # WireGuard's own default: 1500 less 80 bytes of IPv6 + UDP + WireGuard


@dataclass
class RemoteTunnel:
    kind: str  # TunnelKind's value, or "none"
    mode: str  # hostsfile.MODES
    implementation: str  # kernel, wireguard-go, or "existing" (the user's)
    devices: dict[str, str] = field(default_factory=dict)  # role -> device
    facts: dict[str, Any] = field(default_factory=dict)
    #: role -> the commands that remove what was built there, in the order made
    undo: dict[str, list[list[str]]] = field(default_factory=dict)
    #: role -> (implementation, its version there) at each end tunnelbench built
    ends: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: The version of the user's daemon, for an existing tunnel whose process is named.
    user_version: str | None = None

    def version(self) -> str | None:
        """What ran the tunnel, with versions: ``<version> (client and gw)`` when both
        ends ran the same, else each end's."""
        if not self.ends:
            return self.user_version
        if len(set(self.ends.values())) == 1:
            _, version = next(iter(self.ends.values()))
            return f"{version} ({' and '.join(self.ends)})"
        return "; ".join(f"{role}: {used}, {v}" for role, (used, v) in self.ends.items())


def teardown(session: Session, tunnel: RemoteTunnel) -> None:
    """Remove a built tunnel before trials without it (the hosts' own routing back). The
    same steps stay in each host's record, for a run that dies before this."""
    for role, steps in tunnel.undo.items():
        for step in reversed(steps):
            session.hosts[role].run(step)
    tunnel.undo.clear()


def existing(session: Session) -> RemoteTunnel:
    """The user's tunnel; the version of its daemon where the hosts file names it and the
    DUT has that program."""
    hosts = session.file
    tunnel = RemoteTunnel(hosts.tunnel.kind, "existing", "existing", facts={"built_by": "user"})
    if (process := hosts.tunnel.process) is not None and hosts.dut in session.facts:
        described = session.facts[hosts.dut].software.describe(process)
        if described is not None:
            tunnel.user_version = f"the user's {process} on {hosts.dut}: {described}"
    return tunnel


@dataclass(frozen=True)
class WirePlan:
    """Who routes what into a built tunnel, as addresses (a pure function of the hosts
    file, so the plan is tested without hosts)."""

    allowed: dict[str, str]  # end -> the peer's allowed IPs (comma-separated /32s)
    routes: dict[str, list[str]]  # role -> `ip route add` arguments
    sources: tuple[str, ...]  # addresses the tunnel's traffic comes from (the client's)


def wire_plan(hosts: HostsFile, device: str) -> WirePlan:
    """Road-warrior (the client is an end): the client sends the server's address into
    the tunnel from its tunnel address, the far end routes that address back, and the
    server reaches it through ``via``. Site-to-site (two routers are the ends): the near
    router sends the server's address into the tunnel, the far one the client's."""
    plan = hosts.tunnel
    near, far = plan.ends
    server = hosts.target(False)
    inner = dict(zip((near, far), plan.inner, strict=True))
    if near == "client":
        routes = {
            near: [f"{server}/32", "dev", device, "src", inner[near]],
            far: [f"{inner[near]}/32", "dev", device],
        }
        if far != "server":
            assert plan.via is not None  # required by the hosts file
            routes["server"] = [f"{inner[near]}/32", "via", plan.via]
        allowed = {near: f"{server}/32,{inner[far]}/32", far: f"{inner[near]}/32"}
        return WirePlan(allowed, routes, (inner[near],))
    client = hosts.client.address
    assert client is not None  # required by the hosts file for a site-to-site tunnel
    routes = {near: [f"{server}/32", "dev", device], far: [f"{client}/32", "dev", device]}
    allowed = {near: f"{server}/32,{inner[far]}/32", far: f"{client}/32,{inner[near]}/32"}
    return WirePlan(allowed, routes, (client,))


def build_wireguard(session: Session, implementation: str) -> RemoteTunnel:
    """WireGuard between the hosts file's two ends; ``implementation``: kernel,
    wireguard-go or auto (the kernel's where it has WireGuard)."""
    plan = session.file.tunnel
    near, far = plan.ends
    for role in (near, far):
        if "wg" not in session.facts[role].programs:
            raise UserError(
                f"{role}: `wg` is not installed (wireguard-tools); it sets up the tunnel"
            )
    endpoint = session.file.hosts[far].address
    assert endpoint is not None  # required by the hosts file for a built tunnel
    device = f"tbwg{session.tag[:6]}"
    wiring = wire_plan(session.file, device)
    keys = {role: _key_pair() for role in (near, far)}
    port = _free_udp_port(session.hosts[far])
    tunnel = RemoteTunnel("wireguard", "build", implementation, facts={"built_by": "tunnelbench"})
    inner = dict(zip((near, far), plan.inner, strict=True))
    for role, peer in ((far, near), (near, far)):
        host = session.hosts[role]
        used = _create_device(host, device, implementation, session.facts[role].programs)
        tunnel.undo.setdefault(role, []).append(["ip", "link", "del", device])
        tunnel.ends[role] = (used, _version(host, used, session.facts[role]))
        tunnel.devices[role] = device
        key = host.directory / "wg.key"
        host.write(key, keys[role][0] + "\n", mode=0o600)
        setting = ["wg", "set", device, "private-key", str(key)]
        if role == far:
            setting += ["listen-port", str(port)]
        setting += ["peer", keys[peer][1], "allowed-ips", wiring.allowed[role]]
        if role == near:
            setting += ["endpoint", f"{endpoint}:{port}"]
        host.run(setting)
        host.run(["ip", "address", "add", f"{inner[role]}/32", "dev", device])
        host.run(["ip", "link", "set", device, "mtu", str(WG_MTU), "up"])
    for role, spec in wiring.routes.items():
        removal = ["ip", "route", "del", *spec[:3]]
        session.hosts[role].undo(removal)
        tunnel.undo.setdefault(role, []).append(removal)
        session.hosts[role].run(["ip", "route", "add", *spec])
    # The DUT's end is the one measured; between two routers the near one.
    dut = session.file.dut
    tunnel.implementation = tunnel.ends[dut if dut in tunnel.ends else near][0]
    tunnel.ends = {role: tunnel.ends[role] for role in (near, far)}
    _check_path(session, tunnel, near, far, session.file.target(False))
    tunnel.facts |= {"mtu": WG_MTU, "port": port, "device": device}
    return tunnel


def build_kind(session: Session, kind: TunnelKind) -> RemoteTunnel:
    """A kind that builds through a site alone (:attr:`Tunnel.anywhere`: VXLAN, GRE,
    gretap, IPIP, GENEVE), built between the hosts file's two ends by the same code as
    in the lab (:class:`tunnelbench.remote.site.HostsSite`), at the default MTU of the
    ends' underlay; the server routes the client's inner address back through ``via``."""
    tunnel_kind = TUNNELS.get(kind)
    plan = session.file.tunnel
    near, far = plan.ends
    site = HostsSite(session)
    spec = tunnel_kind.resolve(TunnelSettings(kind=kind), site.underlay_mtu())
    built_by = {"built_by": "tunnelbench"}
    tunnel = RemoteTunnel(kind.value, "build", spec.implementation, facts=built_by)
    try:
        handle = tunnel_kind.build(site, spec)
    except Unreachable:
        raise
    except LabError as exc:  # the host's own refusal (an unknown link type, a busy port)
        raise UserError(f"could not build {kind.value}: {exc}") from None
    finally:
        tunnel.undo = site.undo
    if near == "client" and far != "server":
        assert plan.via is not None  # required by the hosts file
        back = f"{site.inner[near]}/32"
        removal = ["ip", "route", "del", back]
        session.hosts["server"].undo(removal)
        tunnel.undo.setdefault("server", []).append(removal)
        session.hosts["server"].run(["ip", "route", "add", back, "via", plan.via])
    tunnel.devices = dict(handle.devices)
    tunnel.ends = {role: ("kernel", f"linux {session.facts[role].kernel}") for role in (near, far)}
    _check_carried(session, tunnel, near, far, session.file.target(False))
    tunnel.facts |= {"mtu": spec.mtu, "device": handle.devices[far]}
    return tunnel


def _check_carried(
    session: Session, tunnel: RemoteTunnel, near: str, far: str, target: str
) -> None:
    """The client's packets to the server go through the tunnel: the far end's tunnel
    device received them, else the route or the tunnel is wrong."""
    session.hosts[near].run(["ping", "-c", "3", "-W", "1", target], check=False, timeout=15)
    device = tunnel.devices[far]
    counter = f"/sys/class/net/{device}/statistics/rx_packets"
    text = session.hosts[far].run(["cat", counter], check=False).stdout.strip()
    if not text.isdigit() or int(text) == 0:
        raise LabError(
            f"the tunnel carries nothing: {far}'s {device} received no packets after {near}"
            f" pinged {target} (check {far}'s address in the hosts file and the firewalls)"
        )


def _version(host: SshHost, implementation: str, facts: Facts) -> str:
    """The version of what runs the tunnel's end on ``host``, as the lab records its own:
    the kernel's release (and its WireGuard module's version, read once the device made
    it load), or the daemon's own line, build, package and path."""
    if implementation == "kernel":
        module = host.run(["cat", "/sys/module/wireguard/version"], check=False).stdout.strip()
        return f"linux {facts.kernel}" + (f", wireguard module {module}" if module else "")
    return facts.software.describe(implementation) or f"{implementation} (version not found)"


def _key_pair() -> tuple[str, str]:
    """Made where the run is controlled: a private key never crosses a network unencrypted
    (it goes to each host over its SSH connection) and needs no tool on the host."""
    private = subprocess.run(
        ["wg", "genkey"], capture_output=True, text=True, check=True
    ).stdout.strip()
    public = subprocess.run(
        ["wg", "pubkey"], input=private + "\n", capture_output=True, text=True, check=True
    ).stdout.strip()
    return private, public


def _free_udp_port(host: SshHost) -> int:
    used = set()
    for line in host.run(
        ["cat", "/proc/net/udp", "/proc/net/udp6"], check=False
    ).stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) > 1 and ":" in parts[1]:
            used.add(int(parts[1].rsplit(":", 1)[1], 16))
    free = [p for p in PORTS if p not in used]
    if not free:
        raise LabError(f"{host.name}: no free UDP port in {PORTS.start}-{PORTS.stop - 1}")
    return random.choice(free)


def _create_device(
    host: SshHost, device: str, implementation: str, programs: dict[str, str]
) -> str:
    host.undo(["ip", "link", "del", device])
    if implementation in ("auto", "kernel"):
        done = host.run(["ip", "link", "add", device, "type", "wireguard"], check=False)
        if done.returncode == 0:
            return "kernel"
        if implementation == "kernel":
            raise UserError(f"{host.name}: the kernel has no WireGuard ({done.stderr.strip()})")
    if "wireguard-go" not in programs:
        raise UserError(f"{host.name}: neither kernel WireGuard nor wireguard-go is available")
    host.undo(["rm", "-f", f"/var/run/wireguard/{device}.sock"])
    log = host.directory / f"{device}.log"
    host.spawn(
        ["env", "WG_PROCESS_FOREGROUND=1", "wireguard-go", "-f", device],
        stdout=log,
        stderr="stdout",
    )
    up = wait_until(
        lambda: host.run(["ip", "link", "show", device], check=False).returncode == 0, 5.0, 0.2
    )
    if not up:
        raise LabError(
            f"{host.name}: wireguard-go did not create {device}:"
            f" {host.run(['cat', str(log)], check=False).stdout[-300:]}"
        )
    return "wireguard-go"


def _check_path(session: Session, tunnel: RemoteTunnel, near: str, far: str, target: str) -> None:
    """The client's packets to the server go through the tunnel: the far end received
    them (its WireGuard counters), else the route or the tunnel is wrong."""
    session.hosts[near].run(["ping", "-c", "3", "-W", "1", target], check=False, timeout=15)
    shown = session.hosts[far].run(["wg", "show", tunnel.devices[far], "transfer"]).stdout.split()
    received = int(shown[1]) if len(shown) >= 2 and shown[1].isdigit() else 0
    if received == 0:
        raise LabError(
            f"the tunnel carries nothing: {far} received no WireGuard traffic after the client"
            f" pinged {target} (check {far}'s address in the hosts file and the firewalls)"
        )
