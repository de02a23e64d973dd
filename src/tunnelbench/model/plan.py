"""Experiment specification: validated, frozen settings and their expansion into trials.

Pure: nothing here touches the system. The CLI (and later plan files) build an
:class:`Experiment`; :func:`expand` turns it into the ordered list of trials the runner
executes, pairing every tunnel configuration with the same traffic over no tunnel.
"""

import functools
import itertools
import json
import math
import operator
import random
import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from enum import Enum
from typing import Any, TypeVar

from tunnelbench.echo import integer, shown, unknown_value
from tunnelbench.errors import UserError
from tunnelbench.kinds import (
    Cipher,
    Direction,
    EspMode,
    Generator,
    Order,
    Placement,
    Protection,
    Protocol,
    Queue,
    Shaper,
    StreamMode,
    Topology,
    TunnelKind,
    WanEncapsulation,
)
from tunnelbench.units import refuse_other_digits

E = TypeVar("E", bound=Enum)
D = TypeVar("D")

#: One setting's value, as a configuration holds it and a plan's parsed value is: an
#: enum is its member (a str), ``lab.offloads.roles`` a tuple (a list once stored).
SettingValue = str | int | float | bool | tuple[str, ...] | list[str] | None
#: Settings by their path (``lab.wan.rate``): a configuration's, flattened
#: (:meth:`TrialConfig.settings`), or those a plan or a tuning step sets.
Settings = dict[str, SettingValue]
#: Settings nested by section, as :meth:`TrialConfig.from_settings` builds them.
_Tree = dict[str, "SettingValue | _Tree"]

MTU_MIN, MTU_MAX = 576, 65535
IPV6_MTU_MIN = 1280
STREAMS_MAX = 128
QUEUE_LIMIT_MAX = 100_000  # packets
#: The largest byte limit a queue may have: 1 GiB (tc takes a 32-bit count).
QUEUE_BYTES_MAX = 1 << 30
CPU_BUDGET_MAX = 64.0  # cores
QUEUES_MAX = 16  # receive and transmit queues per veth
PPPOE_HEADER = 8  # PPPoE's 6 bytes and PPP's 2-byte protocol field, in every frame
#: The most trials one experiment may hold (every repetition and added baseline counted;
#: an adaptive one at its most repetitions): over a day and a half at 1 s per trial plus
#: overhead, and a bound on the memory and time that expanding it takes.
TRIALS_MAX = 10_000
ROLES = ("client", "gw", "gwa", "gwb", "server")


#: The ``lab.wan`` settings ``tc`` puts on a link's two ends: what real hosts take on
#: their WAN link too (:mod:`tunnelbench.remote.wan`); its MTU and encapsulation are the
#: link's own there.
WAN_TC_SETTINGS = (
    "rate", "shaper", "queue", "queue_limit", "queue_bytes", "delay", "jitter", "loss", "reorder",
)  # fmt: skip


@dataclass(frozen=True)
class LinkSettings:
    """The WAN link of the lab. ``rate`` shapes both directions of the link.

    ``queue`` None means a pfifo of ``queue_limit`` packets under the shaper, and the
    device's own default (none, for a veth) when the link is not shaped.

    The impairments (netem at each end's egress, above the shaper; None is off) are
    ``delay`` and ``jitter`` in microseconds (jitter: uniform within delay ± jitter,
    packets kept in order) and ``loss`` and ``reorder`` in percent of the packets
    (reorder: sent at once, ahead of the delayed ones). :mod:`tunnelbench.model.wan`
    checks how they combine.
    """

    mtu: int = 1500
    rate: int | None = None  # bit/s
    shaper: Shaper = Shaper.TBF
    queue: Queue | None = None
    queue_limit: int = 1000  # packets (skbs: GSO/GRO aggregates count as one) held by the queue
    #: A ``bfifo``'s limit in bytes; None is ``queue_limit`` full frames' worth.
    queue_bytes: int | None = None
    delay: int | None = None  # microseconds, each direction
    jitter: int | None = None  # microseconds
    loss: float | None = None  # percent
    reorder: float | None = None  # percent
    #: PPPoE: the link's IP MTU is ``mtu`` minus PPPOE_HEADER (:mod:`tunnelbench.lab.pppoe`).
    encapsulation: WanEncapsulation = WanEncapsulation.NONE

    @property
    def ip_mtu(self) -> int:
        """The largest IP packet the WAN carries: PPPoE takes its header from the MTU."""
        return self.mtu - (PPPOE_HEADER if self.encapsulation is WanEncapsulation.PPPOE else 0)

    @property
    def impaired(self) -> bool:
        """Whether netem runs on the link: any impairment is set."""
        return any(v is not None for v in (self.delay, self.jitter, self.loss, self.reorder))


