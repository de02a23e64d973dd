"""The tunnel of a remote run: built by tunnelbench between two hosts with the lab's own
code for its kind (WireGuard, IPsec, OpenVPN, VXLAN, GRE, gretap, IPIP, GENEVE: the hosts
are its site, :mod:`tunnelbench.remote.site`), or the user's own, already up, which is only
used.

A built tunnel changes each host only through recorded steps (:meth:`SshHost.undo`
before each change): the device, the daemon, the key file, one route per host. The
client routes only the server's address into the tunnel; the server routes the client's
tunnel address back (the far end has it on the tunnel's subnet). Nothing else of the
hosts' routing moves.
"""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Cipher, Protection, TunnelKind, TunnelMode
from tunnelbench.model.kindfacts import SetupFound, TunnelFacts
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.model.remotefacts import TunnelEnd
from tunnelbench.remote.host import SshHost
from tunnelbench.remote.probes import Facts
from tunnelbench.remote.session import Session
from tunnelbench.remote.site import HostsSite
from tunnelbench.remote.ssh import Unreachable
from tunnelbench.system import probing
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.base import ESP_CIPHERS, TunnelHandle, TunnelSpec
from tunnelbench.tunnels.wireguard import WIREGUARD_GO

#: Pings that may be lost before a built tunnel is said to carry nothing.
CARRIED_PINGS = 3


@dataclass
class RemoteTunnel:
    kind: TunnelKind
    mode: TunnelMode
    implementation: str  # kernel, wireguard-go, or "existing" (the user's)
    devices: dict[str, str] = field(default_factory=dict)  # role -> device
    #: ``tunnelbench`` or ``user``; None without a tunnel.
    built_by: str | None = None
    #: The kind, implementation and MTU the trial asked for (a tunnel asked otherwise is built
    #: again).
    asked: tuple[TunnelKind, str | None, int | None] | None = None
    #: The tunnel MTU tunnelbench gave it (None: the user's tunnel's own).
    mtu: int | None = None
    #: role -> the commands that remove what was built there, in the order made
    undo: dict[str, list[list[str]]] = field(default_factory=dict)
    #: role -> what ran each end tunnelbench built, with its version there
    ends: dict[str, TunnelEnd] = field(default_factory=dict)
    #: The version of the user's daemon, for an existing tunnel whose process is named.
    user_version: str | None = None
    #: What set-up found out (as the lab's tunnel handle reports it: OpenVPN's DCO and
    #: data cipher).
    found: SetupFound = field(default_factory=SetupFound)
    #: What the kind declares of itself as it ran (the DUT's end's implementation).
    kind_facts: TunnelFacts | None = None
    #: The cipher it was built with (None: it does not encrypt, or the user's tunnel).
    cipher: str | None = None

    def version(self) -> str | None:
        """What ran the tunnel, with versions: ``<version> (client and gw)`` when both
        ends ran the same, else each end's."""
        if not self.ends:
            return self.user_version
        if len(set(self.ends.values())) == 1:
            version = next(iter(self.ends.values())).version
            return f"{version} ({' and '.join(self.ends)})"
        return "; ".join(
            f"{role}: {end.implementation}, {end.version}" for role, end in self.ends.items()
        )


def for_trial(
    session: Session, settings: TunnelSettings, standing: list[RemoteTunnel]
) -> RemoteTunnel:
    """The tunnel a trial with ``settings`` crosses, built or kept (``standing``: the
    built one up now, if any); a built one is removed before a trial without it (its
    route would carry that trial's traffic too) or asking another kind, implementation
    or MTU (``tunnel.mtu``; None: the default for the ends' underlay). The hosts file's
    ``tunnel.implementation`` is its kind's; another kind built there is "auto"'s (None:
    no choice, the ends decide)."""
    plan = session.file.tunnel
    kind = settings.kind
    own = plan.implementation if kind is plan.kind else None
    choice = own if settings.implementation is None else settings.implementation
    asked = (kind, choice, settings.mtu)
    if standing and (kind is TunnelKind.NONE or standing[0].asked != asked):
        teardown(session, standing.pop())
    if kind is TunnelKind.NONE:
        return RemoteTunnel(TunnelKind.NONE, TunnelMode.NONE, "none")
    if plan.mode is TunnelMode.EXISTING:
        return existing(session)
    if not standing:
        if (builder := BUILDERS.get(kind)) is not None:
            tunnel = builder(session, choice, settings.mtu)
        else:
            tunnel = build_kind(session, kind, choice, settings.mtu)
        tunnel.asked = asked
        standing.append(tunnel)
    return standing[0]


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
    tunnel = RemoteTunnel(hosts.tunnel.kind, TunnelMode.EXISTING, "existing", built_by="user")
    if (process := hosts.tunnel.process) is not None and hosts.dut in session.facts:
        described = session.facts[hosts.dut].software.describe(process)
        if described is not None:
            tunnel.user_version = f"the user's {process} on {hosts.dut}: {described}"
    return tunnel


