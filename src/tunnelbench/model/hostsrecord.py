"""What a run on real hosts records in its environment (``remote``): the hosts file it
ran with, each host's facts, and the machine that controlled it.

:mod:`tunnelbench.remote` writes these records (:meth:`HostsFile.record`,
:meth:`Facts.record`); reports and ``--resume`` read them as fields. Their JSON is the
shape the store kept: a key an earlier version did not write (a host's ``trips_c`` and
``software``, the hosts file's ``tunnel_protection``) is None here and left out again, so
every stored record is written back as it was read.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunnelbench.kinds import Protection, TunnelKind, TunnelMode
from tunnelbench.model.remotefacts import CryptoDriver


@dataclass(frozen=True)
class HostEntry:
    """One role of the hosts file: its SSH destination (None: a router without a
    login, measured as a black box), where traffic reaches it, and its SNMP agent."""

    ssh: str | None
    address: str | None
    address6: str | None = None
    snmp: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ssh": self.ssh, "address": self.address}
        if self.address6:
            out["address6"] = self.address6
        if self.snmp:
            out["snmp"] = self.snmp
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HostEntry":
        return cls(data.get("ssh"), data.get("address"), data.get("address6"), data.get("snmp"))


@dataclass(frozen=True)
class HostsRecord:
    """The hosts file a run measured: where it lay, its layout and DUT, its roles and
    its tunnel (destinations, never credentials)."""

    path: str | None
    layout: str
    dut: str
    hosts: dict[str, HostEntry]
    tunnel_mode: TunnelMode
    tunnel_kind: TunnelKind
    tunnel_protection: Protection | None = None  # None: stored before it existed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "layout": self.layout,
            "dut": self.dut,
            "hosts": {role: entry.to_json() for role, entry in self.hosts.items()},
            "tunnel_mode": self.tunnel_mode.value,
            "tunnel_kind": self.tunnel_kind.value,
        }
        if self.tunnel_protection is not None:
            out["tunnel_protection"] = self.tunnel_protection.value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HostsRecord":
        protection = data.get("tunnel_protection")
        return cls(
            data.get("path"),
            data["layout"],
            data["dut"],
            {role: HostEntry.from_json(entry) for role, entry in data["hosts"].items()},
            TunnelMode(data["tunnel_mode"]),
            TunnelKind(data["tunnel_kind"]),
            None if protection is None else Protection(protection),
        )

    def same_hosts(self, other: "HostsRecord") -> bool:
        """Whether both name the same machines, layout and tunnel, wherever the file lay."""
        return self.to_json() | {"path": None} == other.to_json() | {"path": None}


@dataclass(frozen=True)
class SoftwareRecord:
    """A host's tunnel daemons (name -> version and origin, None: not found) and its
    kernel's WireGuard, in words."""

    programs: dict[str, str | None]
    kernel_wireguard: str

    def to_json(self) -> dict[str, Any]:
        return {"programs": self.programs, "kernel_wireguard": self.kernel_wireguard}


@dataclass(frozen=True)
class HostFacts:
    """What a run recorded of one host: kernel, architecture, cores, iperf3, whether its
    tools are busybox's, thermal zones (zone -> type) and their lowest trip points (°C),
    each core's governor and top clock (MHz, by the core's number as text), the drivers
    of the tunnels' ciphers and its tunnel software."""

    kernel: str
    machine: str
    cores: int
    iperf3: str | None
    busybox: bool
    thermal_zones: dict[str, str]
    trips_c: dict[str, float] | None  # None: stored before it existed
    governors: dict[str, str]
    max_mhz: dict[str, float]
    crypto_drivers: dict[str, CryptoDriver]
    software: SoftwareRecord | None = None  # None: stored before it existed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel,
            "machine": self.machine,
            "cores": self.cores,
            "iperf3": self.iperf3,
            "busybox": self.busybox,
            "thermal_zones": self.thermal_zones,
        }
        if self.trips_c is not None:
            out["trips_c"] = self.trips_c
        out |= {
            "governors": self.governors,
            "max_mhz": self.max_mhz,
            "crypto_drivers": {
                name: {"driver": d.driver, "priority": d.priority}
                for name, d in self.crypto_drivers.items()
            },
        }
        if self.software is not None:
            out["software"] = self.software.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HostFacts":
        software = data.get("software")
        return cls(
            kernel=data["kernel"],
            machine=data["machine"],
            cores=data["cores"],
            iperf3=data.get("iperf3"),
            busybox=data["busybox"],
            thermal_zones=dict(data["thermal_zones"]),
            trips_c=None if data.get("trips_c") is None else dict(data["trips_c"]),
            governors=dict(data["governors"]),
            max_mhz=dict(data["max_mhz"]),
            crypto_drivers={
                name: CryptoDriver(d["driver"], d["priority"])
                for name, d in data["crypto_drivers"].items()
            },
            software=None
            if software is None
            else SoftwareRecord(dict(software["programs"]), software["kernel_wireguard"]),
        )


@dataclass(frozen=True)
class Controller:
    """The machine that controlled a hosts run: its kernel, and the process's PID."""

    kernel: str
    pid: int


@dataclass(frozen=True)
class RemoteRecord:
    """A run on real hosts: the hosts file, each role's facts (a black box has none),
    and the controlling machine."""

    hosts: HostsRecord
    facts: dict[str, HostFacts]
    controller: Controller

    def to_json(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts.to_json(),
            "facts": {role: facts.to_json() for role, facts in self.facts.items()},
            "controller": {"kernel": self.controller.kernel, "pid": self.controller.pid},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RemoteRecord":
        controller = data["controller"]
        return cls(
            HostsRecord.from_json(data["hosts"]),
            {role: HostFacts.from_json(facts) for role, facts in data["facts"].items()},
            Controller(controller["kernel"], controller["pid"]),
        )
