"""ESP between a site's two tunnel ends, negotiated by strongSwan: the machinery behind
``tunnel.kind = "ipsec"`` and ``tunnel.protection = "ipsec"``, in the namespace lab and
on the hosts of a hosts file alike (it acts through :mod:`tunnelbench.tunnels.site`).

A :class:`Session` runs one isolated charon per tunnel end (see
:mod:`tunnelbench.tunnels.strongswan`), IKEv2 between the ends' WAN addresses and NAT-T
ports with a pre-shared key made for this tunnel, and waits until every CHILD_SA is
installed at both ends with the cipher, mode and encapsulation asked for -- anything
else is an error, not a result. Who carries the packets:

- ``libipsec``: charon's kernel-libipsec plugin, in userspace, through the TUN device
  it makes (``ipsec0`` in a lab's namespace: the first free ``ipsec%d``); tunnel mode,
  ESP in UDP. Packets reach it by being routed into that device (the site routes them;
  the plugin also adds its own routes, through the same device).
- ``kernel``: XFRM, set up by charon's kernel-netlink plugin. Tunnel mode goes through
  an XFRM interface (``ip link add ... type xfrm if_id N``) the lab routes into, so the
  tunnel has a device with counters, like every other kind; transport mode needs none.

:func:`protect` puts an unencrypted tunnel (VXLAN; GRE and gretap once they opt in) in
ESP: in tunnel mode both ends get an extra address, ``198.19.1.1/32`` and
``198.19.1.2/32``, on the ESP device, the SA protects exactly those two, and the
protected tunnel runs between them, so its packets are routed into ESP; in transport
mode (kernel only) the tunnel keeps the WAN addresses and the SA protects its protocol
between them.
"""

import random
import secrets
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.kinds import Cipher, EspMode
from tunnelbench.lab.host import SAME_AS_STDOUT, Host
from tunnelbench.lab.state import ProcessRecord
from tunnelbench.lab.topology import Underlay
from tunnelbench.model import encapsulation as model
from tunnelbench.model.kindfacts import EspFound
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.base import TunnelHandle, TunnelSpec
from tunnelbench.tunnels.site import Site
from tunnelbench.tunnels.strongswan import KERNEL, LIBIPSEC, Child, Connection

#: The two ends of a protected tunnel, in ESP tunnel mode: .1 the left end, .2 the right.
ENDPOINT_V4 = "198.19.1"
#: The XFRM interface id of kernel tunnel mode (one SA pair per lab namespace pair).
IF_ID = 42
#: Seconds for charon to come up, and for the CHILD_SAs to be installed at both ends.
START_TIMEOUT = 10.0
INSTALL_TIMEOUT = 10.0


def endpoint(left: bool) -> str:
    """A protected tunnel's own address at one end (ESP tunnel mode)."""
    return f"{ENDPOINT_V4}.{1 if left else 2}"


