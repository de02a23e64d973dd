"""The hosts of a remote run, connected: one SSH master per role, each host's facts,
its run directory, and cleanup of everything on every host however the run ends."""

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Generator, Protection, TunnelKind, TunnelMode
from tunnelbench.lab.host import Host
from tunnelbench.remote import leftovers, masters, probes, snmp, software
from tunnelbench.remote.host import SshHost, owner_alive
from tunnelbench.remote.hostsfile import HostsFile, management_overlap
from tunnelbench.remote.ssh import Connection, Unreachable
from tunnelbench.tunnels import REGISTRY as TUNNELS


@dataclass
class BlackBox:
    """A router tunnelbench cannot log into; its SNMP agent, when the hosts file names
    one, read from this machine (``reader``) with what discovery found (``device``)."""

    role: str
    reader: snmp.Reader | None = None
    device: snmp.Device | None = None

    def agent(self) -> tuple[snmp.Reader, snmp.Device] | None:
        """Its SNMP reader and what discovery found; None when none is read."""
        if self.reader is None or self.device is None:
            return None
        return self.reader, self.device


class Session:
    """Use as a context manager: connected on entry (a failure to connect is a
    :class:`UserError` and leaves nothing anywhere), cleaned up on exit."""

    def __init__(self, hosts: HostsFile, *, begin: bool = True, read_snmp: bool = True) -> None:
        self.file = hosts
        self.read_snmp = read_snmp
        self.tag = secrets.token_hex(4)
        self.begin = begin
        #: This machine's record of the session: its masters, their sockets and logs.
        self.record: masters.SessionRecord | None = None
        #: The hosts tunnelbench logs into; routers without a login are in black_boxes.
        self.hosts: dict[str, SshHost] = {}
        self.black_boxes: dict[str, BlackBox] = {}
        self.facts: dict[str, probes.Facts] = {}
        self.controller: dict[str, str] = {}  # role -> this machine's address as it sees it
        self.problems: list[str] = []  # what cleanup could not do
        #: (role, cipher) -> the host kernel's refusal of an ESP SA with it, None when it
        #: made one: asked once a session (the DUT's record and the build both need it).
        self.esp_refusals: dict[tuple[str, str], str | None] = {}

    def __enter__(self) -> "Session":
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        self.record = record = masters.SessionRecord.create(self.tag, self.file.path)
        for role in self.file.roles:
            remote = self.file.hosts[role]
            if remote.destination is None:
                self.black_boxes[role] = self._black_box(role, record.directory)
                continue
            connection = Connection(
                remote.destination,
                record.directory,
                config=self.file.ssh_config,
                connect_timeout=self.file.connect_timeout,
                name=role,
            )
            self.hosts[role] = SshHost(role, connection, self.tag)
            connection.open(partial(record.add, role, remote.destination, socket=connection.socket))
        for role, host in self.hosts.items():
            seen = host.run(["sh", "-c", 'echo "$SSH_CONNECTION"']).stdout.split()
            if seen:
                self.controller[role] = seen[0]
            self.facts[role] = probes.parse_facts(host.run(["sh", "-c", probes.FACTS]).stdout)
        if (why := management_overlap(self.file, self.controller)) is not None:
            raise UserError(why)
        if self.begin:
            for host in self.hosts.values():
                host.begin()

    def _black_box(self, role: str, directory: Path) -> BlackBox:
        """A router without a login, and its SNMP agent found answering (else a
        :class:`UserError` naming it)."""
        remote = self.file.hosts[role]
        if remote.snmp is None or remote.community is None or not self.read_snmp:
            return BlackBox(role)
        private = directory / f"snmp-{role}"
        private.mkdir(mode=0o700)
        reader = snmp.Reader(remote.snmp, remote.community, private, f"{role}.snmp")
        try:
            device = reader.discover()
        except LabError as exc:
            raise UserError(str(exc)) from None
        return BlackBox(role, reader, device)

    def close(self) -> None:
        for role, host in self.hosts.items():
            if not host.started:
                continue
            try:
                if (failed := host.cleanup()) is not None:
                    self.problems.append(f"{role}: {failed}")
            except (Unreachable, LabError) as exc:
                self.problems.append(
                    f"{role}: could not clean up ({exc}); `tunnelbench lab clean --hosts"
                    f" {self.file.path}` removes what is left once the host is reachable"
                )
        for host in self.hosts.values():
            host.connection.close()
        if self.record is not None:
            self.record.remove()


class SessionRoles:
    """A session's roles as a kind's site and a generator's ends see them: each role's
    host, its directory there, and its programs as the host's PATH finds them."""

    session: Session

    def host(self, role: str) -> Host:
        return self.session.hosts[role]

    def files(self, role: str) -> Path:
        return self.session.hosts[role].directory

    def program(self, role: str, name: str, purpose: str) -> str:
        """``name`` as the host's PATH finds it (its facts listed it); a
        :class:`UserError` where it has none."""
        if name not in self.session.facts[role].programs:
            raise UserError(f"{role}: {name} is not installed (the host's PATH has none)")
        return name


