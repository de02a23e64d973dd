"""WireGuard: the kernel module when the kernel has it, else a userspace daemon.

Implementations (``tunnel.implementation``):

- ``kernel``: the kernel's ``wireguard`` link type;
- ``wireguard-go``: the wireguard-go build tunnelbench pins (``make setup`` builds it into
  ``.tools/bin``; ``auto`` falls back to it);
- ``wireguard-go-debian``: Debian's packaged wireguard-go, ``/usr/bin/wireguard-go``,
  years older than the pinned build (no GSO/GRO);
- ``boringtun``: Cloudflare's boringtun (``boringtun-cli`` from crates.io, pinned, built
  by ``make setup`` into ``.tools/bin``).

Every userspace daemon runs in the foreground in its namespace, creates a TUN device and
its control socket in ``/var/run/wireguard`` (shared by all namespaces), and is configured
with ``wg set`` like the kernel's link.
"""

import contextlib
import logging
import os
import platform
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from tunnelbench.errors import UserError
from tunnelbench.kinds import Cipher, TunnelKind
from tunnelbench.lab.host import SAME_AS_STDOUT
from tunnelbench.lab.netns import Lab
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.model.kindfacts import KernelPath, SetupFound, TunnelFacts
from tunnelbench.system import probing, programs
from tunnelbench.system.command import run
from tunnelbench.system.probing import Program
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec
from tunnelbench.tunnels.site import Site

log = logging.getLogger("tunnelbench.tunnels")

#: WireGuard's listen ports: its own default first (a lab namespace has nothing bound).
PORTS = range(51820, 51900)
KERNEL = "kernel"
WIREGUARD_GO = "wireguard-go"
WIREGUARD_GO_DEBIAN = "wireguard-go-debian"
BORINGTUN = "boringtun"
# Userspace daemons keep their control sockets here, shared by every namespace on the host.
UAPI_DIR = Path("/var/run/wireguard")
# A new TUN device's MTU. boringtun reads packets into a buffer of the MTU it last saw and
# looks at the device's MTU once a second: a larger MTU set after start-up truncates
# packets until it notices.
TUN_MTU = 1500
BORINGTUN_MTU_POLL_S = 1.0


@dataclass(frozen=True)
class Userspace:
    """A userspace WireGuard daemon: its program and how it runs in the foreground."""

    program: str  # a name programs.find looks up, or an absolute path used as it is
    purpose: str  # what it is and how it gets installed, for errors and skip reasons
    flags: tuple[str, ...]  # given before the interface name
    #: What the pinned build was built from, completed by the version its install
    #: script wrote beside it (``<program>.version``).
    built_from: str | None = None
    package: str | None = None  # the Debian package that installs it

    def argv(self, binary: str, device: str) -> list[str]:
        return [binary, *self.flags, device]


USERSPACE: dict[str, Userspace] = {
    WIREGUARD_GO: Userspace(
        "wireguard-go",
        "the pinned wireguard-go, built into .tools/bin by `make setup`",
        ("-f",),
        built_from="golang.zx2c4.com/wireguard@",
    ),
    WIREGUARD_GO_DEBIAN: Userspace(
        "/usr/bin/wireguard-go",
        "Debian's wireguard-go package: apt-get install wireguard-go",
        ("-f",),
        package="wireguard-go",
    ),
    BORINGTUN: Userspace(
        "boringtun-cli",
        "boringtun, built into .tools/bin by `make setup`",
        # It would otherwise switch to the login user's ids and lose its socket. Its
        # default threads and log level are given, so that WG_THREADS or WG_LOG_LEVEL in
        # the environment cannot change what is measured without a record of it.
        ("--foreground", "--disable-drop-privileges", "--threads", "4", "--verbosity", "error"),
        built_from="crates.io boringtun-cli ",
    ),
}


