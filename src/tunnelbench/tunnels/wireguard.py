"""WireGuard: the kernel module when the kernel has it, else userspace wireguard-go."""

import functools
import platform
import subprocess
from pathlib import Path
from typing import ClassVar

from tunnelbench import capabilities, programs
from tunnelbench.command import run
from tunnelbench.errors import UserError
from tunnelbench.kinds import Cipher, TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.topology import remote_prefixes, tunnel_address
from tunnelbench.tunnels.base import Tunnel, TunnelHandle, TunnelSpec, wait_for_device

PORT = 51820
KERNEL = "kernel"
WIREGUARD_GO = "wireguard-go"
# wireguard-go keeps its control sockets here, shared by every namespace on the host.
UAPI_DIR = Path("/var/run/wireguard")


class WireGuard(Tunnel):
    kind = TunnelKind.WIREGUARD
    implementations: ClassVar[tuple[str, ...]] = (KERNEL, WIREGUARD_GO)
    ciphers: ClassVar[tuple[Cipher, ...]] = (Cipher.CHACHA20_POLY1305,)

    def overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        # outer IP + UDP 8 + WireGuard header 16 + Poly1305 tag 16 (plaintext padded to 16)
        return (20 if outer_family == 4 else 40) + 8 + 16 + 16

    def default_mtu(self, underlay_mtu: int, spec: TunnelSpec) -> int:
        # As wg-quick: leave room for an IPv6 outer header, so 1500 gives 1420.
        return underlay_mtu - self.overhead(spec, 6)

    def resolve_implementation(self, requested: str) -> str:
        if requested == "auto":
            return KERNEL if capabilities.kernel_link_type("wireguard") is None else WIREGUARD_GO
        resolved = super().resolve_implementation(requested)
        if resolved == KERNEL and (refusal := capabilities.kernel_link_type("wireguard")):
            raise UserError(
                f"tunnel.implementation: this kernel cannot create a wireguard link ({refusal}); "
                f"use {WIREGUARD_GO!r} or 'auto'"
            )
        return resolved

    def programs(self, implementation: str) -> list[tuple[str, str]]:
        needed = [("wg", "WireGuard configuration, from wireguard-tools")]
        if implementation == WIREGUARD_GO:
            needed.append((WIREGUARD_GO, "userspace WireGuard"))
        return needed

    def version(self, implementation: str) -> str:
        if implementation == KERNEL:
            return f"linux {platform.release()}"
        return _wireguard_go_version(programs.require(WIREGUARD_GO, "userspace WireGuard"))

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        implementation, mtu = spec.implementation, spec.mtu
        handle = TunnelHandle(self.kind, implementation, self.version(implementation), mtu)
        left, right = lab.chain.tunnel_ends
        keys = {role: _keypair(lab, role) for role in (left, right)}
        for role in (left, right):
            device = lab.ifname(f"wg{role[0]}{role[-1]}")
            handle.devices[role] = device
            if implementation == KERNEL:
                lab.ip_batch(role, [["link", "add", device, "type", "wireguard"]])
            else:
                self._start_userspace(lab, role, device, handle)
        for role in (left, right):
            peer = right if role == left else left
            peer_is_left = peer == left
            allowed = [
                f"{tunnel_address(peer_is_left, 4)}/32",
                f"{tunnel_address(peer_is_left, 6)}/128",
                *(p for family in (4, 6) for p in remote_prefixes(lab.chain, role, family)),
            ]
            lab.exec(
                role,
                ["wg", "set", handle.devices[role], "listen-port", str(PORT)]
                + ["private-key", str(keys[role][0]), "peer", keys[peer][1]]
                + ["endpoint", f"{lab.address(peer, role, 4)}:{PORT}"]
                + ["allowed-ips", ",".join(allowed)],
            )
            self.address_and_route(lab, role, handle.devices[role], mtu)
        return handle

    def _start_userspace(self, lab: Lab, role: str, device: str, handle: TunnelHandle) -> None:
        binary = programs.require(WIREGUARD_GO, "userspace WireGuard")
        socket = UAPI_DIR / f"{device}.sock"
        lab.state.add_file(socket)  # a killed daemon leaves its socket behind
        log = lab.directory / f"{device}.log"
        with log.open("wb") as out:
            proc = lab.start(role, [binary, "-f", device], stdout=out, stderr=subprocess.STDOUT)
        daemon = next(r for r in lab.state.processes if r.pid == proc.pid)
        wait_for_device(daemon, WIREGUARD_GO, device, log)
        handle.daemons[role] = daemon
        handle.logs.append(log)


def _keypair(lab: Lab, role: str) -> tuple[Path, str]:
    """A fresh private key in a root-only file of the lab, and its public key."""
    private = run(["wg", "genkey"]).stdout.strip()
    public = run(["wg", "pubkey"], input_text=private + "\n").stdout.strip()
    path = lab.directory / f"{role}.key"
    lab.state.add_file(path)
    path.touch(mode=0o600)
    path.write_text(private + "\n")
    return path, public


@functools.cache
def _wireguard_go_version(binary: str) -> str:
    first = run([binary, "--version"]).stdout.strip().splitlines()
    return f"{first[0] if first else 'wireguard-go (unknown version)'} ({binary})"
