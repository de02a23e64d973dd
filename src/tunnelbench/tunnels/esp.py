"""ESP between a lab's two tunnel ends, negotiated by strongSwan: the machinery behind
``tunnel.kind = "ipsec"`` and ``tunnel.protection = "ipsec"``.

A :class:`Session` runs one isolated charon per tunnel end (see
:mod:`tunnelbench.tunnels.strongswan`), IKEv2 between the ends' WAN addresses with a
pre-shared key made for this lab, and waits until every CHILD_SA is installed at both
ends with the cipher, mode and encapsulation asked for -- anything else is an error, not
a result. Who carries the packets:

- ``libipsec``: charon's kernel-libipsec plugin, in userspace, through the TUN device
  ``ipsec0`` of each end's namespace; tunnel mode, ESP in UDP 4500. Packets reach it by
  being routed into ``ipsec0`` (the lab routes them; the plugin also adds its own
  routes to table 220, through the same device).
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

import functools
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.kinds import Cipher, EspMode
from tunnelbench.lab.daemon import tail, wait_for_device
from tunnelbench.lab.host import SAME_AS_STDOUT
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.state import ProcessRecord, is_alive
from tunnelbench.lab.topology import Underlay
from tunnelbench.model import encapsulation as model
from tunnelbench.model.kindfacts import EspFound
from tunnelbench.system import programs, versions
from tunnelbench.system.command import CommandError
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
    """ESP between the lab's two tunnel ends: one charon each, then the SAs.

    :meth:`start` brings the daemons (and the ESP devices) up; the caller addresses and
    routes the devices; :meth:`establish` loads the connection, initiates it from the
    left end and checks what was installed. What it learnt is in ``found``.
    """

    lab: Lab
    implementation: str
    cipher: Cipher
    mode: EspMode
    daemons: dict[str, ProcessRecord] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # role -> ESP device, if any
    logs: list[Path] = field(default_factory=list)
    found: EspFound | None = None

    @property
    def ends(self) -> tuple[str, str]:
        return self.lab.chain.tunnel_ends

    def directory(self, role: str) -> Path:
        return self.lab.directory / f"strongswan-{role}"

    def log(self, role: str) -> Path:
        return self.lab.directory / f"charon-{role}.log"

    def start(self, device_mtu: int | None) -> None:
        """Start both daemons, wait for them, and give the ESP devices ``device_mtu``.

        libipsec's device is its TUN ``ipsec0``; kernel tunnel mode gets an XFRM
        interface; kernel transport mode has no device (``device_mtu`` None).
        """
        if self.implementation == KERNEL and self.mode is EspMode.TUNNEL:
            for role in self.ends:
                self._add_xfrm_interface(role)
        for role in self.ends:
            self._start(role)
        for role in self.ends:
            self._wait_until_up(role)
            if self.implementation == LIBIPSEC:
                device = strongswan.LIBIPSEC_DEVICE
                wait_for_device(self.daemons[role], "charon", device, self.log(role))
                self.devices[role] = device
        if device_mtu is not None:
            for role, device in self.devices.items():
                self.lab.ip_batch(role, [["link", "set", device, "mtu", str(device_mtu), "up"]])

    def _add_xfrm_interface(self, role: str) -> None:
        device = self.lab.ifname(f"es{role[0]}{role[-1]}")
        self.lab.ip_batch(role, [xfrm_interface_command(device, self.lab.wan_device(role))])
        self.devices[role] = device

    def _start(self, role: str) -> None:
        lab, directory, host = self.lab, self.directory(role), self.lab.host(role)
        host.make_directory(directory, mode=0o700)
        for name in (strongswan.PIDFILE, strongswan.VICI):  # the daemon's own files
            host.record(directory / name, kind="file")
        host.write(directory / strongswan.CONF, strongswan.strongswan_conf(self.implementation))
        log = self.log(role)
        host.record(log, kind="file")
        charon = programs.require(strongswan.CHARON, "strongSwan's IKE daemon")
        proc = lab.start(
            role, strongswan.daemon_argv(directory, charon), stdout=log, stderr=SAME_AS_STDOUT
        )
        self.daemons[role] = next(r for r in lab.state.processes if r.pid == proc.pid)
        self.logs.append(log)

    def _wait_until_up(self, role: str) -> None:
        """Until charon's vici socket exists and its pid file names the recorded process
        (so the PID the lab samples, limits and ends is the daemon's own)."""
        daemon, directory = self.daemons[role], self.directory(role)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if not is_alive(daemon):
                raise LabError(f"charon on {role} exited during start-up: {tail(self.log(role))}")
            written = _read(directory / strongswan.PIDFILE)
            if written and (directory / strongswan.VICI).exists():
                if written != str(daemon.pid):
                    raise LabError(
                        f"charon on {role} has pid {written}, not the recorded {daemon.pid}"
                    )
                return
            if time.monotonic() > deadline:
                raise LabError(
                    f"charon on {role} did not open its vici socket within "
                    f"{START_TIMEOUT:g} s: {tail(self.log(role))}"
                )
            time.sleep(0.01)

    def establish(self, children: Mapping[str, tuple[Child, ...]]) -> None:
        """Load each end's connection (``children`` by role), initiate every CHILD_SA
        from the left end, and wait until both ends have them installed as asked."""
        psk = secrets.token_hex(32)
        left = self.ends[0]
        for role in self.ends:
            path = self.lab.directory / f"swanctl-{role}.conf"
            text = strongswan.swanctl_conf(self.connection(role, children[role]), psk)
            self.lab.host(role).write(path, text, mode=0o600)  # it holds the PSK
            self._swanctl(role, "--load-all", "--file", str(path))
        for child in children[left]:
            self._swanctl(
                left, "--initiate", "--child", child.name, "--timeout", f"{INSTALL_TIMEOUT:g}"
            )
        installed = {
            role: self._wait_until_installed(role, len(children[role])) for role in self.ends
        }
        self._check(installed)

    def connection(self, role: str, children: tuple[Child, ...]) -> Connection:
        """``role``'s end of the IKE connection, between the two WAN addresses."""
        left, right = self.ends
        peer = right if role == left else left
        return Connection(
            local_addr=self.lab.address(role, peer, 4),
            remote_addr=self.lab.address(peer, role, 4),
            children=children,
            cipher=self.cipher,
            mode=self.mode,
            encap=strongswan.encapsulated(self.implementation),
            if_id=IF_ID if self.implementation == KERNEL and self.mode is EspMode.TUNNEL else None,
        )

    def _swanctl(self, role: str, *args: str) -> str:
        argv = strongswan.swanctl_argv(self.directory(role), *args)
        try:
            return self.lab.exec(role, argv, timeout=INSTALL_TIMEOUT + 5).stdout
        except CommandError as exc:
            said = [line for line in (exc.stderr + "\n").splitlines() if line.strip()]
            raise LabError(
                f"swanctl {args[0]} on {role} failed: {said[-1] if said else 'no output'}; "
                f"charon: {tail(self.log(role))}"
            ) from exc

    def list_sas(self, role: str) -> list[strongswan.ChildSa]:
        """The CHILD_SAs of ``role``'s daemon, with their counters."""
        return strongswan.child_sas(self._swanctl(role, "--list-sas", "--raw"))

    def _wait_until_installed(self, role: str, count: int) -> list[strongswan.ChildSa]:
        deadline = time.monotonic() + INSTALL_TIMEOUT
        while True:
            found = [sa for sa in self.list_sas(role) if sa.state == "INSTALLED"]
            if len(found) >= count:
                return found
            if not is_alive(self.daemons[role]):
                raise LabError(f"charon on {role} exited: {tail(self.log(role))}")
            if time.monotonic() > deadline:
                raise LabError(
                    f"ESP on {role}: {len(found)} of {count} CHILD_SA installed after "
                    f"{INSTALL_TIMEOUT:g} s; charon: {tail(self.log(role))}"
                )
            time.sleep(0.05)

    def _check(self, installed: dict[str, list[strongswan.ChildSa]]) -> None:
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
            version=charon_version(),
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


def xfrm_interface_command(device: str, wan_device: str) -> list[str]:
    """The XFRM interface kernel tunnel mode routes into (its SAs carry ``IF_ID``)."""
    return ["link", "add", device, "type", "xfrm", "dev", wan_device, "if_id", str(IF_ID)]


@functools.cache
def charon_version() -> str:
    """``strongSwan 5.9.8``, from the daemon itself."""
    charon = programs.require(strongswan.CHARON, "strongSwan's IKE daemon")
    done = versions.ask([charon, "--version"])
    return f"strongSwan {strongswan.version(done.stdout + done.stderr)}"


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


# --- protection: ESP around an unencrypted tunnel ---


def protected_ends(
    lab: Lab, mode: EspMode, protocol: str
) -> dict[str, tuple[Underlay, tuple[Child, ...]]]:
    """Per tunnel end: where the protected tunnel runs, and the CHILD_SA protecting it.

    Tunnel mode: between the ends' ESP endpoint addresses, which the SA protects exactly.
    Transport mode: between the WAN addresses, as without protection; the SA protects
    every ``protocol`` packet between them (IKE's own UDP packets are exempt: charon's
    sockets bypass IPsec policies).
    """
    left, right = lab.chain.tunnel_ends
    ends: dict[str, tuple[Underlay, tuple[Child, ...]]] = {}
    for role in (left, right):
        if mode is EspMode.TRANSPORT:
            selector = (f"dynamic[{protocol}]",)
            child = Child(strongswan.CONNECTION, selector, selector)
            ends[role] = (lab.wan_underlay(role), (child,))
        else:
            own, peer = endpoint(role == left), endpoint(role != left)
            child = Child(strongswan.CONNECTION, (f"{own}/32",), (f"{peer}/32",))
            ends[role] = (Underlay(own, peer, None), (child,))
    return ends


def protect(lab: Lab, spec: TunnelSpec, protocol: str) -> tuple[dict[str, Underlay], Session]:
    """Put a tunnel whose packets are ``protocol`` (``udp``, ``gre``) in ESP.

    Returns where each end's tunnel must run (:func:`protected_ends`), and the running
    :class:`Session`. In tunnel mode each end's endpoint address goes on its ESP device
    (whose MTU is libipsec's maximum, or the WAN's minus ESP for the kernel), with a
    route to the peer's through it.
    """
    assert spec.esp_implementation is not None and spec.cipher is not None
    session = Session(lab, spec.esp_implementation, spec.cipher, spec.esp_mode)
    ends = protected_ends(lab, spec.esp_mode, protocol)
    tunnel_mode = spec.esp_mode is EspMode.TUNNEL
    session.start(device_mtu=esp_device_mtu(lab.settings.wan.ip_mtu, spec) if tunnel_mode else None)
    if tunnel_mode:
        for role, (underlay, _) in ends.items():
            device = session.devices[role]
            lab.ip_batch(
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
    ESP's daemons and facts, and is named by who does ESP (the daemons doing the work).
    ESP is built in the lab only (real hosts are given no ``tunnel.protection``)."""
    if not spec.esp:
        return {role: site.wan_underlay(role) for role in site.tunnel_ends}
    assert protocol is not None  # every protectable kind names the protocol ESP protects
    assert isinstance(site, Lab), "ESP protection is built in the namespace lab only"
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
