"""OpenVPN 2.6: TLS mode over UDP, peer to peer, with a PKI made for each lab.

**Mode.** Point-to-point TLS (``--tls-server`` on the right tunnel end, ``--tls-client``
on the left), not ``--server``/``--client``: with exactly one peer, OpenVPN keeps no
routing table of its own, so every packet the lab routes into the device (IPv4 or IPv6,
any prefix) goes to the peer. Server mode would route by inner address and need a pool,
``iroute``\\ s for the networks behind each end and a client-config-dir, all of it
configuration that measures nothing. OpenVPN 2.6 still negotiates the data channel in
p2p mode (``P2P mode NCP``, with ``DATA_V2`` packets and TLS key export), so the packets
are those of server mode: opcode + peer id 4, packet id 4, tag 16 (52 bytes over IPv4).

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

**DCO.** When the kernel has ovpn-dco (``capabilities.openvpn_dco``) and openvpn was
built with it, the data channel runs in the kernel; else ``--disable-dco``. Either way
the trial records ``openvpn_dco`` and the reason, and the device's kind (``ovpn-dco`` or
``tun``) is checked against it, since openvpn quietly falls back to userspace when an
option rules DCO out.

Everything else is OpenVPN's default (socket buffers, ``--txqueuelen``, no
``--fast-io``): what a user gets.
"""

import functools
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from tunnelbench.errors import LabError
from tunnelbench.kinds import Cipher, TunnelKind
from tunnelbench.lab.daemon import tail
from tunnelbench.lab.host import SAME_AS_STDOUT
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.state import ProcessRecord, is_alive
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.model.kindfacts import TunnelFacts
from tunnelbench.system import probing, programs, versions
from tunnelbench.system.probing import Capabilities, Check
from tunnelbench.tunnels import openvpn_pki as pki
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec

PORT = 1194
OPENVPN = "openvpn"
#: tunnelbench's cipher names in OpenVPN's spelling; the first is the default.
DATA_CIPHERS = {Cipher.AES_256_GCM: "AES-256-GCM", Cipher.CHACHA20_POLY1305: "CHACHA20-POLY1305"}
UP = "Initialization Sequence Completed"
DATA_CHANNEL = re.compile(r"Data Channel: cipher '([^']+)'")
DCO_FALLBACK = "disabling data channel offload"
START_TIMEOUT = 15.0  # the TLS handshake takes about 1 s; its first retry comes after 2


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


def daemon_argv(
    binary: str, peer: Peer, credentials: pki.Credentials, mtu: int, cipher: str, dco: Dco
) -> list[str]:
    """The command line of one end's daemon (no configuration file: it is all here)."""
    own = pki.SERVER if peer.server else pki.CLIENT
    role = (
        ["--tls-server", "--dh", "none", "--remote-cert-tls", pki.CLIENT]
        if peer.server
        else ["--tls-client", "--remote-cert-tls", pki.SERVER]
    )
    return [
        binary, "--dev", peer.device, "--dev-type", "tun",
        "--proto", "udp4", "--local", peer.local, "--lport", str(PORT),
        "--remote", peer.remote, "--rport", str(PORT),
        *role,
        "--ca", str(credentials.ca), "--cert", str(credentials.certs[own]),
        "--key", str(credentials.keys[own]), "--tls-crypt", str(credentials.tls_crypt),
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


def check_dco(role: str, dco: Dco, log: str, link: dict[str, object]) -> None:
    """The device openvpn made is the kind the DCO decision implies."""
    info = link.get("linkinfo")
    kind = info.get("info_kind") if isinstance(info, dict) else None
    if kind == dco.device_kind:
        return
    fallback = next((line for line in log.splitlines() if DCO_FALLBACK in line), None)
    raise LabError(
        f"openvpn on {role} made a {kind or 'unknown'} device, not {dco.device_kind} "
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

    def facts(self, spec: TunnelSpec, found: Mapping[str, Any] | None = None) -> TunnelFacts:
        """As every kind's; the data channel is the kernel's when set-up found DCO on,
        and ovpn-dco encrypts through the kernel's crypto API."""
        facts = super().facts(spec, found)
        if found is not None and found.get("openvpn_dco") is True:
            return replace(facts, userspace=False, kernel_crypto_api=True)
        return facts

    def kernel_offload(self, caps: Capabilities) -> str | None:
        openvpn = caps.programs.get(OPENVPN)
        if openvpn is not None and dco_choice(caps.openvpn_dco, openvpn.version).enabled:
            return "openvpn's data channel runs in the kernel here (DCO)"
        return None

    def programs(self, implementation: str) -> list[tuple[str, str]]:
        return [(OPENVPN, "OpenVPN"), ("openssl", "the lab's OpenVPN certificates")]

    def version(self, implementation: str) -> str:
        binary = programs.require(OPENVPN, "OpenVPN")
        return version_text(_version_output(binary), binary)

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        binary = programs.require(OPENVPN, "OpenVPN")
        openssl = programs.require("openssl", "the lab's OpenVPN certificates")
        cipher = data_cipher(spec)
        dco = dco_choice(probing.openvpn_dco(), _version_output(binary))
        handle = TunnelHandle(self.kind, spec.implementation, self.version(OPENVPN), spec.mtu)
        handle.facts |= {"openvpn_dco": dco.enabled, "openvpn_dco_reason": dco.reason}
        credentials = pki.create(lab, openssl, binary)
        left, right = lab.chain.tunnel_ends
        logs: dict[str, Path] = {}
        for role in (right, left):  # the TLS server first: the client's hello finds it
            peer_role = left if role == right else right
            device = lab.ifname(f"ov{role[0]}{role[-1]}")
            peer = Peer(
                device,
                server=role == right,
                local=lab.address(role, peer_role, 4),
                remote=lab.address(peer_role, role, 4),
            )
            argv = daemon_argv(binary, peer, credentials, spec.mtu, cipher, dco)
            logs[role] = lab.directory / f"{device}.log"
            proc = lab.start(role, argv, stdout=logs[role], stderr=SAME_AS_STDOUT)
            handle.daemons[role] = next(r for r in lab.state.processes if r.pid == proc.pid)
            handle.devices[role] = device
            handle.logs.append(logs[role])
        texts = wait_until_up(handle.daemons, logs)
        for role in (left, right):
            handle.facts["openvpn_data_cipher"] = check_cipher(role, cipher, texts[role])
            shown = lab.exec(role, ["ip", "-d", "-j", "link", "show", "dev", handle.devices[role]])
            check_dco(role, dco, texts[role], json.loads(shown.stdout)[0])
            self.address_and_route(lab, role, handle.devices[role], spec.mtu)
        return handle


def wait_until_up(
    daemons: dict[str, ProcessRecord], logs: dict[str, Path], timeout: float = START_TIMEOUT
) -> dict[str, str]:
    """Wait until every daemon's log says it is up and names its data cipher; return the
    logs. A daemon that exits or is not up in time is a :class:`LabError` with its log's
    last lines."""
    deadline = time.monotonic() + timeout
    texts: dict[str, str] = {}
    pending = set(daemons)
    while pending:
        for role in sorted(pending):
            text = logs[role].read_text(errors="replace")
            if UP in text and negotiated_cipher(text) is not None:
                texts[role] = text
                pending.discard(role)
            elif not is_alive(daemons[role]):
                raise LabError(f"openvpn on {role} exited during start-up: {tail(logs[role])}")
        if pending and time.monotonic() > deadline:
            role = sorted(pending)[0]
            raise LabError(f"openvpn on {role} was not up within {timeout:g} s: {tail(logs[role])}")
        if pending:
            time.sleep(0.02)
    return texts
