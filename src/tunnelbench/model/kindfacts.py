"""What a trial's tunnel kind told the run about itself, stored with the trial.

The tunnel kinds (:mod:`tunnelbench.tunnels`) know whether they encrypt, whether their
data path runs in a userspace process and how their packets look on the wire. Analysis
and reports need those facts but sit below the tunnels (they read stored runs, on any
machine, with any later set of kinds), so each trial carries the facts its kind declared
when it ran: :class:`TunnelFacts`, built by ``Tunnel.facts`` and read back with
:meth:`TunnelFacts.from_dict`.
"""

from dataclasses import dataclass
from typing import Any

from tunnelbench.model.encapsulation import (
    DEFAULT_OPTIONS,
    ESP,
    Cipher,
    EncapOptions,
    Encapsulation,
)


@dataclass(frozen=True)
class Wire:
    """A trial's packets as the ceiling model takes them: the kind's own encapsulation,
    its size-changing options, and ESP around it (``protection``; None without)."""

    encapsulation: Encapsulation
    options: EncapOptions = DEFAULT_OPTIONS
    protection: Encapsulation | None = None
    #: The family of the outer header the tunnel's packets travel in.
    outer_family: int = 4

    @property
    def esp(self) -> bool:
        """Whether ESP carries these packets (IPsec itself, or around the kind's own)."""
        return self.encapsulation in ESP or self.protection in ESP

    def to_dict(self) -> dict[str, Any]:
        changed = {
            name: getattr(self.options, name)
            for name in EncapOptions.__dataclass_fields__
            if getattr(self.options, name) != getattr(DEFAULT_OPTIONS, name)
        }
        if "cipher" in changed:
            changed["cipher"] = self.options.cipher.value
        return {
            "encapsulation": self.encapsulation.value,
            "options": changed,
            "protection": self.protection.value if self.protection else None,
            "outer_family": self.outer_family,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Wire":
        options = dict(data.get("options") or {})
        if "cipher" in options:
            options["cipher"] = Cipher(options["cipher"])
        protection = data.get("protection")
        return cls(
            encapsulation=Encapsulation(data["encapsulation"]),
            options=EncapOptions(**options),
            protection=Encapsulation(protection) if protection else None,
            outer_family=int(data.get("outer_family", 4)),
        )


@dataclass(frozen=True)
class KernelPath:
    """Where a kind's data path, run in a userspace process, has a kernel one: what
    advice says when the userspace one held the traffic on a CPU (kernel WireGuard for
    wireguard-go, the kernel's ESP for libipsec, ovpn-dco for openvpn)."""

    #: What it is called ("kernel WireGuard"), as the availability line names it.
    name: str
    #: The advice ("prefer kernel WireGuard over userspace wireguard-go").
    suggestion: str
    #: Why the userspace path costs more CPU.
    why: str
    #: The plan setting and value that choose it; None where none does (tunnelbench
    #: uses ovpn-dco wherever the kernel has it).
    setting: str | None = None
    value: str | None = None
    #: Where the run's capability record says whether this machine has it: (table,
    #: name), as :meth:`tunnelbench.analysis.suggestion.Context.available` takes them;
    #: None where it cannot be looked up.
    capability: tuple[str, str] | None = None
    #: Why this run did not use it although asked for where the machine has it.
    not_used: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "suggestion": self.suggestion,
            "why": self.why,
            "setting": self.setting,
            "value": self.value,
            "capability": list(self.capability) if self.capability else None,
            "not_used": self.not_used,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "KernelPath":
        capability = data.get("capability")
        return cls(
            name=str(data["name"]),
            suggestion=str(data["suggestion"]),
            why=str(data["why"]),
            setting=data.get("setting"),
            value=data.get("value"),
            capability=(str(capability[0]), str(capability[1])) if capability else None,
            not_used=data.get("not_used"),
        )


@dataclass(frozen=True)
class TunnelFacts:
    """The facts a tunnel kind declares about one resolved configuration of itself."""

    #: The kind's name as people write it ("WireGuard", "VXLAN", "IPsec").
    display: str
    #: Whether the trial's packets were encrypted (the kind's own cipher, or ESP
    #: protecting an unencrypted kind).
    encrypts: bool
    #: Whether the data path (the encryption, or the encapsulation) ran in a userspace
    #: process rather than in the kernel.
    userspace: bool
    #: Every implementation the kind offers (a label names the one used when several).
    implementations: tuple[str, ...] = ()
    #: Those of them whose data path runs in a userspace process.
    userspace_implementations: tuple[str, ...] = ()
    #: The wire model; None when the ceiling model does not know this kind.
    wire: Wire | None = None
    #: Whether its encryption goes through the kernel's crypto API, whose driver for each
    #: algorithm is the highest-priority one /proc/crypto lists (ESP in the kernel,
    #: OpenVPN's DCO). Kernel WireGuard calls lib/crypto directly and userspace
    #: implementations do their own crypto: for them no driver choice applies.
    kernel_crypto_api: bool = False
    #: The kernel's data path for a userspace one (None: in the kernel already, or none).
    kernel_path: KernelPath | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel_path": self.kernel_path.to_dict() if self.kernel_path else None,
            "display": self.display,
            "encrypts": self.encrypts,
            "userspace": self.userspace,
            "implementations": list(self.implementations),
            "userspace_implementations": list(self.userspace_implementations),
            "wire": self.wire.to_dict() if self.wire else None,
            "kernel_crypto_api": self.kernel_crypto_api,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TunnelFacts":
        wire = Wire.from_dict(data["wire"]) if data.get("wire") else None
        userspace = bool(data["userspace"])
        kernel_crypto = data.get("kernel_crypto_api")
        if kernel_crypto is None:
            # Stored before the fact was: ESP in the kernel is the kind it was true of
            # then (a kernel data channel of OpenVPN was not told apart).
            kernel_crypto = wire is not None and wire.esp and not userspace
        return cls(
            display=str(data["display"]),
            encrypts=bool(data["encrypts"]),
            userspace=userspace,
            implementations=tuple(data.get("implementations") or ()),
            userspace_implementations=tuple(data.get("userspace_implementations") or ()),
            wire=wire,
            kernel_crypto_api=bool(kernel_crypto),
            kernel_path=KernelPath.from_dict(data["kernel_path"])
            if data.get("kernel_path")
            else None,
        )


@dataclass(frozen=True)
class EspFound:
    """ESP as strongSwan installed it at both ends (:mod:`tunnelbench.tunnels.esp`)."""

    implementation: str  # kernel or libipsec
    version: str  # charon's
    cipher: str  # tunnelbench's name (aes-256-gcm)
    algorithm: str  # as charon listed the SA's
    mode: str  # tunnel or transport
    encapsulation: str  # ``udp`` (NAT-T) or ``none``


@dataclass(frozen=True)
class OpenVpnFound:
    """OpenVPN as its daemons ran (:mod:`tunnelbench.tunnels.openvpn`)."""

    #: Whether every end's data channel ran in the kernel (ovpn-dco), and why (not).
    dco: bool
    dco_reason: str
    #: The data channel's cipher as both daemons reported it.
    data_cipher: str | None = None


@dataclass
class SetupFound:
    """What a tunnel's set-up found out that only running it tells, recorded with each
    trial (``Resolved.record_setup``) and read by :meth:`Tunnel.facts` (OpenVPN's data
    channel in the kernel or not)."""

    esp: EspFound | None = None
    openvpn: OpenVpnFound | None = None


@dataclass(frozen=True)
class GeneratorFacts:
    """The facts a load generator declares, stored with each trial."""

    #: Whether one process runs each stream in a thread of its own (iperf2), so that a
    #: process can keep one core per stream busy.
    threaded_streams: bool
    #: How its processes' labels begin in the CPU probe (``iperf3-client-0``).
    process_prefixes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "threaded_streams": self.threaded_streams,
            "process_prefixes": list(self.process_prefixes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GeneratorFacts":
        return cls(
            threaded_streams=bool(data["threaded_streams"]),
            process_prefixes=tuple(data.get("process_prefixes") or ()),
        )
