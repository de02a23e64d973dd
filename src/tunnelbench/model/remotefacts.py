"""What a trial on real hosts (:mod:`tunnelbench.remote`) recorded of the hosts, as a typed
record: the DUT and how it was seen, each role's destination and kernel, the tunnel's
ends and devices, and what the diagnosis reads of the DUT (its crypto drivers, thermal
trip points and top clocks, or what its SNMP agent serves).

Stored as the trial's ``resolved.remote`` (the same keys as before it was typed, so every
stored run reads back); analysis reads it through these fields, never by string keys.
"""

from dataclasses import dataclass, field, fields
from typing import Any

#: How the DUT was seen: logged into over SSH, read over SNMP only, or not at all.
SSH, SNMP, NONE = "ssh", "snmp", "none"


@dataclass(frozen=True)
class TunnelEnd:
    """What ran one end of a tunnel tunnelbench built, with its version there."""

    implementation: str
    version: str


@dataclass(frozen=True)
class CryptoDriver:
    """The driver a host's kernel picks for an algorithm (the highest priority in
    ``/proc/crypto``)."""

    driver: str
    priority: int


@dataclass(frozen=True)
class SnmpView:
    """What a black-box DUT's SNMP agent serves."""

    description: str | None = None
    interfaces: tuple[str, ...] = ()
    #: Whether it serves UCD-SNMP-MIB's ssCpuRaw* (the whole box's CPU time).
    cpu_counters: bool = False
    cores: int | None = None
    #: How old a counter it serves may be (s).
    cache_s: float | None = None


@dataclass
class RemoteFacts:
    """A remote trial's record of the hosts; see the module's description."""

    #: The role measured (whose cores are the trial's ``cpu<N>.*``).
    dut: str
    #: :data:`SSH`, :data:`SNMP` or :data:`NONE`; None for a trial stored before.
    dut_view: str | None = None
    #: ``build``, ``existing`` or ``none``.
    tunnel_mode: str | None = None
    #: ``tunnelbench`` or ``user``; None without a tunnel.
    tunnel_built_by: str | None = None
    tunnel_ends: dict[str, TunnelEnd] = field(default_factory=dict)
    #: role -> its tunnel device, whose counters are the trial's ``link.<role>.tunnel``
    #: (``link.<role>.<device>`` in runs recorded before).
    tunnel_devices: dict[str, str] = field(default_factory=dict)
    #: role -> its SSH destination (None: a black box, not logged into).
    hosts: dict[str, str | None] = field(default_factory=dict)
    kernels: dict[str, str] = field(default_factory=dict)
    # The DUT, logged into:
    crypto_drivers: dict[str, CryptoDriver] = field(default_factory=dict)
    thermal_zones: dict[str, str] = field(default_factory=dict)  # zone -> its type
    trips_c: dict[str, float] = field(default_factory=dict)  # zone -> lowest trip point
    max_mhz: dict[int, float] = field(default_factory=dict)  # core -> its top clock
    #: The DUT as a black box, where its SNMP agent was read.
    dut_snmp: SnmpView | None = None
    #: The traffic: the server's (first) port and the address the client sent to.
    port: int | None = None
    target: str | None = None
    #: device -> the DUT's root qdisc kind, where it has ``tc`` with JSON output.
    dut_qdiscs: dict[str, str] = field(default_factory=dict)
    #: Keys this version does not know, kept as they were.
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "extra" or value is None:
                continue
            if item.name == "tunnel_ends":
                value = {r: {"implementation": e.implementation, "version": e.version}
                         for r, e in value.items()}  # fmt: skip
            elif item.name == "crypto_drivers":
                value = {n: {"driver": d.driver, "priority": d.priority} for n, d in value.items()}
            elif item.name == "max_mhz":
                value = {str(core): mhz for core, mhz in value.items()}
            elif item.name == "dut_snmp":
                value = {
                    "description": value.description,
                    "interfaces": list(value.interfaces),
                    "cpu_counters": value.cpu_counters,
                    "cores": value.cores,
                    "cache_s": value.cache_s,
                }
            out[item.name] = value
        return out | self.extra

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RemoteFacts":
        known = {item.name for item in fields(cls)} - {"extra"}
        snmp = data.get("dut_snmp")
        return cls(
            dut=str(data.get("dut") or ""),
            dut_view=data.get("dut_view"),
            tunnel_mode=data.get("tunnel_mode"),
            tunnel_built_by=data.get("tunnel_built_by"),
            tunnel_ends={
                role: TunnelEnd(str(end["implementation"]), str(end["version"]))
                for role, end in (data.get("tunnel_ends") or {}).items()
            },
            tunnel_devices=dict(data.get("tunnel_devices") or {}),
            hosts=dict(data.get("hosts") or {}),
            kernels=dict(data.get("kernels") or {}),
            crypto_drivers={
                name: CryptoDriver(str(d["driver"]), int(d["priority"]))
                for name, d in (data.get("crypto_drivers") or {}).items()
            },
            thermal_zones=dict(data.get("thermal_zones") or {}),
            trips_c={z: float(t) for z, t in (data.get("trips_c") or {}).items()},
            max_mhz={int(c): float(m) for c, m in (data.get("max_mhz") or {}).items()},
            dut_snmp=SnmpView(
                description=snmp.get("description"),
                interfaces=tuple(snmp.get("interfaces") or ()),
                cpu_counters=bool(snmp.get("cpu_counters")),
                cores=snmp.get("cores"),
                cache_s=snmp.get("cache_s"),
            )
            if snmp
            else None,
            port=data.get("port"),
            target=data.get("target"),
            dut_qdiscs=dict(data.get("dut_qdiscs") or {}),
            extra={k: v for k, v in data.items() if k not in known},
        )