@dataclass(frozen=True)
class Offloads:
    """GRO/GSO/TSO on the lab's links; None leaves the kernel's default.

    ``roles`` empty means every role of the topology.
    """

    gro: bool | None = None
    gso: bool | None = None
    tso: bool | None = None
    roles: tuple[str, ...] = ()

    def changes(self) -> dict[str, bool]:
        return {
            name: value
            for name, value in (("gro", self.gro), ("gso", self.gso), ("tso", self.tso))
            if value is not None
        }


@dataclass(frozen=True)
class RoleCpus:
    """Cores a role's processes and receive work are held to, as a canonical CPU list
    (``"0"``, ``"0-1"``, ``"1,3"``); None leaves the role to the placement."""

    client: str | None = None
    gw: str | None = None
    gwa: str | None = None
    gwb: str | None = None
    server: str | None = None

    def given(self) -> dict[str, str]:
        return {role: getattr(self, role) for role in ROLES if getattr(self, role) is not None}


@dataclass(frozen=True)
class RoleBudgets:
    """A CPU budget per role, as a fraction of one core, over every process the role
    starts (its generator, its tunnel daemon, its probes) together; None is no limit.
    What it slows and what it cannot (the kernel's own forwarding) is in
    :mod:`tunnelbench.lab.cgroup`."""

    client: float | None = None
    gw: float | None = None
    gwa: float | None = None
    gwb: float | None = None
    server: float | None = None

    def given(self) -> dict[str, float]:
        return {role: getattr(self, role) for role in ROLES if getattr(self, role) is not None}


#: ``lab.kernel`` for the machine's own kernel: the lab in network namespaces here.
HOST_KERNEL = "host"
VM_CPUS_MAX = 8
VM_MEMORY_MIB = (256, 16384)


@dataclass(frozen=True)
class VmSettings:
    """The guest a lab on another kernel runs in (:mod:`tunnelbench.vm`): its vCPUs are
    the lab's cores, its memory in MiB. Ignored (and normalized away) on the host."""

    cpus: int = 2
    memory: int = 2048


@dataclass(frozen=True)
class LabSettings:
    topology: Topology = Topology.ROAD_WARRIOR
    wan: LinkSettings = field(default_factory=LinkSettings)
    lan_mtu: int = 1500
    offloads: Offloads = field(default_factory=Offloads)
    rps_cpus: str | None = None  # hex CPU mask for receive packet steering on every link
    placement: Placement = Placement.FREE
    cpus: RoleCpus = field(default_factory=RoleCpus)
    budget: RoleBudgets = field(default_factory=RoleBudgets)
    #: Receive and transmit queues of every veth; None is the device's one queue with
    #: receive work on the sending core. N: the receive work of each flow goes to one of
    #: N cores by the flow's hash, as a NIC's RSS spreads flows over N queues
    #: (:func:`tunnelbench.lab.netns.queue_masks`), so 1 is "one queue, one core".
    queues: int | None = None
    #: ``host``, or a kernel booted in a VM for the lab (:mod:`tunnelbench.vm.kernels`).
    kernel: str = HOST_KERNEL
    vm: VmSettings = field(default_factory=VmSettings)

    @property
    def in_vm(self) -> bool:
        return self.kernel != HOST_KERNEL

    @property
    def families(self) -> tuple[int, ...]:
        """The IP versions the lab's links carry: IPv6 needs an MTU of at least 1280
        on every link (RFC 8200), so a lab with a smaller link MTU is IPv4 only."""
        if self.wan.encapsulation is WanEncapsulation.PPPOE:
            return (4,)  # IPv6 over PPP needs IPV6CP and addressing the lab does not do
        return (4, 6) if min(self.wan.mtu, self.lan_mtu) >= IPV6_MTU_MIN else (4,)


#: How plans, options and stored configurations spell ``tunnel.implementation`` when
#: the user names none: the model holds None (no choice; each kind resolves its own).
IMPLEMENTATION_AUTO = "auto"


def requested_implementation(spelt: str) -> str | None:
    """``tunnel.implementation`` as written (a plan, an option, a stored configuration)
    to the model's: None for "auto", the absence of a choice; else the name."""
    return None if spelt == IMPLEMENTATION_AUTO else spelt


