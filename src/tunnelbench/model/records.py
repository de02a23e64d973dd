"""What a run and its trials record, as typed values.

The store keeps each trial's resolved settings as JSON; these classes are what the rest
of the program sees, so that analysis and reports read attributes instead of string keys.
:meth:`Resolved.to_dict` writes exactly the keys a trial has always stored (old databases
read back unchanged) plus the facts its tunnel kind and generator declared
(:mod:`tunnelbench.model.kindfacts`); keys this version does not know survive a round
trip in :attr:`Resolved.extra`.
"""

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from tunnelbench.kinds import StreamMode
from tunnelbench.model.environment import GUESTS as GUESTS
from tunnelbench.model.environment import Environment
from tunnelbench.model.kindfacts import (
    EspFound,
    GeneratorFacts,
    OpenVpnFound,
    SetupFound,
    TunnelFacts,
)
from tunnelbench.model.plan import Experiment, TrialConfig, TunnelSettings
from tunnelbench.model.remotefacts import RemoteFacts
from tunnelbench.model.tuning import TuneRecord


class TrialStatus(StrEnum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


#: The stored keys of the kind and generator facts.
#: ``Resolved.where.virtualization``: this machine's own kernel, or a guest with hardware
#: virtualisation, or one whose CPU QEMU emulates.
NO_VM, KVM, TCG = "none", "kvm", "tcg"
TUNNEL_FACTS_KEY = "tunnel_facts"
GENERATOR_FACTS_KEY = "generator_facts"


@dataclass(frozen=True)
class Where:
    """Where a trial ran: this machine's own kernel (``virtualization`` ``none``), or a
    VM guest's (``kvm`` or ``tcg``, why not KVM, the guest's size); handed to a guest's
    runner as :meth:`to_dict`."""

    kernel_release: str
    virtualization: str
    kernel_package: str | None = None
    virtualization_reason: str | None = None
    vm_cpus: int | None = None
    vm_memory_mib: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Where":
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass
class TunnelSetup:
    """The tunnel as set-up resolved it: who implemented it, which version, its
    device's MTU (None without a tunnel) and the AEAD an encrypting tunnel (or ESP
    around one) used."""

    implementation: str | None = None
    version: str | None = None
    mtu: int | None = None
    cipher: str | None = None


@dataclass
class EspSetup:
    """ESP as set-up found it (:class:`tunnelbench.model.kindfacts.EspFound`), for ipsec
    and for protection: who did it (``kernel`` or ``libipsec``, known before set-up
    ran), its version, cipher and algorithm, mode, and ``udp`` (NAT-T) or ``none``."""

    implementation: str | None = None
    version: str | None = None
    cipher: str | None = None
    algorithm: str | None = None
    mode: str | None = None
    encapsulation: str | None = None


@dataclass
class OpenVpnSetup:
    """OpenVPN as set-up found it (:class:`tunnelbench.model.kindfacts.OpenVpnFound`)."""

    dco: bool | None = None
    dco_reason: str | None = None
    data_cipher: str | None = None


@dataclass
class WhereRan:
    """Where the lab ran: the kernel's release (and Debian package when it was
    fetched), ``none`` (this machine's kernel), ``kvm`` or ``tcg`` (a VM guest: CPU-bound
    figures under ``tcg`` measure QEMU's emulation) and why not KVM, the guest's size."""

    kernel_release: str | None = None
    kernel_package: str | None = None
    virtualization: str | None = None
    virtualization_reason: str | None = None
    vm_cpus: int | None = None
    vm_memory_mib: int | None = None


@dataclass
class LabFound:
    """What the lab was and what it applied: its id and IP versions, links, steering,
    PPPoE, the CPU budgets, and whether it was built for the trial."""

    id: str | None = None
    families: tuple[int, ...] | None = None
    #: role -> feature -> on, when the lab set offloads (see lab.netns.role_offloads).
    offloads: dict[str, dict[str, bool]] | None = None
    #: role -> the gso_max_segs set on its links (1: every skb one wire packet), where
    #: the lab turned GSO off (lab.netns._set_offloads).
    gso_max_segs: dict[str, int] | None = None
    #: role -> the cores its processes were held to (lab.placement); None: all free.
    placement: dict[str, str] | None = None
    #: role -> the RPS mask written to its links' receive queues, and the pinned roles'
    #: tunnel devices steered the same way (role -> device).
    rps: dict[str, str] | None = None
    rps_tunnel_devices: dict[str, str] | None = None
    #: role -> its ppp device, PPPoE session and peer MAC as its kernel listed them, on a
    #: WAN over PPPoE (lab.pppoe).
    pppoe: dict[str, dict[str, str | int]] | None = None
    #: role -> the one core its PPPoE WAN veth was steered to, with lab.queues (a NIC's
    #: RSS puts a PPPoE session in one queue).
    rps_pppoe_wan: dict[str, str] | None = None
    #: role -> a kernel tunnel's device whose GSO/TSO a shaped or impaired lab turned
    #: off, so the WAN's qdisc is handed wire packets (lab.netns.unbundle_tunnel).
    unbundled_tunnel_devices: dict[str, str] | None = None
    #: Whether the trial's lab was built for it (True) or kept from an earlier trial of
    #: the run (bench.labpool), and the how-manyth trial of that lab it was (1: fresh).
    fresh: bool | None = None
    trial: int | None = None
    # The CPU budget as applied (lab.cgroup.Limit.resolved).
    cgroup_version: int | None = None
    cpu_period_us: int | None = None
    cpu_quota_us: int | None = None
    cgroups: dict[str, str] | None = None
    #: The role budgets as applied (lab.budget: lab.cgroup.RoleLimits.resolved).
    role_quotas_us: dict[str, int] | None = None
    role_cgroups: dict[str, str] | None = None


@dataclass
class TrafficFound:
    """How the traffic ran: one process for every stream or one each, the generator
    processes that ran, and the congestion control the senders used."""

    stream_mode: StreamMode | None = None
    processes: int | None = None
    congestion: str | None = None


#: The groups of :class:`Resolved`, each with the flat keys its fields are stored under.
_GROUPS = {
    "setup": TunnelSetup,
    "esp": EspSetup,
    "openvpn": OpenVpnSetup,
    "where": WhereRan,
    "lab": LabFound,
    "traffic": TrafficFound,
}
#: Each group's fields are stored flat, under the keys every version wrote: the field's
#: name after its group's prefix (the lab's ``id``, ``families``, ``fresh`` and ``trial``
#: after ``lab_``, its other fields bare).
_PREFIXES = {"setup": "tunnel_", "esp": "esp_", "openvpn": "openvpn_", "where": "", "traffic": ""}
_LAB_PREFIXED = frozenset({"id", "families", "fresh", "trial"})


def _key(group: str, name: str) -> str:
    if group == "lab":
        return f"lab_{name}" if name in _LAB_PREFIXED else name
    return _PREFIXES[group] + name


#: Stored key -> (group, field).
_KEYS = {
    _key(group, f.name): (group, f.name) for group, cls in _GROUPS.items() for f in fields(cls)
}


@dataclass
class Resolved:
    """What a trial's settings became on this machine, and what set-up found out, by
    owner: the tunnel's set-up (``setup``, ``esp``, ``openvpn``), where it ran
    (``where``), the lab's facts (``lab``) and the traffic's (``traffic``).

    Every field is optional: a skipped trial resolved nothing, and older databases lack
    later fields. ``tunnel`` and ``generator`` are the declared facts; a reader of an old
    database fills them from the registries (:mod:`tunnelbench.bench.store`). Stored flat,
    under the keys every version wrote (``esp_version``, ``lab_fresh``).
    """

    setup: TunnelSetup = field(default_factory=TunnelSetup)
    esp: EspSetup = field(default_factory=EspSetup)
    openvpn: OpenVpnSetup = field(default_factory=OpenVpnSetup)
    where: WhereRan = field(default_factory=WhereRan)
    lab: LabFound = field(default_factory=LabFound)
    traffic: TrafficFound = field(default_factory=TrafficFound)
    #: A run on real hosts (tunnelbench.remote): the DUT whose cores ``cpu<N>.*`` are,
    #: each role's SSH destination and kernel, whether tunnelbench built the tunnel or
    #: only used the user's, the DUT's crypto drivers, thermal zones and top clocks.
    remote: RemoteFacts | None = None
    tunnel: TunnelFacts | None = None
    generator: GeneratorFacts | None = None
    #: Keys this version does not know, kept as they were.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def single_process(self) -> bool:
        """Whether every stream ran in one generator process (``-P N``)."""
        return self.traffic.stream_mode is StreamMode.SINGLE

    @property
    def esp_or_tunnel_implementation(self) -> str | None:
        """Who did the work that varies: ESP's implementation where ESP ran, else the
        tunnel's."""
        return self.esp.implementation or self.setup.implementation

    def record_setup(self, found: SetupFound) -> None:
        """Store what a tunnel's set-up found out, under the record's fields."""
        if (esp := found.esp) is not None:
            self.esp = EspSetup(
                esp.implementation, esp.version, esp.cipher, esp.algorithm, esp.mode,
                esp.encapsulation,
            )  # fmt: skip
        if (openvpn := found.openvpn) is not None:
            self.openvpn = OpenVpnSetup(openvpn.dco, openvpn.dco_reason, openvpn.data_cipher)

    def setup_found(self) -> SetupFound:
        """What set-up found out, as :meth:`record_setup` stored it (a trial stored
        before :class:`SetupFound` was typed reads back the same)."""
        openvpn = None
        if (o := self.openvpn).dco is not None:
            openvpn = OpenVpnFound(o.dco, o.dco_reason or "", o.data_cipher)
        esp = None
        if (e := self.esp).version is not None and e.implementation is not None:
            esp = EspFound(
                e.implementation, e.version, e.cipher or "", e.algorithm or "", e.mode or "",
                e.encapsulation or "",
            )  # fmt: skip
        return SetupFound(esp, openvpn)

    def record_where(self, where: Where) -> None:
        self.where = WhereRan(
            where.kernel_release, where.kernel_package, where.virtualization,
            where.virtualization_reason, where.vm_cpus, where.vm_memory_mib,
        )  # fmt: skip

    def record_cpu_limit(
        self, version: int, period_us: int, quota_us: int, cgroups: Mapping[str, str]
    ) -> None:
        """``tunnel.cpu_budget`` as applied (:class:`tunnelbench.lab.cgroup.CpuLimit`)."""
        self.lab.cgroup_version, self.lab.cpu_period_us = version, period_us
        self.lab.cpu_quota_us, self.lab.cgroups = quota_us, dict(cgroups)

    def record_role_budgets(
        self,
        version: int,
        period_us: int,
        quotas_us: Mapping[str, int],
        cgroups: Mapping[str, str],
    ) -> None:
        """``lab.budget`` as applied (:class:`tunnelbench.lab.state.RoleLimitsRecord`)."""
        self.lab.cgroup_version, self.lab.cpu_period_us = version, period_us
        self.lab.role_quotas_us, self.lab.role_cgroups = dict(quotas_us), dict(cgroups)

    def to_dict(self, *, facts: bool = True) -> dict[str, Any]:
        """The stored form, flat, in the order of the keys before the record was
        grouped; without ``facts``, only what the settings became (the declared kind and
        generator facts left out, as in the CSV report)."""
        found: dict[str, Any] = {}
        for key, (group, name) in _KEYS.items():
            value = getattr(getattr(self, group), name)
            if value is None:
                continue
            if key == "stream_mode":
                value = value.value
            elif key == "lab_families":
                value = list(value)
            found[key] = value
        out = {key: found[key] for key in _ORDER if key in found}
        if self.remote is not None:
            out["remote"] = self.remote.to_dict()
        if self.setup.implementation is not None and "tunnel_mtu" not in out:
            out["tunnel_mtu"] = None  # stored explicitly: a run without a tunnel
        if self.tunnel is not None and facts:
            out[TUNNEL_FACTS_KEY] = self.tunnel.to_dict()
        if self.generator is not None and facts:
            out[GENERATOR_FACTS_KEY] = self.generator.to_dict()
        return out | self.extra

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Resolved":
        groups: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
        for key, value in data.items():
            if key in _KEYS and value is not None:
                group, name = _KEYS[key]
                groups[group][name] = value
        if (mode := groups["traffic"].get("stream_mode")) is not None:
            groups["traffic"]["stream_mode"] = StreamMode(mode)
        if (families := groups["lab"].get("families")) is not None:
            groups["lab"]["families"] = tuple(families)
        remote = data.get("remote")
        tunnel = data.get(TUNNEL_FACTS_KEY)
        if tunnel and "kernel_path" not in tunnel:
            # Stored before kinds declared it: the store's backfill asks the kind again,
            # as for a trial stored before any facts were.
            tunnel = None
        generator = data.get(GENERATOR_FACTS_KEY)
        known = {*_KEYS, "remote", TUNNEL_FACTS_KEY, GENERATOR_FACTS_KEY}
        return cls(
            **{group: _GROUPS[group](**values) for group, values in groups.items()},
            remote=RemoteFacts.from_dict(remote) if remote is not None else None,
            tunnel=TunnelFacts.from_dict(tunnel) if tunnel else None,
            generator=GeneratorFacts.from_dict(generator) if generator else None,
            extra={k: v for k, v in data.items() if k not in known},
        )


#: The stored keys in the order a trial has always stored them (before ``remote``).
_ORDER = (
    "tunnel_implementation", "tunnel_version", "tunnel_mtu", "stream_mode", "tunnel_cipher",
    "esp_implementation", "lab_id", "lab_families", "offloads", "gso_max_segs", "placement",
    "rps", "rps_tunnel_devices", "pppoe", "rps_pppoe_wan", "unbundled_tunnel_devices",
    "lab_fresh", "lab_trial", "esp_version", "esp_cipher", "esp_algorithm", "esp_mode",
    "esp_encapsulation", "openvpn_dco", "openvpn_dco_reason", "openvpn_data_cipher",
    "cgroup_version", "cpu_period_us", "cpu_quota_us", "cgroups", "role_quotas_us",
    "role_cgroups", "processes", "congestion", "kernel_release", "kernel_package",
    "virtualization", "virtualization_reason", "vm_cpus", "vm_memory_mib",
)  # fmt: skip


@dataclass
class TrialRecord:
    id: int
    run_id: int
    seq: int
    repetition: int
    config_key: str
    #: The requested configuration (read through :meth:`TrialConfig.from_dict`, so a
    #: trial stored before a setting existed carries the value it ran with).
    config: TrialConfig
    resolved: Resolved
    status: TrialStatus
    error: str | None
    metrics: dict[str, float]


@dataclass(frozen=True)
class TimedTrial:
    """A finished trial's wall-clock cost, as :mod:`tunnelbench.bench.learned` reads it."""

    run_id: int
    seq: int
    started_at: float  # Unix time
    seconds: float  # its whole wall time: lab, probes, traffic, storing
    duration: int  # its measured window, s
    warmup_s: float | None  # its "auto" warm-up as it ended; None: a fixed one, or unrecorded
    expected_warmup: float  # what its settings made of the warm-up before it ran
    in_vm: bool
    lab_fresh: bool | None  # its lab built for it; None: stored before this was recorded
    #: A trial on a hosts file's machines: its tunnel as asked (whether it was built for
    #: it follows from the trial before); None: a trial in a lab.
    tunnel: TunnelSettings | None = None


@dataclass
class RunRecord:
    id: int
    started_at: float
    ended_at: float | None
    status: RunStatus
    command_line: str
    experiment: Experiment
    environment: Environment
    owner: dict[str, int] | None = None
    # Adaptive runs: config key -> analysis.precision.Precision.to_dict(), as last decided.
    precision: dict[str, dict[str, Any]] | None = None
    # Why the run stopped early, when it was recorded (a storage fault, say).
    error: str | None = None
    # A tuning session's path and end; None for a run of a plan.
    tune: TuneRecord | None = None
    # The user's short name for the run and notes on it (run --label, --notes).
    label: str | None = None
    notes: str | None = None
