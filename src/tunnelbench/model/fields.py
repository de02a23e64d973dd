"""Every setting a plan file may name, by its path, with the parser that checks it.

One table shared by a plan's ``base``, its ``[matrix]`` axes and its ``exclude`` rules,
so a value means the same thing wherever it appears. Each parser takes the key path (for
the error message) and the raw TOML value, and returns the typed value or raises
:class:`UserError` naming the key, the bad value and what is allowed.
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any

from tunnelbench.echo import did_you_mean, shown
from tunnelbench.errors import UserError
from tunnelbench.kinds import (
    Cipher,
    Direction,
    EspMode,
    Generator,
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
from tunnelbench.model import cpulist, kernelspec
from tunnelbench.model.plan import (
    CPU_BUDGET_MAX,
    MTU_MAX,
    MTU_MIN,
    QUEUE_BYTES_MAX,
    QUEUE_LIMIT_MAX,
    QUEUES_MAX,
    ROLES,
    STREAMS_MAX,
    VM_CPUS_MAX,
    VM_MEMORY_MIB,
    WARMUP_AUTO,
    check_choice,
    check_family,
    check_int,
)
from tunnelbench.model.wan import DELAY_MAX_US
from tunnelbench.units import parse_rate, refuse_other_digits

Parser = Callable[[str, Any], Any]


@dataclass(frozen=True)
class Setting:
    path: str
    parse: Parser
    allowed: str  # what the documentation and `plan show --help` say is allowed


def _choice(enum: type[Enum]) -> Parser:
    def parse(key: str, value: Any) -> Any:
        if not isinstance(value, str):
            raise UserError(f"{key}: {shown(value)} is not a string; allowed: {_names(enum)}")
        return check_choice(key, value, enum)

    return parse


def _names(enum: type[Enum]) -> str:
    return ", ".join(str(m.value) for m in enum)


def _int(low: int, high: int) -> Parser:
    return lambda key, value: check_int(key, value, low, high)


def _optional_int(low: int, high: int) -> Parser:
    """A whole number in range, or 'none' for the default (None)."""
    return lambda key, value: None if value == "none" else check_int(key, value, low, high)


def _warmup(key: str, value: Any) -> int | None:
    """Whole seconds, or 'auto' (None): until the path is in steady state."""
    return None if value == WARMUP_AUTO else check_int(key, value, 0, 60)


def _rate(key: str, value: Any) -> int:
    if not isinstance(value, str):
        raise UserError(f"{key}: {shown(value)} is not a rate string such as '1gbit' or '100mbit'")
    return parse_rate(value, key=key)


def _optional_rate(key: str, value: Any) -> int | None:
    return None if value == "none" else _rate(key, value)


_DURATION = re.compile(r"(-?)([0-9]{1,9}(?:\.[0-9]{1,6})?)\s*(us|ms|s)")
_DURATION_SCALE = {"us": 1, "ms": 1000, "s": 1_000_000}
_PERCENT = re.compile(r"(-?)([0-9]{1,9}(?:\.[0-9]{1,6})?)\s*%")


def _delay(key: str, value: Any) -> int | None:
    """A delay such as '20ms', '500us', '0.5ms' or '1s', as whole microseconds from 0 to
    10 s; 0 or 'none' is off (None)."""
    if isinstance(value, str):
        refuse_other_digits(key, value, "20ms")
    match = _DURATION.fullmatch(value.strip()) if isinstance(value, str) else None
    if value == "none":
        return None
    if match is None:
        raise UserError(
            f"{key}: {shown(value)} is not a time such as '20ms', '500us' or '0.5ms', or 'none'"
        )
    sign, number, unit = match.groups()
    exact = Fraction(number) * _DURATION_SCALE[unit]
    if sign or exact > DELAY_MAX_US:
        raise UserError(f"{key}: {shown(value)} is out of range; allowed 0..10s")
    if exact.denominator != 1:
        raise UserError(f"{key}: {shown(value)} is not a whole number of microseconds")
    return int(exact) or None


def _percent(key: str, value: Any) -> float | None:
    """A share of the packets such as '1%' or '0.1%', from 0 to 100; 0 or 'none' is off
    (None)."""
    if isinstance(value, str):
        refuse_other_digits(key, value, "0.1%")
    match = _PERCENT.fullmatch(value.strip()) if isinstance(value, str) else None
    if value == "none":
        return None
    if match is None:
        raise UserError(
            f"{key}: {shown(value)} is not a percentage such as '1%' or '0.1%', or 'none'"
        )
    number = float(match.group(2))
    if match.group(1) or number > 100:
        raise UserError(f"{key}: {shown(value)} is out of range; allowed 0%..100%")
    return number or None


def _switch(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("on", "off"):
        return bool(value == "on")
    raise UserError(f"{key}: {shown(value)} is not a switch; allowed: true, false, 'on', 'off'")


def _roles(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise UserError(f"{key}: {shown(value)} is not a non-empty list of roles")
    for role in value:
        if role not in ROLES:
            raise UserError(
                f"{key}: unknown role {shown(role)}; allowed: {', '.join(ROLES)}"
                f"{did_you_mean(role, ROLES)}"
            )
    return tuple(value)


def _cpu_mask(key: str, value: Any) -> str:
    text = value.lower().removeprefix("0x") if isinstance(value, str) else ""
    if not re.fullmatch(r"[0-9a-f]{1,16}", text) or int(text, 16) == 0:
        raise UserError(f"{key}: {shown(value)} is not a hexadecimal CPU mask such as '3' or '0xf'")
    return text


def _cpu_list(key: str, value: Any) -> str:
    """A role's cores as the kernel lists them: ``"0"``, ``"0-1"``, ``"1,3"``; kept in
    canonical form so that equal sets are equal settings."""
    if not isinstance(value, str):
        raise UserError(f"{key}: {shown(value)} is not a CPU list such as '0', '0-1' or '1,3'")
    refuse_other_digits(key, value, "0-1")
    try:
        return cpulist.canonical(cpulist.parse(value))
    except ValueError as exc:
        raise UserError(f"{key}: {shown(value)} is not a CPU list ({exc})") from None


def _cpu_budget(key: str, value: Any) -> float:
    """A fraction of one core: 0.25, or the string '25%'."""
    number: float | None = None
    if isinstance(value, str):
        refuse_other_digits(key, value, "25%")
    if isinstance(value, str) and re.fullmatch(r"[0-9]+(\.[0-9]+)?%", value):
        number = float(value[:-1]) / 100
    elif isinstance(value, int | float) and not isinstance(value, bool):
        # TOML integers are unbounded here (10**400): beyond a float, out of range.
        number = float(value) if abs(value) < 2**64 else math.inf if value > 0 else -math.inf
    if number is None:
        raise UserError(f"{key}: {shown(value)} is not a share of one core such as 0.25 or '25%'")
    if not 0.01 <= number <= CPU_BUDGET_MAX:
        raise UserError(
            f"{key}: {shown(value)} is out of range; allowed 0.01..{CPU_BUDGET_MAX:g} cores"
        )
    return number


def _optional_budget(key: str, value: Any) -> float | None:
    """A role's budget, or 'none' for no limit (a matrix can then compare the two)."""
    return None if value == "none" else _cpu_budget(key, value)


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", value):
        raise UserError(f"{key}: {shown(value)} is not a name such as 'cubic' or 'bbr'")
    return value