def clean(hosts: HostsFile) -> tuple[list[str], bool]:
    """``lab clean --hosts``: remove what killed runs left on each host; the lines to
    print, and whether everything found was either removed or a live run's."""
    # The masters first: their logins end with them, before the hosts are looked at.
    said = masters.clean(hosts.path)
    whole = True
    with Session(hosts, begin=False, read_snmp=False) as session:
        for role, host in session.hosts.items():
            for found in leftovers.listed(host.connection):
                path = found.path
                if (why := leftovers.refusal(found)) is not None:
                    said.append(f"{role}: {path}: refused: {why}; ran nothing from it")
                    whole = False
                    continue
                alive = owner_alive(found.record)
                if alive is None:
                    said.append(
                        f"{role}: {path}: left alone: made from another machine (boot id"
                        f" {found.record.get('boot_id', '?')})"
                    )
                    continue
                if alive:
                    said.append(
                        f"{role}: {path}: left alone: its run is still running"
                        f" (pid {found.record.get('pid')})"
                    )
                    continue
                failed = leftovers.clean_directory(host.connection, path)
                whole = whole and failed is None
                said.append(
                    f"{role}: {path}: "
                    + (f"could not remove all: {failed}" if failed else "removed")
                )
    return said, whole


def lacking_programs(
    kind: TunnelKind, facts: probes.Facts, protection: Protection = Protection.NONE
) -> list[str]:
    """What a host lacks of the programs a tunnel end of ``kind`` runs (and, with
    ``protection`` IPSEC, the programs of the ESP around it), each with its Debian
    package where the kind names one."""
    kinds = [kind]
    if protection is Protection.IPSEC and kind is not TunnelKind.IPSEC:
        kinds.append(TunnelKind.IPSEC)
    lacking: dict[str, None] = {}
    for tunnel in (TUNNELS.get(k) for k in kinds):
        for p in tunnel.end_programs():
            if p not in facts.programs:
                lacking[f"{p}{f' ({tunnel.packages[p]})' if p in tunnel.packages else ''}"] = None
    return list(lacking)


def can_build(kind: TunnelKind, facts: probes.Facts) -> tuple[bool | None, str]:
    """Whether a host can be an end of ``kind`` built by tunnelbench (None: cannot
    tell), and why: the programs its ends run, then a kernel link's module and ``ip``."""
    if lacking := lacking_programs(kind, facts):
        return False, "; ".join(f"{p} is not installed" for p in lacking)
    if kind in software.BUILT_KINDS:
        return facts.software.can_build(kind)
    tunnel = TUNNELS.get(kind)
    used = tunnel.end_programs()
    daemons = tunnel.auto_order[1:]
    if tunnel.kernel_module is not None and daemons:  # the kernel's, else a userspace daemon
        if facts.software.has_module(tunnel.kernel_module):
            used += (f"the kernel's {tunnel.display}",)
        elif found := [d for d in daemons if d in facts.programs]:
            used += (found[0],)
        else:
            return False, (
                f"no {tunnel.display} module in its kernel and no {' or '.join(daemons)}"
            )
    return True, "runs " + ", ".join(
        f"{p} ({facts.programs[p]})" if p in facts.programs else p for p in used
    )


def missing(
    hosts: HostsFile,
    facts: dict[str, probes.Facts],
    generators: Iterable[Generator] = (),
    kinds: Iterable[TunnelKind] = (),
) -> list[str]:
    """What a run with this hosts file (driving ``generators``; iperf3 where none are
    named; building ``kinds``, the hosts file's where none are named) would be refused
    for, host by host."""
    problems = []
    for generator in sorted(set(generators) or {Generator.IPERF3}):
        program = "iperf3" if generator is Generator.IPERF3 else "iperf"
        problems += [
            f"{role}: {generator.value} is not installed (its PATH has no {program})"
            for role in ("client", "server")
            if program not in facts[role].programs
        ]
    if hosts.tunnel.mode is TunnelMode.BUILD:
        for kind in dict.fromkeys(kinds or [hosts.tunnel.kind]):
            problems += _unbuildable(hosts, facts, kind)
    for role in hosts.roles[1:-1]:
        if role in facts and facts[role].forwarding is False:  # a black box's is unknown
            problems.append(
                f"{role}: IPv4 forwarding is off (net.ipv4.ip_forward = 0); the router must"
                " forward, and tunnelbench does not turn it on"
            )
    return problems


def _unbuildable(hosts: HostsFile, facts: dict[str, probes.Facts], kind: TunnelKind) -> list[str]:
    """What the tunnel's ends lack to build ``kind`` (:func:`missing`)."""
    problems = []
    protection = hosts.tunnel.protection
    for role in hosts.tunnel.ends:
        lacking = lacking_programs(kind, facts[role], protection)
        what = "the tunnel" if protection is Protection.NONE else f"the tunnel or its {protection}"
        problems += [f"{role}: {tool} is not installed; it sets up {what}" for tool in lacking]
        if not lacking and kind in software.BUILT_KINDS:
            able, reason = facts[role].software.can_build(kind)
            if able is False:
                how = (
                    ""
                    if facts[role].software.kernel_refused(kind)
                    else " (iproute2's ip, or ip-full on OpenWrt, creates it)"
                )
                problems.append(f"{role}: cannot build {kind}: {reason}{how}")
    return problems