def spelt_implementation(requested: str | None) -> str:
    """The inverse of :func:`requested_implementation`: how it is written and stored."""
    return IMPLEMENTATION_AUTO if requested is None else requested


@dataclass(frozen=True)
class TunnelSettings:
    """``implementation`` None (written ``auto``) leaves the choice to the kind: the
    runner resolves it and records what ran. ``mtu`` None means the underlay MTU minus
    the tunnel's encapsulation overhead. ``cpu_budget``
    caps each userspace tunnel daemon at that fraction of one core. ``cipher`` and
    ``esp_mode`` apply to encrypting tunnels and to ``protection`` (IPsec around an
    unencrypted tunnel); each kind checks which values it can do."""

    kind: TunnelKind = TunnelKind.NONE
    implementation: str | None = None
    mtu: int | None = None
    cpu_budget: float | None = None
    cipher: Cipher = Cipher.AUTO
    esp_mode: EspMode = EspMode.TUNNEL
    protection: Protection = Protection.NONE


#: Runs of every configuration when a plan or the options do not say: 5 a side is what
#: lets the rank test reach p < 0.05 with a run to spare (3 never can; 4 only when every
#: run of one side beats every run of the other), so `compare` and the advice can decide.
REPETITIONS_DEFAULT = 5
#: Measured seconds of a trial when not given: 5 runs of 3 s keep the default run near
#: 3 minutes (docs/statistics.md, "Defaults").
DURATION_DEFAULT = 3
#: ``traffic.warmup = "auto"`` (None in the model): the warm-up ends once the path is in
#: steady state (:mod:`tunnelbench.traffic.warmup`), after at most ``warmup_max`` seconds.
WARMUP_AUTO = "auto"
WARMUP_MAX_DEFAULT = 20
#: What "auto" is where the warm-up cannot end on evidence (iperf2, which cannot be
#: stopped with its reports kept; real hosts): this many seconds, recorded per trial.
WARMUP_FIXED_FALLBACK = 1
#: What "auto" is expected to take, for estimates before any trial has run: most paths
#: keep the window opened on trial at 0.1 s (0.18 s on average over the default run's
#: trials on the reference machine, some windows dropped). Behind a shaped WAN a queue
#: fills first: 0.1-3 s, 1.8 s on average, in queue-comparison --quick (its bound, 3 s,
#: reached by 2 of 8), so there the estimate is longer, at most the bound.
WARMUP_AUTO_ESTIMATE = 0.3
WARMUP_SHAPED_ESTIMATE = 1.5


@dataclass(frozen=True)
class TrafficSettings:
    """``udp_rate`` is the target rate per stream (bit/s), required for UDP.
    ``congestion`` None: cubic in the lab (:mod:`tunnelbench.bench.congestion`), the
    kernel's default on real hosts."""

    generator: Generator = Generator.IPERF3
    protocol: Protocol = Protocol.TCP
    udp_rate: int | None = None
    streams: int = 1
    stream_mode: StreamMode = StreamMode.AUTO
    direction: Direction = Direction.UPLOAD
    duration: int = DURATION_DEFAULT
    #: Seconds excluded at the start, or None ("auto"): until the path is in steady
    #: state, at most ``warmup_max`` seconds.
    warmup: int | None = None
    family: int = 4
    congestion: str | None = None
    warmup_max: int = WARMUP_MAX_DEFAULT

    @property
    def longest_warmup(self) -> int:
        """The most seconds the warm-up can take: its fixed length, or auto's bound."""
        return self.warmup if self.warmup is not None else self.warmup_max

    @property
    def fixed_warmup(self) -> int:
        """The warm-up where it cannot end on evidence: its fixed length, or
        :data:`WARMUP_FIXED_FALLBACK` for "auto"."""
        return self.warmup if self.warmup is not None else WARMUP_FIXED_FALLBACK