@dataclass
class Session:
    """ESP between a site's two tunnel ends: one charon each, then the SAs.

    :meth:`start` brings the daemons (and the ESP devices) up; the caller addresses and
    routes the devices; :meth:`establish` loads the connection, initiates it from the
    left end and checks what was installed. What it learnt is in ``found``. It acts
    through the site alone (:mod:`tunnelbench.tunnels.site`), so the same ESP runs
    between a lab's namespaces and between the hosts of a hosts file.
    """

    site: Site
    implementation: str
    cipher: Cipher
    mode: EspMode
    procs: "dict[str, subprocess.Popen[bytes]]" = field(default_factory=dict)
    daemons: dict[str, ProcessRecord] = field(default_factory=dict)  # where the site samples
    devices: dict[str, str] = field(default_factory=dict)  # role -> ESP device, if any
    ports: dict[str, int] = field(default_factory=dict)  # role -> its charon's NAT-T port
    #: The routing table of both ends' charon (one of strongswan.ROUTING_TABLES).
    routing_table: int = strongswan.ROUTING_TABLE
    logs: list[Path] = field(default_factory=list)
    found: EspFound | None = None
    #: Names this session's files: a site whose tunnel is built again between trials
    #: (real hosts) keeps its files directory.
    tag: str = field(default_factory=lambda: secrets.token_hex(3))

    @property
    def ends(self) -> tuple[str, str]:
        return self.site.tunnel_ends

    def directory(self, role: str) -> Path:
        return self.site.files(role) / f"strongswan-{role}-{self.tag}"

    def log(self, role: str) -> Path:
        return self.site.files(role) / f"charon-{role}-{self.tag}.log"

    def start(self, device_mtu: int | None) -> None:
        """Start both daemons, wait for them, and give the ESP devices ``device_mtu``.

        libipsec's device is the TUN device its daemon made; kernel tunnel mode gets an
        XFRM interface; kernel transport mode has no device (``device_mtu`` None).
        """
        if self.implementation == KERNEL and self.mode is EspMode.TUNNEL:
            for role in self.ends:
                self._add_xfrm_interface(role)
        self.ports = nat_t_ports(self.site)
        self.routing_table = random.choice(strongswan.ROUTING_TABLES)
        for role in self.ends:
            self._start(role)
        for role in self.ends:
            self._wait_until_up(role)
        if device_mtu is not None:
            for role, device in self.devices.items():
                self.site.ip_batch(role, [["link", "set", device, "mtu", str(device_mtu), "up"]])

    def _add_xfrm_interface(self, role: str) -> None:
        device = self.site.ifname(f"es{role[0]}{role[-1]}")
        wan = self.site.wan_underlay(role).device
        assert wan is not None  # a site's WAN underlay names its device
        self.site.ip_batch(role, [xfrm_interface_command(device, wan)])
        self.devices[role] = device

    def _start(self, role: str) -> None:
        directory, host = self.directory(role), self.site.host(role)
        charon = self.site.program(role, strongswan.CHARON, "strongSwan's IKE daemon")
        self.site.program(role, "swanctl", "strongSwan's control tool")
        host.make_directory(directory, mode=0o700)
        for name in (strongswan.PIDFILE, strongswan.VICI):  # the daemon's own files
            host.record(directory / name, kind="file")
        conf = strongswan.strongswan_conf(self.implementation, self.ports[role], self.routing_table)
        host.write(directory / strongswan.CONF, conf)
        self.site.record_removal(role, strongswan.rules_removal(self.routing_table))
        log = self.log(role)
        host.record(log, kind="file")
        argv = strongswan.daemon_argv(directory, charon)
        self.procs[role] = host.spawn(argv, stdout=log, stderr=SAME_AS_STDOUT)
        self.logs.append(log)

    def _wait_until_up(self, role: str) -> None:
        """Until charon's vici socket exists and its pid file is written; in the lab, the
        pid file must name the recorded process (the PID the lab samples, limits and
        ends is the daemon's own). libipsec's device is the TUN device that PID holds
        open: the first free ``ipsec%d``, so on a host that has one it is another."""
        directory, host = self.directory(role), self.site.host(role)
        proc, log = self.procs[role], self.log(role)
        daemon = self.site.await_daemon(
            role, proc, "charon", log, None, socket=directory / strongswan.VICI
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not (written := _read(host, directory / strongswan.PIDFILE)):
            if proc.poll() is not None:
                raise LabError(f"charon on {role} exited during start-up: {_tail(host, log)}")
            if time.monotonic() > deadline:
                raise LabError(f"charon on {role} wrote no pid file: {_tail(host, log)}")
            time.sleep(0.01)
        if daemon is not None:
            if written != str(daemon.pid):
                raise LabError(f"charon on {role} has pid {written}, not the recorded {daemon.pid}")
            self.daemons[role] = daemon
        if self.implementation == LIBIPSEC:
            self.devices[role] = tun_device(host, written, role)

    def establish(self, children: Mapping[str, tuple[Child, ...]]) -> None:
        """Load each end's connection (``children`` by role), initiate every CHILD_SA
        from the left end, and wait until both ends have them installed as asked."""
        psk = secrets.token_hex(32)
        left = self.ends[0]
        for role in self.ends:
            path = self.site.files(role) / f"swanctl-{role}-{self.tag}.conf"
            text = strongswan.swanctl_conf(self.connection(role, children[role]), psk)
            self.site.host(role).write(path, text, mode=0o600)  # it holds the PSK
            self._swanctl(role, "--load-all", "--file", str(path))
        for child in children[left]:
            self._swanctl(
                left, "--initiate", "--child", child.name, "--timeout", f"{INSTALL_TIMEOUT:g}"
            )
        installed = {
            role: self._wait_until_installed(role, len(children[role])) for role in self.ends
        }
        self._check(installed, self._version(left))

    def connection(self, role: str, children: tuple[Child, ...]) -> Connection:
        """``role``'s end of the IKE connection, between the two WAN addresses and the
        two daemons' NAT-T ports."""
        left, right = self.ends
        peer = right if role == left else left
        underlay = self.site.wan_underlay(role)
        return Connection(
            local_addr=underlay.local,
            remote_addr=underlay.remote,
            children=children,
            cipher=self.cipher,
            mode=self.mode,
            encap=strongswan.encapsulated(self.implementation),
            local_port=self.ports.get(role, strongswan.NAT_T_PORT),
            remote_port=self.ports.get(peer, strongswan.NAT_T_PORT),
            if_id=IF_ID if self.implementation == KERNEL and self.mode is EspMode.TUNNEL else None,
        )

    def _swanctl(self, role: str, *args: str) -> str:
        argv = strongswan.swanctl_argv(self.directory(role), *args)
        host = self.site.host(role)
        done = host.run(argv, check=False, timeout=INSTALL_TIMEOUT + 5)
        if done.returncode != 0:
            said = [line for line in (done.stderr + "\n").splitlines() if line.strip()]
            raise LabError(
                f"swanctl {args[0]} on {role} failed: {said[-1] if said else 'no output'}; "
                f"charon: {_tail(host, self.log(role))}"
            )
        return done.stdout

    def list_sas(self, role: str) -> list[strongswan.ChildSa]:
        """The CHILD_SAs of ``role``'s daemon, with their counters."""
        return strongswan.child_sas(self._swanctl(role, "--list-sas", "--raw"))

    def _wait_until_installed(self, role: str, count: int) -> list[strongswan.ChildSa]:
        deadline = time.monotonic() + INSTALL_TIMEOUT
        while True:
            found = [sa for sa in self.list_sas(role) if sa.state == "INSTALLED"]
            if len(found) >= count:
                return found
            exited = self.procs[role].poll() is not None
            if exited or time.monotonic() > deadline:
                said = _tail(self.site.host(role), self.log(role))
                if exited:
                    raise LabError(f"charon on {role} exited: {said}")
                raise LabError(
                    f"ESP on {role}: {len(found)} of {count} CHILD_SA installed after "
                    f"{INSTALL_TIMEOUT:g} s; charon: {said}"
                )
            time.sleep(0.05)

    def _version(self, role: str) -> str:
        """``strongSwan 5.9.8``, from ``role``'s daemon itself."""
        charon = self.site.program(role, strongswan.CHARON, "strongSwan's IKE daemon")
        done = self.site.host(role).run([charon, "--version"], check=False)
        return f"strongSwan {strongswan.version(done.stdout + done.stderr)}"

    def _check(self, installed: dict[str, list[strongswan.ChildSa]], version: str) -> None:
        """Every SA is what was asked: a different cipher, mode or encapsulation would
        measure something else."""
        encap = strongswan.encapsulated(self.implementation)
        for role, sas in installed.items():
            for sa in sas:
                if sa.cipher is not self.cipher:
                    raise LabError(
                        f"ESP on {role} negotiated {sa.algorithm}, not the asked "
                        f"{self.cipher.value} ({strongswan.ESP_PROPOSALS[self.cipher]})"
                    )
                if sa.mode != self.mode.value.upper() or sa.encap != encap:
                    raise LabError(
                        f"ESP on {role} is {sa.mode} mode, encap={sa.encap}; asked "
                        f"{self.mode.value.upper()} mode, encap={encap}"
                    )
        algorithm = next(iter(installed.values()))[0].algorithm
        self.found = EspFound(
            implementation=self.implementation,
            version=version,
            cipher=self.cipher.value,
            algorithm=algorithm,
            mode=self.mode.value,
            encapsulation="udp" if encap else "none",
        )

    def record(self, handle: TunnelHandle) -> None:
        """Hand the daemons, logs and what was found to the tunnel's handle."""
        handle.daemons |= self.daemons
        handle.logs += self.logs
        handle.found.esp = self.found


def nat_t_ports(site: Site) -> dict[str, int]:
    """Each end's NAT-T port: 4500 where every end has it free, else a free one of
    :data:`~tunnelbench.tunnels.strongswan.NAT_T_PORTS` each (a host's own IKE daemon
    holds 4500; ours runs beside it)."""
    standard = range(strongswan.NAT_T_PORT, strongswan.NAT_T_PORT + 1)
    try:
        return {role: site.free_udp_port(role, standard) for role in site.tunnel_ends}
    except LabError:
        return {role: site.free_udp_port(role, strongswan.NAT_T_PORTS) for role in site.tunnel_ends}


def tun_device(host: Host, pid: str, role: str) -> str:
    """The TUN device process ``pid`` holds open: the kernel names it in the fdinfo of
    the process's ``/dev/net/tun`` descriptor (``iff:``)."""
    script = f'cat /proc/{int(pid)}/fdinfo/* 2>/dev/null | grep "^iff:"'
    found = host.run(["sh", "-c", script], check=False).stdout.split()
    names = found[1::2] if found[:1] == ["iff:"] else []
    if len(names) != 1:
        raise LabError(
            f"charon on {role} (pid {pid}) holds {len(names)} TUN devices"
            f"{': ' + ', '.join(names) if names else ''}; kernel-libipsec makes one"
        )
    return names[0]


def xfrm_interface_command(device: str, wan_device: str) -> list[str]:
    """The XFRM interface kernel tunnel mode routes into (its SAs carry ``IF_ID``)."""
    return ["link", "add", device, "type", "xfrm", "dev", wan_device, "if_id", str(IF_ID)]


def _read(host: Host, path: Path) -> str:
    """A file the daemon writes, stripped; empty before it has (read with ``cat``: the
    lab's and a host's ``read`` fail differently on a missing file)."""
    done = host.run(["cat", str(path)], check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def _tail(host: Host, log: Path, lines: int = 3) -> str:
    """A daemon's log's last lines, read on its host."""
    text = _read(host, log)
    return " | ".join(text.splitlines()[-lines:]) or "no log"


# --- protection: ESP around an unencrypted tunnel ---


def protected_ends(
    site: Site, mode: EspMode, protocol: str
) -> dict[str, tuple[Underlay, tuple[Child, ...]]]:
    """Per tunnel end: where the protected tunnel runs, and the CHILD_SA protecting it.

    Tunnel mode: between the ends' ESP endpoint addresses, which the SA protects exactly.
    Transport mode: between the WAN addresses, as without protection; the SA protects
    every ``protocol`` packet between them (IKE's own UDP packets are exempt: charon's
    sockets bypass IPsec policies).
    """
    left, right = site.tunnel_ends
    ends: dict[str, tuple[Underlay, tuple[Child, ...]]] = {}
    for role in (left, right):
        if mode is EspMode.TRANSPORT:
            selector = (f"dynamic[{protocol}]",)
            child = Child(strongswan.CONNECTION, selector, selector)
            ends[role] = (site.wan_underlay(role), (child,))
        else:
            own, peer = endpoint(role == left), endpoint(role != left)
            child = Child(strongswan.CONNECTION, (f"{own}/32",), (f"{peer}/32",))
            ends[role] = (Underlay(own, peer, None), (child,))
    return ends


def protect(site: Site, spec: TunnelSpec, protocol: str) -> tuple[dict[str, Underlay], Session]:
    """Put a tunnel whose packets are ``protocol`` (``udp``, ``gre``) in ESP.

    Returns where each end's tunnel must run (:func:`protected_ends`), and the running
    :class:`Session`. In tunnel mode each end's endpoint address goes on its ESP device
    (whose MTU is libipsec's maximum, or the WAN's minus ESP for the kernel), with a
    route to the peer's through it.
    """
    assert spec.esp_implementation is not None and spec.cipher is not None
    session = Session(site, spec.esp_implementation, spec.cipher, spec.esp_mode)
    ends = protected_ends(site, spec.esp_mode, protocol)
    tunnel_mode = spec.esp_mode is EspMode.TUNNEL
    session.start(device_mtu=esp_device_mtu(site.underlay_mtu(), spec) if tunnel_mode else None)
    if tunnel_mode:
        for role, (underlay, _) in ends.items():
            device = session.devices[role]
            site.ip_batch(
                role,
                [
                    ["address", "add", f"{underlay.local}/32", "dev", device],
                    ["route", "add", f"{underlay.remote}/32", "dev", device, "src", underlay.local],
                ],
            )
    session.establish({role: children for role, (_, children) in ends.items()})
    return {role: underlay for role, (underlay, _) in ends.items()}, session


def underlays(
    site: Site, spec: TunnelSpec, protocol: str | None, handle: TunnelHandle
) -> dict[str, Underlay]:
    """Where each end of an unencrypted tunnel runs: between the WAN addresses, or with
    ``tunnel.protection = "ipsec"`` where :func:`protect` puts it; then the handle holds
    ESP's daemons and facts, and is named by who does ESP (the daemons doing the work)."""
    if not spec.esp:
        return {role: site.wan_underlay(role) for role in site.tunnel_ends}
    assert protocol is not None  # every protectable kind names the protocol ESP protects
    ends, session = protect(site, spec, protocol)
    session.record(handle)
    handle.implementation = session.implementation
    return ends


def esp_device_mtu(wan_mtu: int, spec: TunnelSpec) -> int:
    """The largest packet ESP (tunnel mode, padding included) fits in the WAN unfragmented;
    for libipsec at most what it reads from its TUN device (1400)."""
    assert spec.esp_implementation is not None and spec.cipher is not None
    kind, options = strongswan.esp_model(spec.esp_implementation, spec.cipher, spec.esp_mode)
    fits = model.default_tunnel_mtu(kind, wan_mtu, inner_family=4, outer_family=4, options=options)
    if spec.esp_implementation == LIBIPSEC:
        return min(fits, strongswan.LIBIPSEC_MAX_MTU)
    return fits
