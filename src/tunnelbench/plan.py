"""Experiment specification: validated, frozen settings and their expansion into trials.

Pure: nothing here touches the system. The CLI (and later plan files) build an
:class:`Experiment`; :func:`expand` turns it into the ordered list of trials the runner
executes, pairing every tunnel configuration with the same traffic over no tunnel.
"""

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

from tunnelbench.errors import UserError
from tunnelbench.kinds import (
    Direction,
    Generator,
    Shaper,
    StreamMode,
    Topology,
    TunnelKind,
    choices,
)

E = TypeVar("E", TunnelKind, Topology, Direction, StreamMode, Shaper, Generator)

MTU_MIN, MTU_MAX = 576, 65535
IPV6_MTU_MIN = 1280
STREAMS_MAX = 128


@dataclass(frozen=True)
class LinkSettings:
    """One veth link of the lab. ``rate`` shapes both directions of the link."""

    mtu: int = 1500
    rate: int | None = None  # bit/s
    shaper: Shaper = Shaper.TBF
    queue_limit: int = 1000  # packets held by the shaper


@dataclass(frozen=True)
class LabSettings:
    topology: Topology = Topology.ROAD_WARRIOR
    wan: LinkSettings = field(default_factory=LinkSettings)
    lan_mtu: int = 1500


@dataclass(frozen=True)
class TunnelSettings:
    """``implementation`` "auto" is resolved by the runner and recorded; ``mtu`` None
    means the underlay MTU minus the tunnel's encapsulation overhead."""

    kind: TunnelKind = TunnelKind.NONE
    implementation: str = "auto"
    mtu: int | None = None


@dataclass(frozen=True)
class TrafficSettings:
    generator: Generator = Generator.IPERF3
    streams: int = 1
    stream_mode: StreamMode = StreamMode.AUTO
    direction: Direction = Direction.UPLOAD
    duration: int = 5
    warmup: int = 1
    family: int = 4


@dataclass(frozen=True)
class TrialConfig:
    """Everything that defines one configuration; repetitions share it."""

    lab: LabSettings = field(default_factory=LabSettings)
    tunnel: TunnelSettings = field(default_factory=TunnelSettings)
    traffic: TrafficSettings = field(default_factory=TrafficSettings)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> str:
        """A canonical text identity: equal configurations have equal keys."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def baseline(self) -> "TrialConfig":
        """The same lab and traffic with no tunnel."""
        return replace(self, tunnel=TunnelSettings())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrialConfig":
        lab = data["lab"]
        wan = lab["wan"]
        tunnel = data["tunnel"]
        traffic = data["traffic"]
        return cls(
            lab=LabSettings(
                topology=Topology(lab["topology"]),
                wan=LinkSettings(
                    mtu=wan["mtu"],
                    rate=wan["rate"],
                    shaper=Shaper(wan["shaper"]),
                    queue_limit=wan["queue_limit"],
                ),
                lan_mtu=lab["lan_mtu"],
            ),
            tunnel=TunnelSettings(
                kind=TunnelKind(tunnel["kind"]),
                implementation=tunnel["implementation"],
                mtu=tunnel["mtu"],
            ),
            traffic=TrafficSettings(
                generator=Generator(traffic["generator"]),
                streams=traffic["streams"],
                stream_mode=StreamMode(traffic["stream_mode"]),
                direction=Direction(traffic["direction"]),
                duration=traffic["duration"],
                warmup=traffic["warmup"],
                family=traffic["family"],
            ),
        )


@dataclass(frozen=True)
class Experiment:
    configs: tuple[TrialConfig, ...]
    repetitions: int = 3


@dataclass(frozen=True)
class Trial:
    seq: int
    repetition: int
    config: TrialConfig


def expand(experiment: Experiment) -> list[Trial]:
    """The trials to run, in order.

    Every tunnel configuration gets its no-tunnel baseline (added if absent, placed
    before the first configuration that needs it). Configurations are interleaved across
    repetitions, so slow drift (thermal, background load) spreads over all of them
    instead of biasing the ones that ran last.
    """
    ordered: list[TrialConfig] = []
    seen: set[str] = set()
    for config in experiment.configs:
        needed = [config] if config.tunnel.kind is TunnelKind.NONE else [config.baseline(), config]
        for candidate in needed:
            key = candidate.key()
            if key not in seen:
                seen.add(key)
                ordered.append(candidate)
    trials: list[Trial] = []
    for repetition, config in itertools.product(range(1, experiment.repetitions + 1), ordered):
        trials.append(Trial(seq=len(trials) + 1, repetition=repetition, config=config))
    return trials


# --- validation helpers: each names the key, the bad value and what is allowed ---


def check_int(key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{key}: {value!r} is not a whole number ({low}..{high})")
    if not low <= value <= high:
        raise UserError(f"{key}: {value} is out of range; allowed {low}..{high}")
    return value


def check_mtu(key: str, value: object, *, family: int = 4) -> int:
    low = IPV6_MTU_MIN if family == 6 else MTU_MIN
    return check_int(key, value, low, MTU_MAX)


def check_choice(key: str, value: str, enum: type[E]) -> E:
    try:
        return enum(value)
    except ValueError:
        raise UserError(f"{key}: unknown value {value!r}; allowed: {choices(enum)}") from None


def check_family(key: str, value: object) -> int:
    if value == 4 or value == 6:
        return 4 if value == 4 else 6
    raise UserError(f"{key}: {value!r} is not an IP version; allowed: 4, 6")


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
