"""The interface every tunnel kind implements."""

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.state import ProcessRecord, is_alive
from tunnelbench.lab.topology import plen, routes_for, tunnel_address


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


class Tunnel(ABC):
    kind: ClassVar[TunnelKind]
    #: Implementations a user may ask for, besides "auto".
    implementations: ClassVar[tuple[str, ...]]
    #: Routes through an L2 tunnel need the far end's inner address as next hop.
    layer2: ClassVar[bool] = False

    @abstractmethod
    def overhead(self, outer_family: int = 4) -> int:
        """Bytes of encapsulation added to each inner packet (outer IP header included)."""

    def default_mtu(self, underlay_mtu: int) -> int:
        return underlay_mtu - self.overhead(4)

    def resolve_implementation(self, requested: str) -> str:
        """The implementation "auto" means here; a named one is checked, not replaced."""
        if requested == "auto":
            return self.implementations[0]
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
    def setup(self, lab: Lab, implementation: str, mtu: int) -> TunnelHandle:
        """Bring the tunnel up between the lab's two tunnel ends and route through it."""

    # --- shared steps for subclasses ---

    def address_and_route(self, lab: Lab, role: str, device: str, mtu: int) -> None:
        """Give a tunnel device its inner addresses, bring it up and add its routes."""
        left = role == lab.chain.tunnel_ends[0]
        commands = [["link", "set", device, "mtu", str(mtu), "up"]]
        for family in (4, 6):
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