@dataclass(frozen=True)
class TrialConfig:
    """Everything that defines one configuration; repetitions share it."""

    lab: LabSettings = field(default_factory=LabSettings)
    tunnel: TunnelSettings = field(default_factory=TunnelSettings)
    traffic: TrafficSettings = field(default_factory=TrafficSettings)

    def to_dict(self) -> dict[str, Any]:
        """The stored form, which :meth:`from_dict` reads back equal: nested by section,
        a tuple as the list JSON keeps (a stored configuration read and written again
        is the dict it was)."""
        data = asdict(self, dict_factory=_listed)
        data["tunnel"]["implementation"] = spelt_implementation(self.tunnel.implementation)
        return data

    def settings(self) -> Settings:
        """Every setting by its path (``lab.wan.rate``), as :meth:`to_dict` stores it."""
        return flatten(self.to_dict())

    def key(self) -> str:
        """A canonical text identity: equal configurations have equal keys.

        A setting of :data:`LEGACY` is left out while it holds the value every earlier
        version ran with, so a configuration stored before it existed keeps its key."""
        data = self.to_dict()
        for (*parents, name), value in LEGACY.items():
            node = functools.reduce(operator.getitem, parents, data)
            if node[name] == value:
                del node[name]
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def baseline(self) -> "TrialConfig":
        """The same lab and traffic with no tunnel."""
        return replace(self, tunnel=TunnelSettings())

    @property
    def expected_warmup(self) -> float:
        """The warm-up expected, for estimates: a fixed one's length, and what "auto" is
        where it cannot end on evidence (iperf2); else :data:`WARMUP_SHAPED_ESTIMATE` behind
        a shaped WAN, at most its bound, or :data:`WARMUP_AUTO_ESTIMATE`."""
        traffic = self.traffic
        if traffic.warmup is not None or traffic.generator is not Generator.IPERF3:
            return traffic.fixed_warmup
        if self.lab.wan.rate is not None:
            return min(WARMUP_SHAPED_ESTIMATE, traffic.warmup_max)
        return WARMUP_AUTO_ESTIMATE

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrialConfig":
        """The inverse of :meth:`to_dict`; keys a stored configuration lacks (it was
        written before that setting existed) take the value it ran with: that of
        :data:`LEGACY`, else the default."""
        sections = {name: dict(data.get(name) or {}) for name in ("lab", "tunnel", "traffic")}
        for (*parents, name), value in LEGACY.items():
            node: dict[str, Any] = sections
            for part in parents:  # copies, so that ``data`` is left as it was
                node[part] = node = dict(node.get(part) or {})
            node.setdefault(name, value)
        return _from_dict(cls, _requested({**data, **sections}))

    @classmethod
    def from_settings(cls, settings: Settings) -> "TrialConfig":
        """A new configuration from the settings given by path (a plan's): the rest take
        today's defaults."""
        tree: _Tree = {}
        for path, value in settings.items():
            node = tree
            *parents, leaf = path.split(".")
            for part in parents:
                inner = node.setdefault(part, {})
                assert isinstance(inner, dict)  # a path's sections are sections
                node = inner
            node[leaf] = value
        return _from_dict(cls, _requested(tree))


#: Settings added after configurations were first stored, by their path, with the value
#: every earlier version ran with (today's default may differ): processes ran where the
#: scheduler put them, and the WAN had no impairments.
LEGACY: dict[tuple[str, ...], Any] = {
    ("lab", "placement"): "free",
    ("lab", "cpus"): asdict(RoleCpus()),
    ("lab", "budget"): asdict(RoleBudgets()),
    ("lab", "queues"): None,
    ("lab", "kernel"): HOST_KERNEL,
    ("lab", "vm"): asdict(VmSettings()),
    ("lab", "wan", "delay"): None,
    ("lab", "wan", "jitter"): None,
    ("lab", "wan", "loss"): None,
    ("lab", "wan", "reorder"): None,
    ("lab", "wan", "encapsulation"): "none",
    ("lab", "wan", "queue_bytes"): None,
    ("traffic", "warmup_max"): WARMUP_MAX_DEFAULT,
}