def _implementation(key: str, value: Any) -> str:
    # Which names a tunnel kind accepts is checked once the kind is known.
    if not isinstance(value, str) or not value:
        raise UserError(f"{key}: {shown(value)} is not an implementation name")
    return value


def _memory(key: str, value: Any) -> int:
    """A guest's memory in MiB: a whole number of MiB, or '512M' / '2G'."""
    low, high = VM_MEMORY_MIB
    if isinstance(value, str):
        refuse_other_digits(key, value, "2G")
    match = (
        re.fullmatch(r"([0-9]{1,6})\s*([mg])i?b?", value.strip().lower())
        if isinstance(value, str)
        else None
    )
    if match is not None:
        number = int(match.group(1)) * (1024 if match.group(2) == "g" else 1)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise UserError(f"{key}: {shown(value)} is not a size such as '2G', '512M' or 2048 (MiB)")
    if not low <= number <= high:
        raise UserError(f"{key}: {shown(value)} is out of range; allowed {low}..{high} MiB")
    return number


def _mtu(key: str, value: Any) -> int:
    return check_int(key, value, MTU_MIN, MTU_MAX)


def _optional_mtu(key: str, value: Any) -> int | None:
    return None if value == "auto" else _mtu(key, value)


_TABLE = [
    Setting("lab.topology", _choice(Topology), _names(Topology)),
    Setting("lab.lan_mtu", _mtu, f"{MTU_MIN}..{MTU_MAX}"),
    Setting("lab.wan.mtu", _mtu, f"{MTU_MIN}..{MTU_MAX}"),
    Setting("lab.wan.rate", _optional_rate, "a rate such as '1gbit' or '250mbit', or 'none'"),
    Setting("lab.wan.shaper", _choice(Shaper), _names(Shaper)),
    Setting("lab.wan.queue", _choice(Queue), _names(Queue)),
    Setting("lab.wan.queue_limit", _int(1, QUEUE_LIMIT_MAX), f"1..{QUEUE_LIMIT_MAX} packets"),
    Setting(
        "lab.wan.queue_bytes",
        _optional_int(1, QUEUE_BYTES_MAX),
        f"1..{QUEUE_BYTES_MAX} bytes (a bfifo's limit), or 'none'",
    ),
    Setting("lab.wan.delay", _delay, "a time such as '20ms' or '500us' (0..10s), or 'none'"),
    Setting("lab.wan.jitter", _delay, "a time up to lab.wan.delay, such as '5ms', or 'none'"),
    Setting("lab.wan.loss", _percent, "a percentage such as '1%' or '0.1%', or 'none'"),
    Setting("lab.wan.reorder", _percent, "a percentage such as '1%' (needs a delay), or 'none'"),
    Setting("lab.wan.encapsulation", _choice(WanEncapsulation), _names(WanEncapsulation)),
    Setting("lab.offloads.gro", _switch, "true, false"),
    Setting("lab.offloads.gso", _switch, "true, false"),
    Setting("lab.offloads.tso", _switch, "true, false"),
    Setting("lab.offloads.roles", _roles, f"a list of roles: {', '.join(ROLES)}"),
    Setting("lab.rps_cpus", _cpu_mask, "a hexadecimal CPU mask such as '3'"),
    Setting("lab.placement", _choice(Placement), _names(Placement)),
    *(Setting(f"lab.cpus.{role}", _cpu_list, "a CPU list such as '0-1'") for role in ROLES),
    *(
        Setting(f"lab.budget.{role}", _optional_budget, "a share of one core: 0.5 or '50%'; 'none'")
        for role in ROLES
    ),
    Setting("lab.queues", _int(1, QUEUES_MAX), f"1..{QUEUES_MAX} queues per link"),
    Setting(
        "lab.kernel",
        kernelspec.parse_spec,
        "host, debian, a Debian kernel package or release, or a path",
    ),
    Setting("lab.vm.cpus", _int(1, VM_CPUS_MAX), f"1..{VM_CPUS_MAX} vCPUs"),
    Setting(
        "lab.vm.memory", _memory, f"{VM_MEMORY_MIB[0]}..{VM_MEMORY_MIB[1]} MiB, e.g. '2G' or '512M'"
    ),
    Setting("tunnel.kind", _choice(TunnelKind), _names(TunnelKind)),
    Setting("tunnel.implementation", _implementation, "auto, or one of the kind's"),
    Setting("tunnel.mtu", _optional_mtu, f"{MTU_MIN}..{MTU_MAX}, or 'auto'"),
    Setting("tunnel.cpu_budget", _cpu_budget, "a share of one core: 0.25 or '25%'"),
    Setting("tunnel.cipher", _choice(Cipher), _names(Cipher)),
    Setting("tunnel.esp_mode", _choice(EspMode), _names(EspMode)),
    Setting("tunnel.protection", _choice(Protection), _names(Protection)),
    Setting("traffic.generator", _choice(Generator), _names(Generator)),
    Setting("traffic.protocol", _choice(Protocol), _names(Protocol)),
    Setting("traffic.udp_rate", _rate, "a rate per stream such as '500mbit'"),
    Setting("traffic.streams", _int(1, STREAMS_MAX), f"1..{STREAMS_MAX}"),
    Setting("traffic.stream_mode", _choice(StreamMode), _names(StreamMode)),
    Setting("traffic.direction", _choice(Direction), _names(Direction)),
    Setting("traffic.duration", _int(1, 3600), "1..3600 seconds"),
    Setting("traffic.warmup", _warmup, "'auto' or 0..60 seconds"),
    Setting("traffic.warmup_max", _int(1, 120), "1..120 seconds (the bound of 'auto')"),
    Setting("traffic.family", check_family, "4, 6"),
    Setting("traffic.congestion", _name, "a TCP congestion control such as 'cubic' or 'bbr'"),
]

SETTINGS: dict[str, Setting] = {s.path: s for s in _TABLE}
#: Setting paths that group others (``lab.wan``): a plan may nest tables under them.
GROUPS = frozenset(path.rsplit(".", 1)[0] for path in SETTINGS) | {"lab", "tunnel", "traffic"}
