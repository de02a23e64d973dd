"""The interface every tunnel kind implements."""

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Cipher, EspMode, Protection, TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.state import ProcessRecord, is_alive
from tunnelbench.lab.topology import plen, routes_for, tunnel_address
from tunnelbench.plan import TunnelSettings

#: What ESP offers, whether as the tunnel itself or around an unencrypted one.
ESP_CIPHERS = (Cipher.AES_256_GCM, Cipher.CHACHA20_POLY1305)


@dataclass(frozen=True)
class TunnelSpec:
    """A tunnel as it will run on this machine: the plan's settings, "auto" resolved.

    ``cipher`` is None for a tunnel that does not encrypt.
    """

    implementation: str
    mtu: int = 0
    cipher: Cipher | None = None
    esp_mode: EspMode = EspMode.TUNNEL
    protection: Protection = Protection.NONE

    @property
    def esp(self) -> bool:
        """Whether ESP carries this tunnel's packets (IPsec itself, or protection)."""
        return self.protection is Protection.IPSEC


@dataclass
class TunnelHandle:
    """What a running tunnel consists of, for probes, checks and the record."""

    kind: TunnelKind
    implementation: str
    version: str
    mtu: int
    devices: dict[str, str] = field(default_factory=dict)  # role -> device
    daemons: dict[str, ProcessRecord] = field(default_factory=dict)  # role -> daemon
    logs: list[Path] = field(default_factory=list)
    #: What set-up found out and the trial should record (merged into its ``resolved``),
    #: e.g. whether OpenVPN's data channel runs in the kernel.
    facts: dict[str, Any] = field(default_factory=dict)


class Tunnel(ABC):
    kind: ClassVar[TunnelKind]
    #: Implementations a user may ask for, besides "auto".
    implementations: ClassVar[tuple[str, ...]]
    #: The implementations "auto" may choose, in order of preference (empty: all).
    auto_order: ClassVar[tuple[str, ...]] = ()
    #: Routes through an L2 tunnel need the far end's inner address as next hop.
    layer2: ClassVar[bool] = False
    #: The ciphers the tunnel itself offers, its default first; empty if it does not
    #: encrypt.
    ciphers: ClassVar[tuple[Cipher, ...]] = ()
    #: Whether ``tunnel.protection = "ipsec"`` can wrap it (ESP around its packets).
    protectable: ClassVar[bool] = False
    #: The inner IP versions it carries; traffic of another is refused before any lab.
    families: ClassVar[tuple[int, ...]] = (4, 6)

    @abstractmethod
    def overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        """Bytes of encapsulation added to each inner packet (outer IP header included)."""

    def default_mtu(self, underlay_mtu: int, spec: TunnelSpec) -> int:
        return underlay_mtu - self.overhead(spec, 4)

    def resolve(self, settings: TunnelSettings, underlay_mtu: int) -> TunnelSpec:
        """The settings checked against this kind and "auto" resolved; a
        :class:`UserError` names the first setting this kind cannot do."""
        spec = TunnelSpec(
            implementation=self.resolve_implementation(settings.implementation),
            cipher=self._resolve_cipher(settings),
            esp_mode=settings.esp_mode,
            protection=self._check_protection(settings),
        )
        if settings.esp_mode is not EspMode.TUNNEL and not self._uses_esp(spec):
            raise UserError(
                f"tunnel.esp_mode: {settings.esp_mode.value!r} applies to ipsec and to "
                f"tunnel.protection = 'ipsec' only, not to {self.kind.value}"
            )
        return replace(spec, mtu=settings.mtu or self.default_mtu(underlay_mtu, spec))

    def _uses_esp(self, spec: TunnelSpec) -> bool:
        return spec.esp

    def _check_protection(self, settings: TunnelSettings) -> Protection:
        if settings.protection is not Protection.NONE and not self.protectable:
            raise UserError(
                f"tunnel.protection: {self.kind.value} cannot be wrapped in "
                f"{settings.protection.value}; only gre, gretap and vxlan can"
            )
        return settings.protection

    def _resolve_cipher(self, settings: TunnelSettings) -> Cipher | None:
        offered = ESP_CIPHERS if settings.protection is Protection.IPSEC else self.ciphers
        if not offered:
            if settings.cipher is Cipher.AUTO:
                return None
            raise UserError(
                f"tunnel.cipher: {self.kind.value} does not encrypt, so {settings.cipher.value!r} "
                "cannot apply; leave it 'auto'"
                + (" or set tunnel.protection = 'ipsec'" if self.protectable else "")
            )
        if settings.cipher is Cipher.AUTO:
            return offered[0]
        if settings.cipher not in offered:
            allowed = ", ".join(("auto", *(c.value for c in offered)))
            raise UserError(
                f"tunnel.cipher: {self.kind.value} does not offer {settings.cipher.value!r}; "
                f"allowed: {allowed}"
            )
        return settings.cipher

    def resolve_implementation(self, requested: str) -> str:
        """The implementation "auto" means here; a named one is checked, not replaced."""
        if requested == "auto":
            return (self.auto_order or self.implementations)[0]
        if requested not in self.implementations:
            allowed = ", ".join(("auto", *self.implementations))
            raise UserError(
                f"tunnel.implementation: {requested!r} is not an implementation of "
                f"{self.kind.value}; allowed: {allowed}"
            )
        return requested

    def programs(self, implementation: str) -> list[tuple[str, str]]:
        """(program, purpose) pairs this implementation needs; checked before any set-up."""
        return []

    @abstractmethod
    def version(self, implementation: str) -> str:
        """The version of the implementation, recorded with every trial."""

    @abstractmethod
    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        """Bring the tunnel up between the lab's two tunnel ends and route through it."""

    # --- shared steps for subclasses ---

    def address_and_route(self, lab: Lab, role: str, device: str, mtu: int) -> None:
        """Give a tunnel device its inner addresses, bring it up and add its routes."""
        left = role == lab.chain.tunnel_ends[0]
        commands = [["link", "set", device, "mtu", str(mtu), "up"]]
        for family in self.families:
            address = f"{tunnel_address(left, family)}/{plen(family)}"
            commands.append(
                ["address", "add", address, "dev", device] + (["nodad"] if family == 6 else [])
            )
            for route in routes_for(lab.chain, role, family, tunnel=True):
                if not route.tunnel:
                    continue
                via = ["via", tunnel_address(not left, family)] if self.layer2 else []
                commands.append(["route", "add", route.prefix, *via, "dev", device])
        lab.ip_batch(role, commands)


def wait_for_device(daemon: ProcessRecord, program: str, device: str, log: Path) -> None:
    """Wait until a userspace daemon has created its device, or report why it did not."""
    deadline = time.monotonic() + 10
    netdev = Path(f"/proc/{daemon.pid}/net/dev")
    while time.monotonic() < deadline:
        if not is_alive(daemon):
            raise LabError(f"{program} exited during start-up: {tail(log)}")
        try:
            if f"{device}:" in netdev.read_text():
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise LabError(f"{program} did not create {device} within 10 s: {tail(log)}")


def tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-lines:]) or "no output"
