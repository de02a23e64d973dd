"""OpenVPN 2.6: TLS mode over UDP, peer to peer, with a PKI made for each tunnel.

**Mode.** Point-to-point TLS (``--tls-server`` on the right tunnel end, ``--tls-client``
on the left), not ``--server``/``--client``: with exactly one peer, OpenVPN keeps no
routing table of its own, so every packet the lab routes into the device (IPv4 or IPv6,
any prefix) goes to the peer. Server mode would route by inner address and need a pool,
``iroute``\\ s for the networks behind each end and a client-config-dir, all of it
configuration that measures nothing. OpenVPN 2.6 still negotiates the data channel in
p2p mode (``P2P mode NCP``, with ``DATA_V2`` packets and TLS key export), so the packets
are those of server mode: opcode + peer id 4, packet id 4, tag 16 (52 bytes over IPv4).

**Where it runs.** :meth:`OpenVpn.build` acts through a
:class:`~tunnelbench.tunnels.site.Site`: the namespace lab and the hosts of a hosts file
alike. Each end's daemon is started on its host, its log read there, its credentials
(:mod:`tunnelbench.tunnels.openvpn_pki`) written there; each end decides DCO from its
own kernel and its own openvpn.

**Addresses and MTU.** ``--ifconfig-noexec``/``--route-noexec``: OpenVPN only opens the
device; :meth:`Tunnel.address_and_route` gives it the lab's addresses, routes and MTU as
for every other tunnel. ``--tun-mtu`` is the tunnel MTU (the WAN MTU minus 52 by
default, so a full inner packet fills the WAN link unfragmented), ``--mssfix 0`` and no
``--fragment``: TCP's segment size follows the device MTU the trial configured, not
OpenVPN's own clamp (by default it clamps the MSS so the encapsulated packet is at most
1492 bytes).

**Cipher.** ``--data-ciphers`` and ``--cipher`` name only the cipher asked for; the
daemons' logs say what the data channel negotiated (``Data Channel: cipher '...'``), and
anything else fails the set-up: a benchmark must not measure another cipher silently.

**DCO.** When an end's kernel has ovpn-dco (its generic netlink family answers) and its
openvpn was built with it, the data channel runs in the kernel; else ``--disable-dco``.
Either way the trial records ``openvpn_dco`` and the reason, and the device's kind (a
TUN device or not) is checked against it, since openvpn quietly falls back to userspace
when an option rules DCO out.

Everything else is OpenVPN's default (socket buffers, ``--txqueuelen``, no
``--fast-io``): what a user gets.
"""

import functools
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from tunnelbench.errors import LabError
from tunnelbench.kinds import Cipher, TunnelKind
from tunnelbench.lab.host import SAME_AS_STDOUT, Host
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.model.kindfacts import KernelPath, OpenVpnFound, SetupFound, TunnelFacts
from tunnelbench.system import probing, programs, versions
from tunnelbench.system.command import CommandError
from tunnelbench.system.probing import Capabilities, Check
from tunnelbench.tunnels import openvpn_pki as pki
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec
from tunnelbench.tunnels.site import Site

#: The ports each end listens on: OpenVPN's own first (a namespace has it free).
PORTS = range(1194, 1294)
OPENVPN = "openvpn"
#: tunnelbench's cipher names in OpenVPN's spelling; the first is the default.
DATA_CIPHERS = {Cipher.AES_256_GCM: "AES-256-GCM", Cipher.CHACHA20_POLY1305: "CHACHA20-POLY1305"}
UP = "Initialization Sequence Completed"
DATA_CHANNEL = re.compile(r"Data Channel: cipher '([^']+)'")
DCO_FALLBACK = "disabling data channel offload"
START_TIMEOUT = 15.0  # the TLS handshake takes about 1 s; its first retry comes after 2
#: How often the daemons' logs are read while they start (a real host's over SSH).
POLL_S = 0.05
#: Asks an end's kernel for ovpn-dco's netlink family (asking loads the module where it
#: is installed); exit 127: no ``genl`` there to ask with.
DCO_ASK = 'command -v genl >/dev/null 2>&1 || exit 127; exec genl ctrl get name "$0"'
DCO_MODULE_VERSION = "/sys/module/ovpn_dco_v2/version"