def build_wireguard(
    session: Session, implementation: str | None, mtu: int | None = None
) -> RemoteTunnel:
    """WireGuard between the hosts file's two ends, built by the lab's own code
    (:meth:`tunnelbench.tunnels.wireguard.WireGuard.build`) on the hosts' site;
    ``implementation``: kernel, wireguard-go or None, "auto" (each end the kernel's where
    it has WireGuard, else wireguard-go); ``mtu``: the tunnel's (None: the underlay's
    default)."""
    for role in session.file.tunnel.ends:
        if "wg" not in session.facts[role].programs:
            raise UserError(
                f"{role}: `wg` is not installed (wireguard-tools); it sets up the tunnel"
            )
    wireguard = TUNNELS.get(TunnelKind.WIREGUARD)
    site = HostsSite(session)
    # Resolved here, not by resolve(): "auto" and the programs are each host's own.
    spec = TunnelSpec(
        implementation or WIREGUARD_GO, cipher=wireguard.ciphers[0], each_end=implementation is None
    )
    spec = replace(spec, mtu=mtu or wireguard.default_mtu(site.underlay_mtu(), spec))
    return _built(session, site, TunnelKind.WIREGUARD, spec)


def esp_refusal(session: Session, role: str, cipher: Cipher) -> str | None:
    """None when ``role``'s kernel makes an ESP SA with ``cipher``, else its refusal: the
    lab's own probe (one SA of test addresses), made on the host and deleted at once,
    its deletion recorded first; once a session."""
    key = (role, cipher.value)
    if key not in session.esp_refusals:
        session.esp_refusals[key] = _esp_probe(session.hosts[role], cipher)
    return session.esp_refusals[key]


def _esp_probe(host: SshHost, cipher: Cipher) -> str | None:
    argv = probing.esp_probe_argv(strongswan.KERNEL_ALGORITHMS[cipher])
    removal = ["ip", "xfrm", "state", "delete", *argv[4:8], "proto", "esp", "spi", "0x100"]
    host.undo(removal)
    done = host.run(argv, check=False)
    if done.returncode != 0:
        return probing.refusal(done.stderr)
    host.run(removal)
    return None


#: The kinds built by a function of their own (WireGuard: each end runs its own
#: implementation, the kernel's or a daemon); every other kind by :func:`build_kind`.
BUILDERS: dict[TunnelKind, Callable[[Session, str | None, int | None], RemoteTunnel]] = {
    TunnelKind.WIREGUARD: build_wireguard,
}


def build_kind(
    session: Session, kind: TunnelKind, implementation: str | None = None, mtu: int | None = None
) -> RemoteTunnel:
    """A kind that builds through a site alone (:attr:`Tunnel.anywhere`: IPsec, OpenVPN,
    VXLAN, GRE, gretap, IPIP, GENEVE), in ESP with ``tunnel.protection = "ipsec"``, built
    between the hosts file's two ends by the same code as in the lab
    (:class:`tunnelbench.remote.site.HostsSite`), at the default MTU of the ends'
    underlay (or ``mtu``). Who does ESP is the ends' to say (:func:`esp_choice`), not this
    machine's."""
    plan = session.file.tunnel
    tunnel = TUNNELS.get(kind)
    protection = plan.protection
    esp = None
    if kind is TunnelKind.IPSEC:
        esp = esp_choice(session, implementation, "tunnel.implementation")
        implementation = None
    elif protection is Protection.IPSEC:
        esp = esp_choice(session, None, "tunnel.protection")
    settings = TunnelSettings(
        kind=kind, implementation=implementation, protection=protection, mtu=mtu
    )
    site = HostsSite(session)
    return _built(session, site, kind, tunnel.resolve(settings, site.underlay_mtu(), esp=esp))


def esp_choice(session: Session, requested: str | None, key: str) -> str:
    """Who does ESP (the first ESP cipher, tunnel mode) between the hosts file's two ends:
    ``kernel`` or ``libipsec`` as ``requested``, or (None: "auto") the kernel's where every
    end's kernel makes an SA with the cipher, else strongSwan's userspace ESP at both."""
    if requested == strongswan.LIBIPSEC:
        return requested
    cipher = ESP_CIPHERS[0]
    ends = session.file.tunnel.ends
    refusals = {role: esp_refusal(session, role, cipher) for role in ends}
    refused = {role: why for role, why in refusals.items() if why is not None}
    if requested == strongswan.KERNEL and refused:
        algorithm = strongswan.KERNEL_ALGORITHMS[cipher]
        said = "; ".join(
            f"{role}'s kernel has no ESP with {cipher.value} ({algorithm}: {why})"
            for role, why in refused.items()
        )
        raise UserError(f"{key}: 'kernel': {said}; use {strongswan.LIBIPSEC!r} or 'auto'")
    return strongswan.LIBIPSEC if refused else strongswan.KERNEL


