"""The hosts file: which machine plays each role of a remote run, how to reach it over
SSH, the addresses traffic must use, and the tunnel between them.

It is validated whole before anything connects, with the plan file's error style: every
problem named by its key, one message, exit code 2. Traffic goes only to the addresses
written here (``address`` of the server, the tunnel's ``address``), and a tunnel
tunnelbench builds may not route the SSH management connection (:func:`management_overlap`).
"""

import ipaddress
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunnelbench.echo import capped, did_you_mean
from tunnelbench.errors import UserError
from tunnelbench.kinds import Protection, TunnelKind, TunnelMode
from tunnelbench.model.hostsrecord import HostEntry, HostsRecord
from tunnelbench.model.plan import requested_implementation
from tunnelbench.remote.snmp import Agent
from tunnelbench.tunnels import REGISTRY as TUNNELS

#: The roles of each layout, in path order; the DUT (the router measured) is in between.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "road-warrior": ("client", "gw", "server"),
    "site-to-site": ("client", "gwa", "gwb", "server"),
}
#: What tunnelbench builds on real hosts: every kind that builds through a site
#: (tunnelbench.tunnels.site); one that carries IPv6 alone (sit) needs IPv6 addresses.
BUILDABLE = tuple(kind.value for kind in TUNNELS.kinds() if TUNNELS.get(kind).anywhere)
#: What an existing tunnel may be (the kind its trials record).
KINDS = tuple(kind.value for kind in TunnelKind if kind is not TunnelKind.NONE)
#: What ``tunnel.implementation`` may name, per kind; "auto" lets each host decide.
IMPLEMENTATIONS = {
    kind: ("auto", "kernel", "wireguard-go")
    if TunnelKind(kind) is TunnelKind.WIREGUARD
    else ("auto", *TUNNELS.get(TunnelKind(kind)).implementations)
    for kind in BUILDABLE
}
#: A slow router's SSH login (key exchange on a small CPU) takes a second or two.
CONNECT_TIMEOUT_S = 10.0
TOP_KEYS = {"layout", "ssh_config", "connect_timeout", "tunnel", "dut"}
HOST_KEYS = {"ssh", "address", "address6", "snmp", "community", "snmp_cache"}
#: How old a counter an SNMP agent serves may be (s): agents answer from a cache they
#: refresh on their own clock. A trial measures the refresh interval itself
#: (:mod:`tunnelbench.remote.snmp_watch`); this is the least it waits after the traffic
#: for a refresh, where it has measured no longer one.
SNMP_CACHE_S = 5.0
SNMP_CACHE_MAX_S = 60.0
TUNNEL_KEYS = {
    "mode", "kind", "implementation", "protection", "ends", "address", "address6", "process",
    "inner", "inner6", "via", "via6",
}  # fmt: skip
#: The tunnel's own IPv6 addresses unless ``tunnel.inner6`` names others (the lab's).
INNER6 = ("2001:2:0:ff::1", "2001:2:0:ff::2")
#: The kinds ``tunnel.protection = "ipsec"`` may wrap (ESP around their packets).
PROTECTABLE = tuple(k for k in BUILDABLE if TUNNELS.get(TunnelKind(k)).protectable)


@dataclass(frozen=True)
class RemoteHost:
    """``destination`` None: a router tunnelbench cannot log into (no ``ssh``), measured
    as a black box between the client and the server; ``snmp`` and ``community``: where
    its SNMP agent answers, and the read community, for its counters."""

    role: str
    destination: str | None  # as ``ssh`` takes it: an alias of the SSH config, user@host, host
    address: str | None  # where traffic reaches this host (the server's is required)
    snmp: Agent | None = None
    community: str | None = field(default=None, repr=False)
    snmp_cache: float = SNMP_CACHE_S
    address6: str | None = None  # the same over IPv6 (traffic.family = 6)

    def reached(self, family: int) -> str | None:
        """Where traffic of IP version ``family`` reaches this host."""
        return self.address if family == 4 else self.address6

    @property
    def black_box(self) -> bool:
        return self.destination is None