@dataclass(frozen=True)
class Dco:
    """Whether the data channel is offloaded to the kernel, and why (or why not)."""

    enabled: bool
    reason: str

    @property
    def device_kind(self) -> str:
        """The kind of link openvpn creates: ovpn-dco's own, or a TUN device."""
        return "ovpn-dco" if self.enabled else "tun"


def dco_choice(kernel: Check, version_line: str) -> Dco:
    """DCO when the kernel has the module and this openvpn was built with it."""
    if "[DCO]" not in version_line:
        return Dco(False, "this openvpn was built without DCO support")
    if kernel.ok:
        return Dco(True, f"the kernel has {kernel.detail}")
    if kernel.ok is None:
        return Dco(False, f"DCO could not be probed ({kernel.detail})")
    return Dco(False, kernel.detail)


def data_cipher(spec: TunnelSpec) -> str:
    """OpenVPN's name of the spec's cipher."""
    if spec.cipher not in DATA_CIPHERS:
        raise LabError(f"tunnel.cipher: openvpn has no data cipher for {spec.cipher}")
    return DATA_CIPHERS[spec.cipher]


@dataclass(frozen=True)
class Peer:
    """One end of the tunnel as its daemon sees it."""

    device: str
    server: bool  # the TLS server (the right tunnel end)
    local: str  # its WAN IPv4 address
    remote: str  # the other end's
    lport: int = PORTS.start
    rport: int = PORTS.start


def daemon_argv(
    binary: str, peer: Peer, credentials: pki.Credentials, mtu: int, cipher: str, dco: Dco
) -> list[str]:
    """The command line of one end's daemon (no configuration file: it is all here)."""
    role = (
        ["--tls-server", "--dh", "none", "--remote-cert-tls", pki.CLIENT]
        if peer.server
        else ["--tls-client", "--remote-cert-tls", pki.SERVER]
    )
    return [
        binary, "--dev", peer.device, "--dev-type", "tun",
        "--proto", "udp4", "--local", peer.local, "--lport", str(peer.lport),
        "--remote", peer.remote, "--rport", str(peer.rport),
        *role,
        "--ca", str(credentials.ca), "--cert", str(credentials.cert),
        "--key", str(credentials.key), "--tls-crypt", str(credentials.tls_crypt),
        "--data-ciphers", cipher, "--cipher", cipher,
        "--tun-mtu", str(mtu), "--mssfix", "0",
        "--ifconfig-noexec", "--route-noexec",
        *([] if dco.enabled else ["--disable-dco"]),
        "--verb", "3",
    ]  # fmt: skip


def negotiated_cipher(log: str) -> str | None:
    """The data channel's cipher as the daemon reported it (the last one, after a
    renegotiation); None before it has."""
    found = DATA_CHANNEL.findall(log)
    return found[-1] if found else None


def check_cipher(role: str, wanted: str, log: str) -> str:
    """The negotiated cipher, which must be the one asked for."""
    got = negotiated_cipher(log)
    if got != wanted:
        raise LabError(
            f"openvpn on {role} negotiated {got or 'no'} data cipher, not {wanted} as "
            "tunnel.cipher asks: the trial would measure another cipher"
        )
    return got


def check_dco(role: str, dco: Dco, log: str, tun: bool) -> None:
    """The device openvpn made is the kind the DCO decision implies: a TUN device
    (``tun``: it has ``/sys/class/net/DEV/tun_flags``) without DCO, else ovpn-dco's own
    (openvpn makes no third kind for ``--dev-type tun``)."""
    kind = "tun" if tun else "ovpn-dco"
    if kind == dco.device_kind:
        return
    fallback = next((line for line in log.splitlines() if DCO_FALLBACK in line), None)
    raise LabError(
        f"openvpn on {role} made a {kind} device, not {dco.device_kind} "
        f"(DCO {'on' if dco.enabled else 'off'}: {dco.reason})"
        + (f": {fallback.strip()}" if fallback else "")
    )


def version_text(output: str, path: str) -> str:
    """``OpenVPN 2.6.14, OpenSSL 3.0.19 (/usr/sbin/openvpn)`` from ``openvpn --version``."""
    release = re.search(r"^OpenVPN (\S+)", output, re.M)
    library = re.search(r"library versions: (\S+ \S+)", output)
    text = f"OpenVPN {release.group(1)}" if release else "OpenVPN (unknown version)"
    return f"{text}{', ' + library.group(1) if library else ''} ({path})"