def _built(session: Session, site: HostsSite, kind: TunnelKind, spec: TunnelSpec) -> RemoteTunnel:
    """``kind`` built on ``site``, the server's route back to the client's inner address
    through ``via``, each end's implementation and version, and the path checked."""
    tunnel = RemoteTunnel(kind, TunnelMode.BUILD, spec.implementation, built_by="tunnelbench")
    try:
        handle = TUNNELS.get(kind).build(site, spec)
    except Unreachable:
        raise
    except LabError as exc:  # the host's own refusal (an unknown link type, a busy port)
        raise UserError(f"could not build {kind.value}: {exc}") from None
    finally:
        tunnel.undo = site.undo
    try:
        return _routed(session, site, kind, spec, tunnel, handle)
    except LabError:
        # Built but refused its route or carries nothing: removed now, else the next
        # trial's build meets its devices ("File exists") and the run stops there. Each
        # step on its own: the route's removal is recorded before it is added.
        for role, steps in tunnel.undo.items():
            for step in reversed(steps):
                with contextlib.suppress(LabError):
                    session.hosts[role].run(step)
        tunnel.undo.clear()
        raise


def _routed(
    session: Session,
    site: HostsSite,
    kind: TunnelKind,
    spec: TunnelSpec,
    tunnel: RemoteTunnel,
    handle: TunnelHandle,
) -> RemoteTunnel:
    """The built ``tunnel`` given the server's route back, its ends' facts, and its path
    checked (:func:`_built`)."""
    plan = session.file.tunnel
    near, far = plan.ends
    carried = TUNNELS.get(kind).carried_families(site.families, spec.mtu)
    if near == "client" and far != "server":
        for family in carried:
            via = plan.via if family == 4 else plan.via6
            assert via is not None  # required by the hosts file
            address = site.inner_address(near, family).partition("/")[0]
            back = f"{address}/{32 if family == 4 else 128}"
            removal = ["ip", f"-{family}", "route", "del", back]
            session.hosts["server"].undo(removal)
            tunnel.undo.setdefault("server", []).append(removal)
            session.hosts["server"].run(["ip", f"-{family}", "route", "add", back, "via", via])
    tunnel.devices = dict(handle.devices)
    tunnel.found = handle.found
    for role in (near, far):
        # What ran the end (ESP's daemons for a protected tunnel, as the lab names it) and
        # the version of the kind's own implementation there.
        own = handle.implementations.get(role, spec.implementation)
        used = handle.implementations.get(role, handle.implementation)
        tunnel.ends[role] = TunnelEnd(
            used, _version(session.hosts[role], kind, own, session.facts[role])
        )
    # The DUT's end is the one measured; between two routers the near one.
    dut = session.file.dut
    tunnel.implementation = tunnel.ends[dut if dut in tunnel.ends else near].implementation
    _check_carried(session, tunnel, near, far, session.file.target(False, carried[0]))
    measured = replace(spec, implementation=tunnel.implementation)
    tunnel.kind_facts = TUNNELS.get(kind).facts(measured, handle.found)
    tunnel.cipher = spec.cipher.value if spec.cipher else None
    tunnel.mtu = spec.mtu
    return tunnel


def _check_carried(
    session: Session, tunnel: RemoteTunnel, near: str, far: str, target: str
) -> None:
    """The client's packets to the server go through the tunnel: the far end's tunnel
    device received them, else the route or the tunnel is wrong.

    One ping at a time, the counter read after each: the first may be lost while the
    path resolves (ARP, or an IPsec SA negotiated on demand), and ``ping -c 3`` waited
    its 1 s interval twice even when the first got through (busybox's ping may lack
    ``-i``)."""
    device = tunnel.devices[far]
    counter = f"/sys/class/net/{device}/statistics/rx_packets"
    # Counted from before the pings: a tunnel device may receive other packets (IPv6
    # neighbour discovery) that prove nothing of the route.
    before = _counter(session.hosts[far], counter)
    for _ in range(CARRIED_PINGS):
        session.hosts[near].run(["ping", "-c", "1", "-W", "1", target], check=False, timeout=5)
        after = _counter(session.hosts[far], counter)
        if after is not None and after > (before or 0):
            return
    raise LabError(
        f"the tunnel carries nothing: {far}'s {device} received no packets after {near}"
        f" pinged {target} (check {far}'s address in the hosts file and the firewalls)"
    )


def _counter(host: SshHost, path: str) -> int | None:
    """A counter file's value on ``host``, or None where it cannot be read."""
    text = host.run(["cat", path], check=False).stdout.strip()
    return int(text) if text.isdigit() else None


def _version(host: SshHost, kind: TunnelKind, implementation: str, facts: Facts) -> str:
    """The version of what runs the tunnel's end on ``host``, as the lab records its own:
    the kind's words where it has them (strongSwan and who does ESP), else the kernel's
    release (and its WireGuard module's version, read once the device made it load), or
    the daemon's own line, build, package and path."""
    lines = {name: program.version for name, program in facts.software.programs.items()}
    if (said := TUNNELS.get(kind).end_version(implementation, facts.kernel, lines)) is not None:
        return said
    if TUNNELS.get(kind).in_kernel(implementation):
        module = host.run(["cat", "/sys/module/wireguard/version"], check=False).stdout.strip()
        return f"linux {facts.kernel}" + (f", wireguard module {module}" if module else "")
    return facts.software.describe(implementation) or f"{implementation} (version not found)"