@dataclass(frozen=True)
class TunnelPlan:
    """``existing``: the user's tunnel is up; traffic to ``address`` crosses it.
    ``build``: tunnelbench builds ``kind`` between ``ends`` and removes it after.
    ``none``: no tunnel, only the path through the DUT."""

    mode: TunnelMode
    kind: TunnelKind = TunnelKind.NONE
    implementation: str | None = None  # None: "auto", each host decides
    ends: tuple[str, str] = ("client", "gw")
    address: str | None = None  # existing: the server's address through the tunnel
    process: str | None = None  # existing: the daemon whose CPU to name (``wireguard-go``)
    inner: tuple[str, str] = ("198.19.0.1", "198.19.0.2")  # build: the ends' tunnel addresses
    via: str | None = None  # build: the server's next hop back to the client's inner address
    inner6: tuple[str, str] = INNER6  # build: the same over IPv6
    via6: str | None = None
    address6: str | None = None  # existing: the server's IPv6 address through the tunnel
    protection: Protection = Protection.NONE  # build: IPSEC puts it in ESP (PROTECTABLE kinds)


@dataclass(frozen=True)
class HostsFile:
    path: Path
    layout: str
    hosts: dict[str, RemoteHost]
    tunnel: TunnelPlan
    dut: str
    ssh_config: Path | None = None
    connect_timeout: float = CONNECT_TIMEOUT_S

    @property
    def roles(self) -> tuple[str, ...]:
        return LAYOUTS[self.layout]

    @property
    def plain_path(self) -> bool:
        """Whether the server can be reached around the tunnel too (a baseline)."""
        return (
            self.tunnel.mode is not TunnelMode.EXISTING
            or self.tunnel.address != self.server.address
        )

    @property
    def logins(self) -> tuple[str, ...]:
        """The roles tunnelbench logs into over SSH, in path order."""
        return tuple(r for r in self.roles if not self.hosts[r].black_box)

    @property
    def client(self) -> RemoteHost:
        return self.hosts["client"]

    @property
    def server(self) -> RemoteHost:
        return self.hosts["server"]

    @property
    def families(self) -> tuple[int, ...]:
        """The IP versions the hosts file gives the server (and a built tunnel) addresses
        for: IPv4 always, IPv6 with ``server.address6``."""
        return (4, 6) if self.server.address6 else (4,)

    def target(self, tunnelled: bool, family: int = 4) -> str:
        """The address the client sends to: through the tunnel, or the plain path."""
        through = self.tunnel.address if family == 4 else self.tunnel.address6
        if tunnelled and self.tunnel.mode is TunnelMode.EXISTING and through:
            return through
        address = self.server.reached(family)
        assert address is not None  # required by parse (IPv6: by the run's check)
        return address

    def record(self) -> HostsRecord:
        """What a run records of where it ran (destinations, not credentials)."""
        return HostsRecord(
            path=str(self.path),
            layout=self.layout,
            dut=self.dut,
            hosts={
                r: HostEntry(
                    h.destination, h.address, h.address6, h.snmp.target if h.snmp else None
                )
                for r, h in self.hosts.items()
            },
            tunnel_mode=self.tunnel.mode,
            tunnel_kind=self.tunnel.kind,
            tunnel_protection=self.tunnel.protection,
        )


def load(path: Path) -> HostsFile:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{capped(str(path), 300)}: no such hosts file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise UserError(f"{capped(str(path), 300)}: cannot read the hosts file ({exc})") from None
    return parse(text, path)


def _host(problems: list[str], role: str, table: dict[str, Any]) -> RemoteHost:
    """A role's ``[role]`` table, each problem with it added to ``problems``."""
    for key in table:
        if key not in HOST_KEYS:
            problems.append(f"{role}.{key}: unknown key{did_you_mean(key, HOST_KEYS)}")
    router = role not in ("client", "server")
    destination = table.get("ssh")
    if destination is None and router:
        pass  # a router without a login: a black box (its SNMP agent, if any, is read)
    elif not isinstance(destination, str) or not destination.strip():
        problems.append(f"{role}.ssh: missing: the SSH destination (user@host or an alias)")
        destination = ""
    elif destination.startswith("-") or any(c.isspace() for c in destination):
        problems.append(f"{role}.ssh: {destination!r} is not an SSH destination")
    address = table.get("address")
    if address is not None:
        address = _address(problems, f"{role}.address", address)
    address6 = table.get("address6")
    if address6 is not None:
        address6 = _address(problems, f"{role}.address6", address6, 6)
    agent, community = _snmp(problems, role, table, router)
    cache = table.get("snmp_cache", SNMP_CACHE_S)
    if "snmp_cache" in table and agent is None:
        problems.append(f"{role}.snmp_cache: applies to an SNMP agent ({role}.snmp) only")
    elif isinstance(cache, bool) or not isinstance(cache, int | float):
        problems.append(f"{role}.snmp_cache: {cache!r} is not a number of seconds")
        cache = SNMP_CACHE_S
    elif not 0 <= cache <= SNMP_CACHE_MAX_S:
        problems.append(
            f"{role}.snmp_cache: {cache!r} is out of range; allowed 0..{SNMP_CACHE_MAX_S:g} s"
        )
        cache = SNMP_CACHE_S
    return RemoteHost(role, destination, address, agent, community, float(cache), address6)