@functools.cache
def _version_output(binary: str) -> str:
    return versions.ask([binary, "--version"], check=False).stdout


def kernel_dco(host: Host) -> Check:
    """Whether ``host``'s kernel has ovpn-dco: its netlink family answers (detail: the
    module's version), does not (why), or no ``genl`` could ask (None)."""
    asked = host.run(["sh", "-c", DCO_ASK, probing.OPENVPN_DCO_FAMILY], check=False)
    if asked.returncode == 127:
        return Check(None, "genl is not installed")
    if asked.returncode != 0:
        return Check(False, probing.dco_refusal(probing.refusal(asked.stderr)))
    version = host.run(["cat", DCO_MODULE_VERSION], check=False).stdout.strip()
    return Check(True, f"ovpn-dco {version}" if version else "ovpn-dco")


def dco_at(host: Host, binary: str) -> Dco:
    """The DCO decision for the end on ``host``: its kernel and its openvpn's build."""
    shown = host.run([binary, "--version"], check=False)
    line = probing.version_line(shown.stdout, shown.stderr)
    if "[DCO]" not in line:
        return dco_choice(Check(None, "not asked"), line)
    return dco_choice(kernel_dco(host), line)


class OpenVpn(Tunnel):
    kind = TunnelKind.OPENVPN
    implementations: ClassVar[tuple[str, ...]] = (OPENVPN,)
    # Both of its AEADs add the same bytes (no padding): the cipher does not matter here.
    encapsulation = Encapsulation.OPENVPN  # outer IP + UDP 8 + opcode 4 + packet id 4 + tag 16
    display = "OpenVPN"
    packages: ClassVar[Mapping[str, str]] = {OPENVPN: "openvpn", "openssl": "openssl"}
    # Its data channel runs in the openvpn process unless DCO moved it into the kernel,
    # which only set-up finds out (``openvpn_dco`` in the trial's record).
    userspace_implementations: ClassVar[tuple[str, ...]] = (OPENVPN,)
    ciphers: ClassVar[tuple[Cipher, ...]] = tuple(DATA_CIPHERS)

    def facts(self, spec: TunnelSpec, found: SetupFound | None = None) -> TunnelFacts:
        """As every kind's; the data channel is the kernel's when set-up found DCO on,
        and ovpn-dco encrypts through the kernel's crypto API."""
        facts = super().facts(spec, found)
        openvpn = found.openvpn if found is not None else None
        if openvpn is not None and openvpn.dco:
            return replace(facts, userspace=False, kernel_crypto_api=True)
        dco = KernelPath(
            name="OpenVPN's data channel offload (ovpn-dco)",
            suggestion="let OpenVPN's data channel run in the kernel with ovpn-dco"
            " (openvpn-dco-dkms; tunnelbench uses it when the kernel has it)",
            why="without DCO every packet crosses into the openvpn process and back",
            capability=("openvpn_dco", ""),
            not_used=openvpn.dco_reason if openvpn is not None else None,
        )
        return replace(facts, kernel_path=dco)

    def kernel_offload(self, caps: Capabilities) -> str | None:
        openvpn = caps.programs.get(OPENVPN)
        if openvpn is not None and dco_choice(caps.openvpn_dco, openvpn.version).enabled:
            return "openvpn's data channel runs in the kernel here (DCO)"
        return None

    def programs(self, implementation: str) -> list[tuple[str, str]]:
        return [(OPENVPN, "OpenVPN"), ("openssl", "the lab's OpenVPN certificates")]

    def end_programs(self) -> tuple[str, ...]:
        return (OPENVPN, "ip")

    def version(self, implementation: str) -> str:
        binary = programs.require(OPENVPN, "OpenVPN")
        return version_text(_version_output(binary), binary)

    def setup(self, lab: Site, spec: TunnelSpec) -> TunnelHandle:
        handle = self.build(lab, spec)
        handle.version = self.version(OPENVPN)
        return handle

    def build(self, site: Site, spec: TunnelSpec) -> TunnelHandle:
        """Credentials made here and handed to each end; the TLS server (the right end)
        started first, so the client's first hello finds it; both awaited until their
        logs say the data channel is up with the cipher asked for; the devices checked
        against each end's DCO decision, then addressed and routed. Versions are the
        caller's to record (on real hosts, each end's own)."""
        cipher = data_cipher(spec)
        openssl = programs.require("openssl", "the OpenVPN tunnel's certificates")
        left, right = site.tunnel_ends
        ends = (right, left)  # the TLS server first
        binaries = {role: site.program(role, OPENVPN, "OpenVPN") for role in ends}
        dco = {role: dco_at(site.host(role), binaries[role]) for role in ends}
        handle = TunnelHandle(self.kind, spec.implementation, "", spec.mtu)
        handle.found.openvpn = dco_found(dco)
        made = pki.make(openssl, f"tunnelbench-{site.ifname('ov')}")
        ports = {role: site.free_udp_port(role, PORTS) for role in ends}
        procs, logs = {}, {}
        for role in ends:
            peer_role = left if role == right else right
            device = site.ifname(f"ov{role[0]}{role[-1]}")
            underlay = site.wan_underlay(role)
            peer = Peer(
                device,
                role == right,
                underlay.local,
                underlay.remote,
                ports[role],
                ports[peer_role],
            )
            own = pki.SERVER if peer.server else pki.CLIENT
            credentials = pki.install(site, role, made, own)
            argv = daemon_argv(binaries[role], peer, credentials, spec.mtu, cipher, dco[role])
            logs[role] = site.files(role) / f"{device}.log"
            host = site.host(role)
            procs[role] = host.spawn(argv, stdout=logs[role], stderr=SAME_AS_STDOUT)
            handle.devices[role] = device
            handle.logs.append(logs[role])
        for role in ends:
            daemon = site.await_daemon(role, procs[role], OPENVPN, logs[role], handle.devices[role])
            if daemon is not None:  # the runner samples the CPU of every daemon held here
                handle.daemons[role] = daemon
        texts = wait_until_up(site, procs, logs)
        for role in (left, right):
            negotiated = check_cipher(role, cipher, texts[role])
            handle.found.openvpn = replace(handle.found.openvpn, data_cipher=negotiated)
            device = handle.devices[role]
            tun = (
                site.host(role)
                .run(["cat", f"/sys/class/net/{device}/tun_flags"], check=False)
                .returncode
                == 0
            )
            check_dco(role, dco[role], texts[role], tun)
            self.address_and_route(site, role, device, spec.mtu)
        return handle