class WireGuard(Tunnel):
    kind = TunnelKind.WIREGUARD
    implementations: ClassVar[tuple[str, ...]] = (KERNEL, *USERSPACE)
    auto_order: ClassVar[tuple[str, ...]] = (KERNEL, WIREGUARD_GO)
    ciphers: ClassVar[tuple[Cipher, ...]] = (Cipher.CHACHA20_POLY1305,)
    encapsulation = Encapsulation.WIREGUARD
    userspace_implementations: ClassVar[tuple[str, ...]] = tuple(USERSPACE)
    display = "WireGuard"
    kernel_module = "wireguard"
    packages: ClassVar[Mapping[str, str]] = {
        "wg": "wireguard-tools",
        **{d.program: d.package for d in USERSPACE.values() if d.package},
    }

    def link_probe(self) -> tuple[str, tuple[str, ...]]:
        return "wireguard", ()

    def facts(self, spec: TunnelSpec, found: SetupFound | None = None) -> TunnelFacts:
        """As every kind's; a userspace implementation has the kernel's beside it."""
        facts = super().facts(spec, found)
        if spec.implementation not in USERSPACE:
            return facts
        kernel = KernelPath(
            name="kernel WireGuard",
            suggestion=f"prefer kernel WireGuard over userspace {spec.implementation}",
            why=f"{spec.implementation} copies every packet between the kernel and userspace",
            setting="tunnel.implementation",
            value=KERNEL,
            capability=("links", "wireguard"),
        )
        return replace(facts, kernel_path=kernel)

    def debian_packages(self) -> tuple[str, ...]:
        return tuple(d.package for d in USERSPACE.values() if d.package)

    def default_mtu(self, underlay_mtu: int, spec: TunnelSpec) -> int:
        # As wg-quick: leave room for an IPv6 outer header, so 1500 gives 1420.
        return underlay_mtu - self.overhead(spec, 6)

    def resolve_implementation(self, requested: str | None) -> str:
        if requested is None:
            return KERNEL if probing.kernel_link_type("wireguard") is None else WIREGUARD_GO
        resolved = super().resolve_implementation(requested)
        if resolved == KERNEL and (refusal := probing.kernel_link_type("wireguard")):
            others = ", ".join(repr(name) for name in USERSPACE)
            raise UserError(
                f"tunnel.implementation: this kernel cannot create a wireguard link ({refusal}); "
                f"use a userspace implementation ({others}) or 'auto'"
            )
        return resolved

    def programs(self, implementation: str) -> list[tuple[str, str]]:
        needed = [("wg", "WireGuard configuration, from wireguard-tools")]
        if (daemon := USERSPACE.get(implementation)) is not None:
            needed.append((daemon.program, daemon.purpose))
        return needed

    def end_programs(self) -> tuple[str, ...]:
        # The daemon, where an end needs one, is that end's choice (see build).
        return ("wg", "ip")

    def install_hint(self, program: str) -> str | None:
        # The pinned builds come from `make setup`, not from a package.
        if any(d.program == program and d.built_from for d in USERSPACE.values()):
            return f"make setup (builds the pinned {program} into .tools/bin)"
        return super().install_hint(program)

    def version(self, implementation: str) -> str:
        if implementation == KERNEL:
            return f"linux {platform.release()}"
        daemon = USERSPACE[implementation]
        programs.require(daemon.program, daemon.purpose)
        package = probing.debian_package(daemon.package) if daemon.package else None
        return describe_version(daemon, probing.program(daemon.program), package)

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        handle = self.build(lab, spec)
        handle.version = self.version(spec.implementation)
        return handle

    def build(self, site: Site, spec: TunnelSpec) -> TunnelHandle:
        """Both ends through ``site``: the kernel's link or a userspace daemon at each,
        keys made here and handed to each end, one ``wg set`` each (its peer's endpoint
        the underlay's, its allowed IPs the peer's inner address and the prefixes the
        site routes into the tunnel), then addresses and routes. A spec left to
        ``each_end`` (a site whose ends decide for themselves: real hosts) is resolved
        at each end, the kernel's where it can create a wireguard link, else
        ``spec.implementation``; the handle names each end's (``implementations``).
        Versions are the caller's to record: they are each end's own."""
        mtu = spec.mtu
        left, right = site.tunnel_ends
        used = {r: self._implementation_at(site, r, spec) for r in (left, right)}
        handle = TunnelHandle(self.kind, used[right], "", mtu, implementations=used)
        keys = {role: _keypair(site, role) for role in (left, right)}
        ports = {role: site.free_udp_port(role, PORTS) for role in (left, right)}
        for role in (left, right):
            device = site.ifname(f"wg{role[0]}{role[-1]}")
            handle.devices[role] = device
            if used[role] == KERNEL:
                site.ip_batch(role, [["link", "add", device, "type", "wireguard"]])
            else:
                self._start_userspace(site, role, device, used[role], handle)
        for role in (left, right):
            peer = right if role == left else left
            allowed = [
                f"{site.inner_peer(role, family)}/{32 if family == 4 else 128}"
                for family in site.families
            ] + [p for family in site.families for p in site.inner_routes(role, family)]
            endpoint = f"{site.wan_underlay(role).remote}:{ports[peer]}"
            site.host(role).run(
                ["wg", "set", handle.devices[role], "listen-port", str(ports[role])]
                + ["private-key", str(keys[role][0]), "peer", keys[peer][1]]
                + ["endpoint", endpoint, "allowed-ips", ",".join(allowed)],
            )
            self.address_and_route(site, role, handle.devices[role], mtu)
        if BORINGTUN in used.values() and mtu > TUN_MTU:
            time.sleep(BORINGTUN_MTU_POLL_S + 0.1)  # until both daemons read the new MTU
        return handle

    def _implementation_at(self, site: Site, role: str, spec: TunnelSpec) -> str:
        if spec.each_end and site.can_create(role, "wireguard"):
            return KERNEL
        return spec.implementation

    def _start_userspace(
        self, site: Site, role: str, device: str, implementation: str, handle: TunnelHandle
    ) -> None:
        spec = USERSPACE[implementation]
        binary = site.program(role, spec.program, spec.purpose)
        socket = UAPI_DIR / f"{device}.sock"
        host = site.host(role)
        host.record(socket, kind="file")  # a killed daemon leaves its socket behind
        output = site.files(role) / f"{device}.log"
        # boringtun hands the socket directory of this machine to the login user: on this
        # machine's lab only (a host's directory is the host's).
        kept = _owner_kept(UAPI_DIR) if isinstance(site, Lab) else contextlib.nullcontext()
        with kept:
            proc = host.spawn(spec.argv(binary, device), stdout=output, stderr=SAME_AS_STDOUT)
            daemon = site.await_daemon(role, proc, implementation, output, device, socket)
        if daemon is not None:  # the runner samples the CPU of every daemon held here
            handle.daemons[role] = daemon
        handle.logs.append(output)