def _check_tunnel_ends(
    problems: list[str], tunnel: TunnelPlan, hosts: dict[str, RemoteHost]
) -> None:
    """What a tunnel tunnelbench builds needs of the hosts at its ends and beside them:
    a login at each end, the far end's address, and the addresses routed back into it."""
    near, far = tunnel.ends
    if tunnel.mode is TunnelMode.BUILD:
        for end in tunnel.ends:
            if end in hosts and hosts[end].black_box:
                problems.append(
                    f"{end}.ssh: missing: tunnelbench builds the tunnel on {end}, so it must"
                    f" log into it (a router without ssh is measured as a black box, with a"
                    f" tunnel that is already up or none)"
                )
    if tunnel.mode is TunnelMode.BUILD and far in hosts and hosts[far].address is None:
        problems.append(f"{far}.address: missing: where {near} reaches {far}, the tunnel's far end")
    client, server = hosts.get("client"), hosts.get("server")
    if tunnel.mode is TunnelMode.BUILD and near != "client" and client and client.address is None:
        problems.append(
            f"client.address: missing: the client's address, which {far} routes back into"
            " the tunnel"
        )
    if (
        tunnel.mode is TunnelMode.BUILD and server and server.address6
    ):  # the tunnel carries IPv6 too
        if near != "client" and client and client.address6 is None:
            problems.append(
                f"client.address6: missing: the client's IPv6 address, which {far} routes"
                " back into the tunnel (server.address6 is given)"
            )
        if near == "client" and far != "server" and tunnel.via6 is None:
            problems.append(
                "tunnel.via6: missing: the server's IPv6 next hop towards the tunnel, for the"
                " route back to the client's tunnel address (server.address6 is given)"
            )