def dco_found(dco: Mapping[str, Dco]) -> OpenVpnFound:
    """The trial's record of DCO: on only where every end offloads; the reason, or each
    end's where they differ."""
    reasons = {d.reason for d in dco.values()}
    reason = (
        next(iter(reasons))
        if len(reasons) == 1
        else "; ".join(f"{role}: {d.reason}" for role, d in sorted(dco.items()))
    )
    return OpenVpnFound(all(d.enabled for d in dco.values()), reason)


def wait_until_up(
    site: Site,
    procs: "Mapping[str, subprocess.Popen[bytes]]",
    logs: Mapping[str, Path],
    timeout: float = START_TIMEOUT,
) -> dict[str, str]:
    """Wait until every daemon's log (read on its host) says it is up and names its data
    cipher; return the logs. A daemon that exits or is not up in time is a
    :class:`LabError` with its log's last lines."""
    deadline = time.monotonic() + timeout
    texts: dict[str, str] = {}
    pending = set(procs)
    while pending:
        for role in sorted(pending):
            text = _read(site.host(role), logs[role])
            if UP in text and negotiated_cipher(text) is not None:
                texts[role] = text
                pending.discard(role)
            elif procs[role].poll() is not None:
                raise LabError(f"openvpn on {role} exited during start-up: {_tail(text)}")
        if pending and time.monotonic() > deadline:
            role = sorted(pending)[0]
            text = _read(site.host(role), logs[role])
            raise LabError(f"openvpn on {role} was not up within {timeout:g} s: {_tail(text)}")
        if pending:
            time.sleep(POLL_S)
    return texts


def _read(host: Host, log: Path) -> str:
    """A daemon's log so far; empty before the daemon has made it."""
    try:
        return host.read(log)
    except (OSError, CommandError):
        return ""


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:]) or "no output"