def _requested(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its tunnel's implementation as the model holds it (None for
    "auto"); ``data`` itself is left as it was."""
    tunnel = data.get("tunnel")
    if not isinstance(tunnel, dict) or tunnel.get("implementation") is None:
        return data
    requested = requested_implementation(tunnel["implementation"])
    return {**data, "tunnel": {**tunnel, "implementation": requested}}


def _listed(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in items}


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested settings dictionary as {setting path: value}, e.g. ``lab.wan.rate``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= flatten(value, path + ".")
        else:
            out[path] = value
    return out


def varying_paths(configs: Iterable[TrialConfig]) -> list[str]:
    """Setting paths whose value differs between the configurations."""
    flat = [flatten(c.to_dict()) for c in configs]
    paths = sorted({k for f in flat for k in f})
    return [k for k in paths if len({json.dumps(f.get(k)) for f in flat}) > 1]


def _from_dict(cls: type[D], data: dict[str, Any]) -> D:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            values[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**values)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(hint, types.UnionType):  # X | None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if is_dataclass(hint):
        return _from_dict(hint, value)  # type: ignore[arg-type]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if typing.get_origin(hint) is tuple:
        return tuple(value)
    if hint is float:
        return float(value)
    return value


#: Most repetitions of one configuration, fixed or adaptive.
REPETITIONS_MAX = 100
#: Adaptive repetitions' minimum and maximum when a plan or the options do not give them.
ADAPTIVE_MIN, ADAPTIVE_MAX = 3, 10


@dataclass(frozen=True)
class AdaptiveRepetitions:
    """Repeat a configuration until its median is known precisely enough.

    After the experiment's ``repetitions`` (the minimum), a configuration gets another
    round while the bootstrap 95% interval of its median goodput is wider than
    ``target_pct`` percent of the median either side, and it has had fewer than
    ``max_repetitions`` attempts (failed ones included, so a configuration that keeps
    failing stops too). See :mod:`tunnelbench.analysis.precision`.
    """

    target_pct: float  # the interval's half-width, in % of the median
    max_repetitions: int

    def to_dict(self) -> dict[str, Any]:
        return {"target_pct": self.target_pct, "max_repetitions": self.max_repetitions}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AdaptiveRepetitions":
        return cls(float(data["target_pct"]), int(data["max_repetitions"]))


@dataclass(frozen=True)
class Experiment:
    """The configurations to compare, how often, and in which order.

    ``seed`` orders a shuffled experiment; the runner picks one (and records it) when
    the plan did not. With ``adaptive``, ``repetitions`` is the minimum every
    configuration gets and :func:`expand` gives those rounds; the runner adds rounds.
    ``fresh_labs``: build a lab for every trial instead of keeping each lab standing for
    the next trial of the same lab and tunnel (:mod:`tunnelbench.bench.labpool`).
    """

    configs: tuple[TrialConfig, ...]
    repetitions: int = REPETITIONS_DEFAULT
    order: Order = Order.INTERLEAVED
    seed: int | None = None
    name: str | None = None
    adaptive: AdaptiveRepetitions | None = None
    fresh_labs: bool = False

    def __post_init__(self) -> None:
        # Plan files and options check these with messages for the user; reaching here
        # with such values is a programming error.
        a = self.adaptive
        if a is not None and not 2 <= self.repetitions <= a.max_repetitions:
            raise ValueError(f"adaptive repetitions {self.repetitions}..{a.max_repetitions}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repetitions": self.repetitions,
            "order": self.order.value,
            "seed": self.seed,
            "adaptive": None if self.adaptive is None else self.adaptive.to_dict(),
            "fresh_labs": self.fresh_labs,
            "configs": [c.to_dict() for c in self.configs],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Experiment":
        """The inverse of :meth:`to_dict`; an experiment stored before adaptive
        repetitions existed has none, and one stored before labs were kept between
        trials built a fresh one for each."""
        adaptive = data.get("adaptive")
        return cls(
            configs=tuple(TrialConfig.from_dict(c) for c in data["configs"]),
            repetitions=data["repetitions"],
            order=Order(data.get("order", Order.INTERLEAVED.value)),
            seed=data.get("seed"),
            name=data.get("name"),
            adaptive=None if adaptive is None else AdaptiveRepetitions.from_dict(adaptive),
            fresh_labs=bool(data.get("fresh_labs", True)),
        )


@dataclass(frozen=True)
class Trial:
    seq: int
    repetition: int
    config: TrialConfig


def with_baselines(configs: Iterable[TrialConfig]) -> list[TrialConfig]:
    """The configurations with the no-tunnel baseline each tunnel needs, deduplicated.

    A baseline is placed just before the first configuration that needs it.
    """
    ordered: list[TrialConfig] = []
    seen: set[str] = set()
    for config in configs:
        needed = [config] if config.tunnel.kind is TunnelKind.NONE else [config.baseline(), config]
        for candidate in needed:
            key = candidate.key()
            if key not in seen:
                seen.add(key)
                ordered.append(candidate)
    return ordered


def trial_count(experiment: Experiment) -> int:
    """How many trials the experiment holds at most (baselines and, for an adaptive one,
    its most repetitions included), counted without expanding it."""
    most = experiment.adaptive.max_repetitions if experiment.adaptive else experiment.repetitions
    return len(with_baselines(experiment.configs)) * most


def check_size(experiment: Experiment, where: str) -> None:
    """Refuse an experiment of more than :data:`TRIALS_MAX` trials, giving its count."""
    count = trial_count(experiment)
    if count > TRIALS_MAX:
        configs = len(with_baselines(experiment.configs))
        most = count // configs
        raise UserError(
            f"{where}: {count:,} trials ({configs:,} configurations with their baselines"
            f" x {most} repetition(s)); at most {TRIALS_MAX:,} are allowed"
        )


def expand(experiment: Experiment) -> list[Trial]:
    """The trials to run, in order.

    Every tunnel configuration gets its no-tunnel baseline. Configurations are
    interleaved across repetitions, so slow drift (thermal, background load) spreads
    over all of them instead of biasing the ones that ran last; ``shuffled`` also
    permutes each round, with the experiment's seed, so a periodic disturbance cannot
    line up with one configuration.
    """
    ordered = with_baselines(experiment.configs)
    _require_seed(experiment)
    shuffle = random.Random(experiment.seed)
    trials: list[Trial] = []
    for repetition in range(1, experiment.repetitions + 1):
        round_ = list(ordered)
        if experiment.order is Order.SHUFFLED:
            shuffle.shuffle(round_)
        for config in round_:
            trials.append(Trial(seq=len(trials) + 1, repetition=repetition, config=config))
    return trials


def _require_seed(experiment: Experiment) -> None:
    if experiment.order is Order.SHUFFLED and experiment.seed is None:
        raise ValueError("a shuffled experiment needs a seed before it is expanded")


def extra_round_order(experiment: Experiment, repetition: int) -> list[TrialConfig]:
    """The order of an adaptive round beyond the planned ones (``repetition`` >
    ``experiment.repetitions``): every configuration, baselines included, of which the
    runner keeps those that need another run.

    Interleaved: the plan's order. Shuffled: permuted by a generator seeded with the
    experiment's seed and the round number, so a round's order depends on nothing else
    (not on which configurations happen to need it) and a resumed run repeats it.
    """
    ordered = with_baselines(experiment.configs)
    _require_seed(experiment)
    if experiment.order is Order.SHUFFLED:
        random.Random(f"{experiment.seed}/round {repetition}").shuffle(ordered)
    return ordered


# --- validation helpers: each names the key, the bad value and what is allowed ---


def check_int(key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{key}: {shown(value)} is not a whole number ({low}..{high})")
    if not low <= value <= high:
        raise UserError(f"{key}: {integer(value)} is out of range; allowed {low}..{high}")
    return value


def check_mtu(key: str, value: object, *, family: int = 4) -> int:
    low = IPV6_MTU_MIN if family == 6 else MTU_MIN
    return check_int(key, value, low, MTU_MAX)


def check_choice(key: str, value: object, enum: type[E]) -> E:
    try:
        return enum(value)
    except ValueError:
        allowed = [str(member.value) for member in enum]
        raise UserError(f"{key}: {unknown_value(value, allowed)}") from None


def check_target_pct(key: str, value: object) -> float:
    """A precision target in percent of the median: ``"2%"``, ``2`` or ``2.0`` all mean
    ±2% (a number is a percentage, not a fraction), strictly between 0 and 100."""
    number: float | None = None
    if isinstance(value, str):
        refuse_other_digits(key, value, "2%")
    if isinstance(value, str) and re.fullmatch(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)%?", value.strip()):
        number = float(value.strip().removesuffix("%"))
    elif isinstance(value, int) and not isinstance(value, bool) and not 0 < value < 100:
        # Before float(): an integer of hundreds of digits does not convert.
        raise UserError(f"{key}: {shown(value)} is out of range; allowed above 0% and below 100%")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    if number is None or not math.isfinite(number):
        raise UserError(f"{key}: {shown(value)} is not a percentage such as '2%' or 0.5")
    if not 0 < number < 100:
        raise UserError(f"{key}: {shown(value)} is out of range; allowed above 0% and below 100%")
    return number


def check_family(key: str, value: object) -> int:
    if value == 4 or value == 6:
        return 4 if value == 4 else 6
    raise UserError(f"{key}: {shown(value)} is not an IP version; allowed: 4, 6")


def product_configs(
    base: TrialConfig,
    tunnels: Sequence[TunnelSettings],
    streams: Iterable[int],
) -> tuple[TrialConfig, ...]:
    """The configurations of a tunnels x streams sweep around ``base``."""
    return tuple(
        replace(
            base,
            # A baseline carries no tunnel settings, so it pairs with every tunnel's.
            tunnel=TunnelSettings() if tunnel.kind is TunnelKind.NONE else tunnel,
            traffic=replace(base.traffic, streams=count),
        )
        for tunnel, count in itertools.product(tunnels, streams)
    )