def parse(text: str, path: Path) -> HostsFile:
    source = capped(str(path), 300)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    problems: list[str] = []
    layout = data.get("layout", "road-warrior")
    if layout not in LAYOUTS:
        problems.append(f"layout: {layout!r} is none of {', '.join(LAYOUTS)}")
        layout = "road-warrior"
    roles = LAYOUTS[layout]
    for key in data:
        if key not in TOP_KEYS and key not in roles:
            problems.append(f"{key}: unknown key{did_you_mean(key, [*TOP_KEYS, *roles])}")
    hosts: dict[str, RemoteHost] = {}
    for role in roles:
        table = data.get(role)
        if not isinstance(table, dict):
            problems.append(f'{role}: missing: a [{role}] table with ssh = "..."')
            continue
        hosts[role] = _host(problems, role, table)
    if "server" in hosts and hosts["server"].address is None:
        problems.append("server.address: missing: the address the client sends traffic to")
    dut = data.get("dut", roles[1])
    if dut not in roles[1:-1]:
        problems.append(f"dut: {dut!r} is not a router of this layout ({', '.join(roles[1:-1])})")
    tunnel = _tunnel(problems, data.get("tunnel", {}), roles)
    _check_tunnel_ends(problems, tunnel, hosts)
    ssh_config = None
    if (raw := data.get("ssh_config")) is not None:
        if not isinstance(raw, str):
            problems.append("ssh_config: must be a path")
        else:
            ssh_config = (path.parent / raw).resolve()
            if not ssh_config.is_file():
                problems.append(f"ssh_config: {capped(str(ssh_config), 200)} is not a file")
    timeout = data.get("connect_timeout", CONNECT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 1 <= timeout <= 120:
        problems.append(f"connect_timeout: {timeout!r} is not a number of seconds from 1 to 120")
        timeout = CONNECT_TIMEOUT_S
    if problems:
        raise UserError(f"{source}: " + "; ".join(problems))
    return HostsFile(path, layout, hosts, tunnel, dut, ssh_config, float(timeout))


def _snmp(
    problems: list[str], role: str, table: dict[str, Any], router: bool
) -> tuple[Agent | None, str | None]:
    """A router's SNMP agent and read community, both or neither."""
    raw, community = table.get("snmp"), table.get("community")
    if raw is None and community is None:
        return None, None
    if not router:
        problems.append(f"{role}.snmp: only a router's counters are read over SNMP")
        return None, None
    if raw is None:
        problems.append(f"{role}.snmp: missing: the agent's address, for {role}.community")
        return None, None
    if not isinstance(community, str) or not community or any(c.isspace() for c in community):
        problems.append(f"{role}.community: missing: the SNMP read community (v2c)")
        return None, None
    if not isinstance(raw, str):
        problems.append(f"{role}.snmp: {raw!r} is not an SNMP agent address")
        return None, None
    try:
        return Agent.parse(raw), community
    except UserError as exc:
        problems.append(f"{role}.snmp: {exc}")
        return None, None


def _address(problems: list[str], key: str, raw: Any, family: int = 4) -> str | None:
    """An address of IP version ``family`` (``address`` IPv4, ``address6`` IPv6)."""
    try:
        address = ipaddress.ip_address(raw if isinstance(raw, str) else "")
    except ValueError:
        problems.append(f"{key}: {raw!r} is not an IP address")
        return None
    if address.version != family:
        problems.append(
            f"{key}: {raw!r} is not an IPv{family} address"
            + (f" (an IPv6 one goes in {key}6)" if family == 4 else "")
        )
        return None
    return str(address)


def _tunnel_kind(problems: list[str], mode: TunnelMode, raw: Any) -> TunnelKind:
    """``tunnel.kind`` parsed (NONE, with the problem said, where it is wrong)."""
    if not isinstance(raw, str):
        what = "is up" if mode is TunnelMode.EXISTING else "to build"
        problems.append(f"tunnel.kind: missing: which tunnel {what}")
    elif mode is TunnelMode.BUILD and raw not in BUILDABLE:
        problems.append(
            f"tunnel.kind: {raw!r}: tunnelbench builds {', '.join(BUILDABLE)} on real hosts"
        )
    elif raw not in KINDS:
        problems.append(f"tunnel.kind: {raw!r} is none of {', '.join(KINDS)}")
    else:
        return TunnelKind(raw)
    return TunnelKind.NONE


def _protection(problems: list[str], raw: Any, kind: TunnelKind) -> Protection:
    """``tunnel.protection`` parsed for a built ``kind`` (NONE, said, where it is wrong)."""
    protections = [p.value for p in Protection]
    if raw not in protections:
        problems.append(f"tunnel.protection: {raw!r} is none of {', '.join(protections)}")
        return Protection.NONE
    if raw == Protection.IPSEC and kind not in PROTECTABLE:
        problems.append(
            f"tunnel.protection: {kind} cannot be wrapped in ipsec; {', '.join(PROTECTABLE)} can"
        )
    return Protection(raw)


def _existing(problems: list[str], table: dict[str, Any], kind: TunnelKind) -> TunnelPlan:
    """A tunnel the user already brought up: where the client reaches the server through
    it, and the process that carries it (when one does)."""
    address = None
    if table.get("address") is None:
        problems.append(
            "tunnel.address: missing: where the client reaches the server through the tunnel"
        )
    else:
        address = _address(problems, "tunnel.address", table["address"])
    process = table.get("process")
    if process is not None and (not isinstance(process, str) or "/" in process):
        problems.append(f"tunnel.process: {process!r} is not a program name")
        process = None
    address6 = table.get("address6")
    if address6 is not None:
        address6 = _address(problems, "tunnel.address6", address6, 6)
    return TunnelPlan(
        TunnelMode.EXISTING, kind, address=address, process=process, address6=address6
    )


def _ends(problems: list[str], table: dict[str, Any], roles: tuple[str, ...]) -> list[Any]:
    """The two roles a built tunnel joins, client side first (the first two roles where
    they are not given or not valid)."""
    ends = table.get("ends", [roles[0], roles[1]])
    if not (
        isinstance(ends, list)
        and len(ends) == 2
        and all(e in roles for e in ends)
        and ends[0] != ends[1]
    ):
        problems.append(f"tunnel.ends: {ends!r} is not two roles of {', '.join(roles)}")
        ends = [roles[0], roles[1]]
    if ends[0] != "client" and ("server" in ends or roles.index(ends[0]) > roles.index(ends[1])):
        problems.append(
            f"tunnel.ends: {ends!r}: the client and one router, or two routers, client side first"
        )
    return ends


def _address_pair(
    problems: list[str], table: dict[str, Any], key: str, default: list[str], family: int
) -> list[Any]:
    """``tunnel.<key>``: the tunnel's two inner addresses of ``family`` (``default``
    where not given or not valid)."""
    raw = table.get(key, default)
    pair = (
        [_address(problems, f"tunnel.{key}", a, family) for a in raw]
        if isinstance(raw, list)
        else []
    )
    if len(pair) != 2 or None in pair:
        problems.append(f"tunnel.{key}: {raw!r} is not two IPv{family} addresses")
        return default
    return pair


def _tunnel(problems: list[str], table: Any, roles: tuple[str, ...]) -> TunnelPlan:
    if not isinstance(table, dict):
        problems.append("tunnel: must be a table")
        return TunnelPlan(TunnelMode.NONE)
    for key in table:
        if key not in TUNNEL_KEYS:
            problems.append(f"tunnel.{key}: unknown key{did_you_mean(key, TUNNEL_KEYS)}")
    raw_mode = table.get("mode", "none")
    modes = [m.value for m in TunnelMode]
    if raw_mode not in modes:
        problems.append(f"tunnel.mode: {raw_mode!r} is none of {', '.join(modes)}")
        return TunnelPlan(TunnelMode.NONE)
    mode = TunnelMode(raw_mode)
    if mode is TunnelMode.NONE:
        return TunnelPlan(TunnelMode.NONE)
    kind = _tunnel_kind(problems, mode, table.get("kind"))
    if mode is TunnelMode.EXISTING:
        return _existing(problems, table, kind)
    implementation = table.get("implementation", "auto")
    allowed = IMPLEMENTATIONS.get(kind, ("auto",))
    if implementation not in allowed:
        problems.append(
            f"tunnel.implementation: {implementation!r}: {kind} is built by "
            f"{', '.join(repr(a) for a in allowed)}"
        )
    protection = _protection(problems, table.get("protection", "none"), kind)
    ends = _ends(problems, table, roles)
    inner = _address_pair(problems, table, "inner", ["198.19.0.1", "198.19.0.2"], 4)
    inner6 = _address_pair(problems, table, "inner6", list(INNER6), 6)
    via6 = table.get("via6")
    if via6 is not None:
        via6 = _address(problems, "tunnel.via6", via6, 6)
    via = table.get("via")
    if via is not None:
        via = _address(problems, "tunnel.via", via)
    elif ends[0] == "client" and ends[1] != "server":
        problems.append(
            "tunnel.via: missing: the server's next hop towards the tunnel (the router's"
            " address on the server's side), for the route back to the client's tunnel address"
        )
    return TunnelPlan(
        TunnelMode.BUILD,
        kind,
        requested_implementation(str(implementation)),
        (str(ends[0]), str(ends[1])),
        inner=(str(inner[0]), str(inner[1])),
        via=via,
        protection=protection,
        inner6=(str(inner6[0]), str(inner6[1])),
        via6=via6,
    )


def routed_on(hosts: HostsFile) -> dict[str, set[str]]:
    """role -> the addresses a built tunnel makes that host route differently: the client
    sends the server's address into the tunnel, the far end and the server send the
    client's tunnel address back."""
    if hosts.tunnel.mode is not TunnelMode.BUILD:
        return {}
    near, far = hosts.tunnel.ends
    targets = {hosts.target(False, family) for family in hosts.families}
    if near != "client":  # two routers: each sends the far side's endpoint into the tunnel
        clients = {hosts.client.reached(f) for f in hosts.families} - {None}
        return {near: targets, far: {str(a) for a in clients}}
    back = {hosts.tunnel.inner[0]} | ({hosts.tunnel.inner6[0]} if 6 in hosts.families else set())
    routed = {near: targets, far: set(back)}
    if far != "server":
        routed["server"] = set(back)
    return routed


def management_overlap(hosts: HostsFile, controller: dict[str, str]) -> str | None:
    """Why building the tunnel would carry an SSH management connection, or None.

    ``controller``: role -> this machine's address as that host sees it (the first field
    of ``SSH_CONNECTION`` there). A host that routes that address into the tunnel would
    send its SSH replies through it, and lose them whenever the tunnel is down.
    """
    for role, addresses in routed_on(hosts).items():
        seen = controller.get(role)
        if seen in addresses:
            return (
                f"{role}.ssh: this machine reaches {role} from {seen}, which the tunnel would"
                f" route on {role}; its SSH connection would go through the tunnel. Run"
                " tunnelbench from a machine that is not the traffic's server, or give"
                " the hosts other addresses"
            )
    return None