@contextlib.contextmanager
def _owner_kept(directory: Path) -> Iterator[None]:
    """Give ``directory`` back to its owner (root, if it did not exist) after a daemon
    started: boringtun hands the control-socket directory to the login user (getlogin:
    whoever ran sudo), which would let that user replace any WireGuard socket there."""
    try:
        before = directory.stat()
        owner = (before.st_uid, before.st_gid)
    except FileNotFoundError:
        owner = (0, 0)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            after = directory.stat()
            if (after.st_uid, after.st_gid) != owner:
                log.debug("giving %s back to uid/gid %d/%d", directory, *owner)
                os.chown(directory, *owner)


def _keypair(site: Site, role: str) -> tuple[Path, str]:
    """A fresh private key in a root-only file of the role's host, and its public key.

    The key pair is made where the run is controlled (``wg genkey`` needs no network
    context) and handed to the role's host, which keeps it readable by root alone."""
    private = run(["wg", "genkey"]).stdout.strip()
    public = run(["wg", "pubkey"], input_text=private + "\n").stdout.strip()
    path = site.files(role) / f"{role}.key"
    site.host(role).write(path, private + "\n", mode=0o600)
    return path, public


def describe_version(daemon: Userspace, found: Program, package: str | None = None) -> str:
    """The recorded version of an installed userspace daemon: what it prints about
    itself, what the pinned build was built from or the Debian package's version, and
    its path.

    wireguard-go prints its last release tag, older than the commit tunnelbench pins, so
    the pin is the precise part; ``package`` is the Debian package's installed version.
    """
    parts = [found.version or "unknown version"]
    if daemon.built_from is not None and found.pinned:
        parts.append(f"built from {daemon.built_from}{found.pinned}")
    if daemon.package is not None:
        parts.append(f"Debian package {daemon.package} {package or '(version unknown)'}")
    return f"{', '.join(parts)} ({found.path})"
