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
from tunnelbench.model.plan import Experiment, TrialConfig
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
#: ``Resolved.virtualization``: this machine's own kernel, or a guest with hardware
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
class Resolved:
    """What a trial's settings became on this machine, and what set-up found out.

    Every field is optional: a skipped trial resolved nothing, and older databases lack
    later fields. ``tunnel`` and ``generator`` are the declared facts; a reader of an old
    database fills them from the registries (:mod:`tunnelbench.bench.store`).
    """

    tunnel_implementation: str | None = None
    tunnel_version: str | None = None
    #: The tunnel device's MTU; None without a tunnel.
    tunnel_mtu: int | None = None
    stream_mode: StreamMode | None = None
    #: The AEAD an encrypting tunnel (or ESP around one) used.
    tunnel_cipher: str | None = None
    #: Who did ESP (``kernel`` or ``libipsec``), for ipsec and for protection.
    esp_implementation: str | None = None
    lab_id: str | None = None
    lab_families: tuple[int, ...] | None = None
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
    pppoe: dict[str, dict[str, Any]] | None = None
    #: role -> the one core its PPPoE WAN veth was steered to, with lab.queues (a NIC's
    #: RSS puts a PPPoE session in one queue).
    rps_pppoe_wan: dict[str, str] | None = None
    #: role -> a kernel tunnel's device whose GSO/TSO a shaped or impaired lab turned
    #: off, so the WAN's qdisc is handed wire packets (lab.netns.unbundle_tunnel).
    unbundled_tunnel_devices: dict[str, str] | None = None
    #: Whether the trial's lab was built for it (True) or kept from an earlier trial of
    #: the run (bench.labpool), and the how-manyth trial of that lab it was (1: fresh).
    lab_fresh: bool | None = None
    lab_trial: int | None = None
    # ESP as set-up found it (model.kindfacts.EspFound).
    esp_version: str | None = None
    esp_cipher: str | None = None
    esp_algorithm: str | None = None
    esp_mode: str | None = None
    #: ``udp`` (NAT-T) or ``none``.
    esp_encapsulation: str | None = None
    # OpenVPN as set-up found it (model.kindfacts.OpenVpnFound).
    openvpn_dco: bool | None = None
    openvpn_dco_reason: str | None = None
    openvpn_data_cipher: str | None = None
    # The CPU budget as applied (lab.cgroup.Limit.resolved).
    cgroup_version: int | None = None
    cpu_period_us: int | None = None
    cpu_quota_us: int | None = None
    cgroups: dict[str, str] | None = None
    #: The role budgets as applied (lab.budget: lab.cgroup.RoleLimits.resolved).
    role_quotas_us: dict[str, int] | None = None
    role_cgroups: dict[str, str] | None = None
    #: Generator processes that ran, and the congestion control the senders used.
    processes: int | None = None
    congestion: str | None = None
    #: Where the lab ran: the kernel's release (and Debian package when it was fetched),
    #: ``none`` (this machine's kernel), ``kvm`` or ``tcg`` (a VM guest: CPU-bound figures
    #: under ``tcg`` measure QEMU's emulation) and why not KVM, the guest's size.
    kernel_release: str | None = None
    kernel_package: str | None = None
    virtualization: str | None = None
    virtualization_reason: str | None = None
    vm_cpus: int | None = None
    vm_memory_mib: int | None = None
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
        return self.stream_mode is StreamMode.SINGLE

    @property
    def esp_or_tunnel_implementation(self) -> str | None:
        """Who did the work that varies: ESP's implementation where ESP ran, else the
        tunnel's."""
        return self.esp_implementation or self.tunnel_implementation

    def record_setup(self, found: SetupFound) -> None:
        """Store what a tunnel's set-up found out, under the record's fields."""
        if (esp := found.esp) is not None:
            self.esp_implementation, self.esp_version = esp.implementation, esp.version
            self.esp_cipher, self.esp_algorithm = esp.cipher, esp.algorithm
            self.esp_mode, self.esp_encapsulation = esp.mode, esp.encapsulation
        if (openvpn := found.openvpn) is not None:
            self.openvpn_dco, self.openvpn_dco_reason = openvpn.dco, openvpn.dco_reason
            self.openvpn_data_cipher = openvpn.data_cipher

    def setup_found(self) -> SetupFound:
        """What set-up found out, as :meth:`record_setup` stored it (a trial stored
        before :class:`SetupFound` was typed reads back the same)."""
        openvpn = None
        if self.openvpn_dco is not None:
            openvpn = OpenVpnFound(
                self.openvpn_dco, self.openvpn_dco_reason or "", self.openvpn_data_cipher
            )
        esp = None
        if self.esp_version is not None and self.esp_implementation is not None:
            esp = EspFound(
                self.esp_implementation, self.esp_version, self.esp_cipher or "",
                self.esp_algorithm or "", self.esp_mode or "", self.esp_encapsulation or "",
            )  # fmt: skip
        return SetupFound(esp, openvpn)

    def record_where(self, where: Where) -> None:
        self.kernel_release, self.kernel_package = where.kernel_release, where.kernel_package
        self.virtualization = where.virtualization
        self.virtualization_reason = where.virtualization_reason
        self.vm_cpus, self.vm_memory_mib = where.vm_cpus, where.vm_memory_mib

    def record_cpu_limit(
        self, version: int, period_us: int, quota_us: int, cgroups: Mapping[str, str]
    ) -> None:
        """``tunnel.cpu_budget`` as applied (:class:`tunnelbench.lab.cgroup.CpuLimit`)."""
        self.cgroup_version, self.cpu_period_us = version, period_us
        self.cpu_quota_us, self.cgroups = quota_us, dict(cgroups)

    def record_role_budgets(
        self,
        version: int,
        period_us: int,
        quotas_us: Mapping[str, int],
        cgroups: Mapping[str, str],
    ) -> None:
        """``lab.budget`` as applied (:class:`tunnelbench.lab.state.RoleLimitsRecord`)."""
        self.cgroup_version, self.cpu_period_us = version, period_us
        self.role_quotas_us, self.role_cgroups = dict(quotas_us), dict(cgroups)

    def to_dict(self, *, facts: bool = True) -> dict[str, Any]:
        """The stored form; without ``facts``, only what the settings became (the
        declared kind and generator facts left out, as in the CSV report)."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in ("tunnel", "generator", "extra") or value is None:
                continue
            if item.name == "stream_mode":
                value = value.value
            elif item.name == "remote":
                value = value.to_dict()
            elif item.name == "lab_families":
                value = list(value)
            out[item.name] = value
        if self.tunnel_implementation is not None and "tunnel_mtu" not in out:
            out["tunnel_mtu"] = None  # stored explicitly: a run without a tunnel
        if self.tunnel is not None and facts:
            out[TUNNEL_FACTS_KEY] = self.tunnel.to_dict()
        if self.generator is not None and facts:
            out[GENERATOR_FACTS_KEY] = self.generator.to_dict()
        return out | self.extra

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Resolved":
        known = {item.name for item in fields(cls)} - {"tunnel", "generator", "extra"}
        values: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        if values.get("stream_mode") is not None:
            values["stream_mode"] = StreamMode(values["stream_mode"])
        if values.get("lab_families") is not None:
            values["lab_families"] = tuple(values["lab_families"])
        if values.get("remote") is not None:
            values["remote"] = RemoteFacts.from_dict(values["remote"])
        tunnel = data.get(TUNNEL_FACTS_KEY)
        if tunnel and "kernel_path" not in tunnel:
            # Stored before kinds declared it: the store's backfill asks the kind again,
            # as for a trial stored before any facts were.
            tunnel = None
        generator = data.get(GENERATOR_FACTS_KEY)
        extra = {
            k: v
            for k, v in data.items()
            if k not in known and k not in (TUNNEL_FACTS_KEY, GENERATOR_FACTS_KEY)
        }
        return cls(
            **values,
            tunnel=TunnelFacts.from_dict(tunnel) if tunnel else None,
            generator=GeneratorFacts.from_dict(generator) if generator else None,
            extra=extra,
        )


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
