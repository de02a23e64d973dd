"""Plan files: a TOML description of an experiment matrix, checked completely.

A plan has ``base`` settings, a ``[matrix]`` of axes whose cartesian product gives the
configurations, ``exclude`` rules that remove combinations, ``repetitions`` and an
``order``. Every problem in the file is collected and reported together, each naming its
key path, the bad value and what is allowed; nothing runs unless the whole plan is valid.
Pure: reading the file is the only I/O. See docs/plans.md.
"""

import functools
import itertools
import math
import operator
import os
import stat
import tomllib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeVar

from tunnelbench.bench import conflicts
from tunnelbench.bench.labpool import KEEP, farthest, lab_key
from tunnelbench.echo import capped, did_you_mean, shown
from tunnelbench.errors import UserError
from tunnelbench.kinds import (
    Order,
    Placement,
    Protocol,
    StreamMode,
    TunnelKind,
    WanEncapsulation,
)
from tunnelbench.lab.topology import CHAINS
from tunnelbench.model import wan
from tunnelbench.model.fields import GROUPS, SETTINGS
from tunnelbench.model.plan import (
    ADAPTIVE_MAX,
    ADAPTIVE_MIN,
    IMPLEMENTATION_AUTO,
    IPV6_MTU_MIN,
    REPETITIONS_DEFAULT,
    REPETITIONS_MAX,
    TRIALS_MAX,
    AdaptiveRepetitions,
    Experiment,
    Settings,
    SettingValue,
    Trial,
    TrialConfig,
    TunnelSettings,
    VmSettings,
    check_choice,
    check_int,
    check_size,
    check_target_pct,
    expand,
)
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.units import human_span, parse_span

T = TypeVar("T")

TOP_KEYS = (
    "name",
    "description",
    "repetitions",
    "order",
    "seed",
    "fresh_labs",
    "time_limit",
    "base",
    "matrix",
    "exclude",
)
#: Seconds a trial costs besides its traffic where its lab is built (namespaces, links,
#: tunnel, generator start, teardown) and where a lab kept from an earlier trial of the
#: same lab and tunnel serves it (checked, handed over), on the 2-core reference machine:
#: medians of 0.33 s and 0.24 s in every-tunnel --quick (OpenVPN's set-up 1.6 s), more
#: where a kept shaped link drains first or several iperf3 clients are stopped once their
#: window has closed (docs/statistics.md). A built lab cost 0.95 s more until each veth
#: end had an index of its own (tunnelbench.lab.netns.link_indexes).
TRIAL_OVERHEAD_S = 0.5
KEPT_TRIAL_OVERHEAD_S = 0.4
#: A lab on another kernel, in a VM under emulation (TCG) on the 2-core reference
#: machine: the guest's start (boot, tunnelbench's start, its capability probe: 25.3-29.7 s
#: to the first trial), a trial in a kept lab (1.7-2.1 s besides its traffic, `benchmarks
#: vm`) and one whose lab is built (about 4 s: kernel-wireguard-mtu --quick, 8 labs
#: built, took 76.2 s). docs/kernels.md, "Time".
VM_BOOT_S = 27.0
VM_TRIAL_OVERHEAD_S = 4.0
VM_KEPT_TRIAL_OVERHEAD_S = 2.0
#: A run's own start (plan check, capability probe) and its reports once it has ended
#: (the Markdown's PNG charts cost most, each configuration a small chart more): 0.5-0.7 s
#: to the first trial; 1.8 s of reports for 1 configuration, 5.3 s for 8, 8.2 s for 16.
RUN_START_S = 0.7
REPORT_S = 1.4
REPORT_PER_CONFIG_S = 0.45


@dataclass(frozen=True)
class Overheads:
    """What a trial costs besides its traffic, and a guest's start: the reference
    machine's figures above, or this machine's own where its stored trials tell them
    (:mod:`tunnelbench.bench.learned`)."""

    built_s: float = TRIAL_OVERHEAD_S
    kept_s: float = KEPT_TRIAL_OVERHEAD_S
    vm_built_s: float = VM_TRIAL_OVERHEAD_S
    vm_kept_s: float = VM_KEPT_TRIAL_OVERHEAD_S
    vm_boot_s: float = VM_BOOT_S
    #: Each learned figure's field name and how many stored trials (boots for
    #: ``vm_boot_s``) it is the median of; the others are the reference machine's.
    learned: tuple[tuple[str, int], ...] = ()

    def trial_s(self, config: TrialConfig, *, kept: bool) -> float:
        if config.lab.in_vm:
            return self.vm_kept_s if kept else self.vm_built_s
        return self.kept_s if kept else self.built_s


#: The reference machine's figures, before this machine has stored any.
REFERENCE = Overheads()
#: The same 2-core machine's VM figures on a day with other work on it (issue 42: 41.3-41.6 s
#: to the first guest trial, 3.1-3.5 s a kept-lab trial and 5.0-6.0 s a built one besides
#: its traffic): the high end of an estimate not yet learned on this machine. An emulated
#: guest feels the host's load 1.5-2 times over, so one figure would be wrong on one day
#: or the other.
BUSY_VM = replace(REFERENCE, vm_boot_s=42.0, vm_built_s=6.0, vm_kept_s=3.5)

QUICK_DURATION, QUICK_WARMUP, QUICK_WARMUP_MAX = 1, 1, 3
#: The longest a run may take by its estimate (the reference machine's overheads, so the
#: answer does not depend on the machine) unless the plan's ``time_limit`` (the command
#: line's ``--time-limit``) allows more: a week. Longer is more often a slip (a duration
#: in seconds where minutes were meant, one axis too many: a plan of 424 days was once
#: accepted without a word) than a measurement anyone waits for; one who does says so.
TIME_LIMIT_S = 7 * 86_400
#: The largest plan file read: the scenarios are 1-3 kB.
PLAN_BYTES_MAX = 1024 * 1024
#: The most exclude rules a plan may have (the scenarios have at most a few).
EXCLUDE_RULES_MAX = 1000
#: Problems listed in one error; the rest are counted.
PROBLEMS_SHOWN = 20
#: The longest line of a problem; longer ones (a long key path) are cut.
PROBLEM_CHARS_MAX = 300


class PlanError(UserError):
    """Every problem found in a plan file, one per line."""

    def __init__(self, source: str, problems: list[str]) -> None:
        count = f"{len(problems):,} problem{'s' if len(problems) > 1 else ''}"
        lines = [f"  {capped(p, PROBLEM_CHARS_MAX)}" for p in problems[:PROBLEMS_SHOWN]]
        if len(problems) > PROBLEMS_SHOWN:
            lines.append(f"  ... and {len(problems) - PROBLEMS_SHOWN:,} more")
        super().__init__(f"{capped(source, PROBLEM_CHARS_MAX)}: {count}:\n" + "\n".join(lines))
        self.problems = problems


@dataclass(frozen=True)
class Axis:
    """One dimension of the matrix. A plain axis varies one setting; a linked axis
    (named freely) varies several together, one table of settings per value."""

    name: str
    values: tuple[Settings, ...]  # each: setting path -> parsed value


@dataclass(frozen=True)
class Plan:
    name: str
    description: str
    source: str
    experiment: Experiment
    axes: tuple[Axis, ...]
    excluded: int  # combinations removed by exclude rules


class _Problems:
    def __init__(self) -> None:
        self._seen: dict[str, None] = {}

    @property
    def items(self) -> list[str]:
        return list(self._seen)

    def __len__(self) -> int:
        return len(self._seen)

    def add(self, message: str) -> None:
        self._seen.setdefault(message, None)

    def check(self, parse: Callable[[], T]) -> T | object:
        """The parsed value, or :data:`BAD` after recording why it is not valid."""
        try:
            return parse()
        except UserError as exc:
            self.add(str(exc))
            return BAD


#: A value that failed its check; distinct from None, which some settings mean.
BAD = object()


class _Invalid(Enum):
    """A setting's value that failed its check (None is a value some settings take)."""

    VALUE = 0


def _setting(
    problems: _Problems, path: str, key: str, raw: object
) -> SettingValue | Literal[_Invalid.VALUE]:
    """The setting at ``path`` parsed from a plan's ``raw`` value (``key`` names where
    the plan gives it), or :attr:`_Invalid.VALUE` after recording why it is not valid."""
    try:
        value: SettingValue = SETTINGS[path].parse(key, raw)
    except UserError as exc:
        problems.add(str(exc))
        return _Invalid.VALUE
    return value


def load(path: Path, *, quick: bool = False) -> Plan:
    """Read and check a plan file; raise :class:`PlanError` listing every problem."""
    return parse(read(path), str(path), default_name=path.stem, quick=quick)


def read(path: Path) -> str:
    """The text of a plan file: a regular file of UTF-8 text, at most
    :data:`PLAN_BYTES_MAX` bytes. A FIFO, a device or a directory is refused without
    reading it (opening does not wait for a FIFO's writer)."""
    name = capped(repr(str(path)), PROBLEM_CHARS_MAX)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise UserError(f"plan: cannot read {name}: {reason}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(f"plan: {name} is {_file_type(mode)}, not a plan file (TOML)")
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(PLAN_BYTES_MAX + 1)
        except OSError as exc:
            raise UserError(f"plan: cannot read {name}: {exc.strerror}") from None
    if len(data) > PLAN_BYTES_MAX:
        raise UserError(
            f"plan: {name} is larger than {PLAN_BYTES_MAX // 1024} KiB; a plan is a short TOML file"
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"plan: {name} is UTF-16 text; save it as UTF-8")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"plan: {name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset"
            f" {exc.start}); a plan is a TOML file in UTF-8"
        ) from None


def _file_type(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(source, [f"not valid TOML: {exc}"]) from None
    except ValueError:  # int() refuses more than sys.get_int_max_str_digits() digits
        raise PlanError(source, ["not valid TOML: a number has too many digits"]) from None
    except RecursionError:
        raise PlanError(source, ["not valid TOML: arrays or tables nested too deeply"]) from None


def parse(text: str, source: str, *, default_name: str = "plan", quick: bool = False) -> Plan:
    data = _toml(text, source)
    problems = _Problems()
    for key in data:
        if key not in TOP_KEYS:
            problems.add(f"{capped(key)}: unknown key{did_you_mean(key, TOP_KEYS)}")
    name = _text(problems, data, "name", default_name)
    description = _text(problems, data, "description", "")
    repetitions, adaptive = _repetitions(problems, data.get("repetitions", REPETITIONS_DEFAULT))
    order = problems.check(
        lambda: check_choice("order", data.get("order", Order.INTERLEAVED.value), Order)
    )
    seed = _top_int(problems, data, "seed", None, 0, 2**63 - 1)
    fresh_labs = data.get("fresh_labs", False)
    if not isinstance(fresh_labs, bool):
        problems.add(f"fresh_labs: {shown(fresh_labs)} is not true or false")
    time_limit: float = TIME_LIMIT_S
    if "time_limit" in data:
        limit = problems.check(lambda: parse_span("time_limit", data["time_limit"]))
        time_limit = limit if isinstance(limit, float) else TIME_LIMIT_S
    base = _base(problems, data.get("base", {}))
    axes = _axes(problems, data.get("matrix", {}))
    combinations = math.prod(len(a.values) for a in axes)
    if combinations > TRIALS_MAX:
        shape = " x ".join(f"{len(a.values):,}" for a in axes)
        problems.add(
            f"matrix: {shape} = {combinations:,} combinations; a plan may have at most"
            f" {TRIALS_MAX:,} trials"
        )
        raise PlanError(source, problems.items)
    combos = [_merge(base, choice) for choice in itertools.product(*(a.values for a in axes))]
    kept = _exclude(problems, data.get("exclude", []), axes, combos)
    configs: dict[TrialConfig, None] = {}  # in order, each once
    if problems.items:
        # Conflicts between settings are only meaningful once each setting is valid.
        raise PlanError(source, problems.items)
    for combo, values in kept:
        config = _config(problems, combo, values)
        if config is not None:
            configs.setdefault(config, None)
    if reason := wan.unequal_queues_across_mtus([c.lab.wan for c in configs]):
        problems.add(reason)
    if problems.items:
        raise PlanError(source, problems.items)
    assert isinstance(repetitions, int) and isinstance(order, Order)
    experiment = Experiment(
        configs=tuple(configs),
        repetitions=repetitions,
        order=order,
        seed=seed if isinstance(seed, int) else None,
        name=name,
        adaptive=adaptive,
        fresh_labs=fresh_labs is True,
    )
    try:
        check_size(experiment, "plan")
    except UserError as exc:
        raise PlanError(source, [str(exc)]) from None
    if quick:
        experiment = quicken(experiment)
    try:
        check_time(experiment, time_limit, "time_limit")
    except UserError as exc:
        raise PlanError(source, [str(exc)]) from None
    return Plan(name, description, source, experiment, axes, len(combos) - len(kept))


def check_time(experiment: Experiment, limit_s: float, key: str) -> None:
    """Refuse an experiment whose estimated wall time (at most, for adaptive
    repetitions) exceeds ``limit_s``, saying how long it would take and how to allow it
    (``key``: ``time_limit`` in a plan, ``--time-limit`` on the command line)."""
    if experiment.order is Order.SHUFFLED and experiment.seed is None:
        experiment = replace(experiment, seed=0)  # the order does not change the sum
    trials = expand(experiment)
    seconds = estimate_seconds(trials, fresh_labs=experiment.fresh_labs)
    count = f"{len(trials):,}"
    if (adaptive := experiment.adaptive) is not None:
        seconds *= adaptive.max_repetitions / experiment.repetitions
        count = f"up to {len(trials) * adaptive.max_repetitions // experiment.repetitions:,}"
    if seconds <= limit_s:
        return
    allow = math.ceil(seconds / 86_400)
    if key.startswith("--"):
        how = f"add {key} {allow}d; else use fewer --runs, a shorter --duration, fewer values"
    else:
        how = (
            f'set {key} = "{allow}d" at the top of the plan; else use fewer repetitions, a'
            " shorter traffic.duration, fewer axis values"
        )
    raise UserError(
        f"{key}: {count} trials would take about {human_span(seconds)} (their"
        f" warm-ups, durations and labs), more than {human_span(limit_s)}; if you mean it,"
        f" {how}"
    )


def quicken(experiment: Experiment) -> Experiment:
    """The same matrix with one short repetition: for tests and a first look.

    An adaptive plan becomes a fixed one: one run cannot give an interval, and a quick
    look is not a measurement to make precise.
    """
    configs = tuple(
        replace(
            c,
            traffic=replace(
                c.traffic,
                duration=min(c.traffic.duration, QUICK_DURATION),
                warmup=None if c.traffic.warmup is None else min(c.traffic.warmup, QUICK_WARMUP),
                warmup_max=min(c.traffic.warmup_max, QUICK_WARMUP_MAX),
            ),
        )
        for c in experiment.configs
    )
    return replace(experiment, configs=configs, repetitions=1, adaptive=None)


def trial_seconds(
    config: TrialConfig, *, kept: bool = False, overheads: Overheads = REFERENCE
) -> float:
    """A trial's expected wall time before any has been measured; ``kept``: a lab kept
    from an earlier trial serves it."""
    traffic = config.traffic.duration + config.expected_warmup
    return traffic + overheads.trial_s(config, kept=kept)


def guests(trials: list[Trial]) -> int:
    """How many VM boots the trials need: one per kernel and guest size."""
    return len({(t.config.lab.kernel, t.config.lab.vm) for t in trials if t.config.lab.in_vm})


def labs_built(trials: list[Trial], *, fresh_labs: bool = False) -> list[bool]:
    """For each trial in order, whether its lab is built for it: the lab pool's rule
    (:mod:`tunnelbench.bench.labpool`), each machine's pool keeping :data:`KEEP` labs and
    removing the one needed last (:func:`~tunnelbench.bench.labpool.farthest`); every lab
    with ``fresh_labs``."""
    # Once per configuration, not per trial: a key costs 1-2 ms, and a plan may hold
    # 10,000 trials of a few configurations.
    keys = {config: lab_key(config) for config in dict.fromkeys(t.config for t in trials)}
    upcoming: dict[tuple[str, object], deque[str]] = {}
    for trial in trials:
        lab = trial.config.lab
        machine = (lab.kernel, lab.vm if lab.in_vm else None)
        upcoming.setdefault(machine, deque()).append(keys[trial.config])
    pools: dict[tuple[str, object], OrderedDict[str, None]] = {}
    built = []
    for trial in trials:
        lab = trial.config.lab
        machine = (lab.kernel, lab.vm if lab.in_vm else None)
        pool = pools.setdefault(machine, OrderedDict())
        key = keys[trial.config]
        upcoming[machine].popleft()  # this trial's own key: the machine's trials in order
        kept = not fresh_labs and key in pool
        built.append(not kept)
        pool[key] = None
        pool.move_to_end(key)
        while len(pool) > KEEP:
            del pool[farthest(list(pool), upcoming[machine])]
    return built


def estimate_seconds(
    trials: list[Trial], *, fresh_labs: bool = False, overheads: Overheads = REFERENCE
) -> float:
    """A run's expected wall time: its start, each trial's traffic and overhead (a lab
    built or kept), a boot per guest and the reports at its end."""
    if not trials:
        return 0.0
    built = labs_built(trials, fresh_labs=fresh_labs)
    seconds = sum(
        trial_seconds(t.config, kept=not new, overheads=overheads)
        for t, new in zip(trials, built, strict=True)
    )
    configs = len({t.config for t in trials})
    return (
        RUN_START_S
        + seconds
        + overheads.vm_boot_s * guests(trials)
        + REPORT_S
        + REPORT_PER_CONFIG_S * configs
    )


def derive(config: TrialConfig, changes: Settings) -> TrialConfig:
    """``config`` with the settings ``changes`` names (setting path -> typed value, None
    to unset) set, checked as a plan's configuration is; :class:`UserError` names the
    first conflict."""
    problems = _Problems()
    derived = _config(problems, config.settings() | changes, changes)
    if derived is None:
        raise UserError(problems.items[0])
    return derived


# --- sections ---


def _text(problems: _Problems, data: dict[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        problems.add(f"{key}: {shown(value)} is not a string")
        return default
    return value


def _top_int(
    problems: _Problems,
    data: dict[str, Any],
    key: str,
    default: int | None,
    low: int,
    high: int,
    where: str = "",
) -> object:
    if key not in data:
        return default
    return problems.check(lambda: check_int(where + key, data[key], low, high))


ADAPTIVE_KEYS = ("target", "min", "max")


def _repetitions(problems: _Problems, raw: Any) -> tuple[object, AdaptiveRepetitions | None]:
    """``repetitions = N``, or ``repetitions = { target = "2%", min = 3, max = 10 }``:
    the experiment's (minimum) repetitions and its adaptive part."""
    if not isinstance(raw, dict):
        return problems.check(lambda: check_int("repetitions", raw, 1, REPETITIONS_MAX)), None
    for key in raw:
        if key not in ADAPTIVE_KEYS:
            where = "repetitions."
            problems.add(
                f"{where}{capped(key)}: unknown key{did_you_mean(key, ADAPTIVE_KEYS, where)}"
            )
    if "target" not in raw:
        problems.add(
            "repetitions.target: missing; an adaptive plan needs the precision to reach,"
            " e.g. target = '2%'"
        )
        target: object = BAD
    else:
        target = problems.check(lambda: check_target_pct("repetitions.target", raw["target"]))
    # A bootstrap interval needs two values, so the minimum is at least 2.
    low = _top_int(problems, raw, "min", ADAPTIVE_MIN, 2, REPETITIONS_MAX, "repetitions.")
    high = _top_int(problems, raw, "max", ADAPTIVE_MAX, 2, REPETITIONS_MAX, "repetitions.")
    if isinstance(low, int) and isinstance(high, int) and high < low:
        given = "" if "max" in raw else f" (max defaults to {ADAPTIVE_MAX})"
        problems.add(f"repetitions.max: {high} is below repetitions.min ({low}){given}")
        return BAD, None
    if not isinstance(target, float) or not isinstance(low, int) or not isinstance(high, int):
        return BAD, None
    return low, AdaptiveRepetitions(target_pct=target, max_repetitions=high)


def _base(problems: _Problems, table: Any) -> Settings:
    if not isinstance(table, dict):
        problems.add(f"base: {shown(table)} is not a table of settings")
        return {}
    parsed: Settings = {}
    for path, raw in _settings_of(problems, table, "base.").items():
        value = _setting(problems, path, f"base.{path}", raw)
        if value is not _Invalid.VALUE:
            parsed[path] = value
    return parsed


def _settings_of(problems: _Problems, table: dict[str, Any], where: str) -> dict[str, Any]:
    """A (possibly nested) table of settings as {setting path: raw value}."""
    out: dict[str, Any] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = prefix + key
            if isinstance(value, dict) and path in GROUPS:
                walk(value, path + ".")
            elif path in SETTINGS:
                out[path] = value
            else:
                known = [*SETTINGS, *GROUPS]
                problems.add(
                    f"{where}{capped(path)}: unknown setting{did_you_mean(path, known, where)}"
                )

    walk(table, "")
    return out


def _axes(problems: _Problems, table: Any) -> tuple[Axis, ...]:
    if not isinstance(table, dict):
        problems.add(f"matrix: {shown(table)} is not a table of axes")
        return ()
    axes: list[Axis] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = prefix + key
            if isinstance(value, dict) and path in GROUPS:
                walk(value, path + ".")
            elif not isinstance(value, list):
                problems.add(f"matrix.{capped(path)}: {shown(value)} is not a list of values")
            elif not value:
                problems.add(f"matrix.{capped(path)}: empty axis; give at least one value")
            elif path in SETTINGS:
                axes.append(_plain_axis(problems, path, value))
            elif all(isinstance(v, dict) for v in value):
                axes.append(_linked_axis(problems, path, value))
            else:
                known = [*SETTINGS, *GROUPS]
                problems.add(
                    f"matrix.{capped(path)}: unknown setting{did_you_mean(path, known, 'matrix.')}"
                )

    walk(table, "")
    owner: dict[str, str] = {}
    for axis in axes:
        for path in sorted({p for v in axis.values for p in v}):
            if path in owner:
                problems.add(
                    f"matrix.{axis.name}: varies {path}, which matrix.{owner[path]} varies too"
                )
            owner[path] = axis.name
    return tuple(axes)


def _plain_axis(problems: _Problems, path: str, raw: list[Any]) -> Axis:
    values: list[Settings] = []
    seen: set[SettingValue] = set()
    for i, item in enumerate(raw):
        key = f"matrix.{path}[{i}]"
        value = _setting(problems, path, key, item)
        if value is _Invalid.VALUE:
            continue
        if value in seen:
            problems.add(f"{key}: {shown(item)} appears twice in the axis")
        seen.add(value)
        values.append({path: value})
    return Axis(path, tuple(values))


def _linked_axis(problems: _Problems, name: str, raw: list[dict[str, Any]]) -> Axis:
    values: list[Settings] = []
    seen: set[frozenset[tuple[str, SettingValue]]] = set()
    for i, table in enumerate(raw):
        where = f"matrix.{name}[{i}]."
        entry: Settings = {}
        for path, item in _settings_of(problems, table, where).items():
            value = _setting(problems, path, where + path, item)
            if value is not _Invalid.VALUE:
                entry[path] = value
        if not table:
            problems.add(f"matrix.{name}[{i}]: empty table; give the settings of this value")
        elif frozenset(entry.items()) in seen:
            problems.add(f"matrix.{name}[{i}]: the same settings appear twice in the axis")
        seen.add(frozenset(entry.items()))
        values.append(entry)
    return Axis(name, tuple(values))


def _merge(base: Settings, choice: tuple[Settings, ...]) -> Settings:
    merged = dict(base)
    for part in choice:
        merged |= part
    return merged


Combo = tuple[Settings, Settings]  # (all settings, the matrix's own values)


def _exclude(
    problems: _Problems, rules: Any, axes: tuple[Axis, ...], combos: list[Settings]
) -> list[Combo]:
    varied = list(dict.fromkeys(p for a in axes for v in a.values for p in v))  # matrix order
    values_of: dict[str, dict[Any, None]] = {}  # each path's values, in order
    for axis in axes:
        for entry in axis.values:
            for path, v in entry.items():
                values_of.setdefault(path, {})[v] = None
    own = [{p: c[p] for p in varied if p in c} for c in combos]
    # Which combinations hold each value of each varied path, as a bit set (bit n is
    # combination n): a rule's matches are then a few set operations, not a scan.
    holding: dict[str, dict[Any, int]] = {p: {} for p in varied}
    for n, values in enumerate(own):
        for path in varied:
            value = values.get(path)
            holding[path][value] = holding[path].get(value, 0) | (1 << n)
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        problems.add("exclude: not a list of tables; write each rule as [[exclude]]")
        rules = []
    if len(rules) > EXCLUDE_RULES_MAX:
        problems.add(f"exclude: {len(rules):,} rules; at most {EXCLUDE_RULES_MAX:,}")
        return []
    excluded = 0  # the combinations some rule matches, as a bit set
    for i, rule in enumerate(rules):
        where = f"exclude[{i}]."
        before = len(problems)
        parsed: dict[str, list[Any]] = {}
        for path, raw in _settings_of(problems, rule, where).items():
            if path not in varied:
                problems.add(f"{where}{path}: not varied by the matrix; a rule names axes only")
                continue
            alternatives = raw if isinstance(raw, list) and path in _SCALAR else [raw]
            parsed[path] = []
            for item in alternatives:
                named = _setting(problems, path, where + path, item)
                if named is _Invalid.VALUE:
                    continue
                if named not in values_of[path]:
                    listed = ", ".join(_show(v, path) for v in values_of[path])
                    problems.add(
                        f"{where}{path}: {shown(item)} is not a value of the matrix"
                        f" ({capped(listed, 200)})"
                    )
                parsed[path].append(named)
        matched = _matching(parsed, holding) if parsed else 0
        if not rule:
            problems.add(f"exclude[{i}]: empty rule; it would remove every combination")
        elif len(problems) == before and not matched:
            problems.add(f"exclude[{i}]: matches no combination of the matrix")
        excluded |= matched
    kept = [
        (combo, o)
        for n, (combo, o) in enumerate(zip(combos, own, strict=True))
        if not excluded >> n & 1
    ]
    if combos and not kept and not problems.items:
        problems.add("exclude: the rules remove every combination of the matrix")
    return kept


_SCALAR = {p for p in SETTINGS if p != "lab.offloads.roles"}


def _matching(rule: dict[str, list[Any]], holding: dict[str, dict[Any, int]]) -> int:
    """The combinations a rule matches (every path one of its values), as a bit set."""
    matched = -1  # every combination
    for path, allowed in rule.items():
        matched &= functools.reduce(operator.or_, (holding[path].get(v, 0) for v in allowed), 0)
    return matched


def _show(value: Any, path: str = "") -> str:
    """A setting's value as a plan writes it (a delay in ``ms``, a loss in ``%``)."""
    if value is not None and path in ("lab.wan.delay", "lab.wan.jitter"):
        return wan.format_us(value)
    if value is not None and path in ("lab.wan.loss", "lab.wan.reorder"):
        return wan.format_pct(value)
    return capped(str(getattr(value, "value", value)))


# --- one configuration ---


def _config(problems: _Problems, combo: Settings, own: Settings) -> TrialConfig | None:
    """The configuration of one combination, or None after recording its conflicts."""
    config = TrialConfig.from_settings(combo)
    where = ", ".join(f"{p}={_show(v, p)}" for p, v in own.items())
    prefix = f"with {where}: " if where else ""
    before = len(problems)
    for message in [*_conflicts(config), *conflicts.conflicts(config, given=combo)]:
        problems.add(prefix + message)
    return None if len(problems) > before else _normalized(config)


def _conflicts(config: TrialConfig) -> list[str]:
    """Settings that are each valid but cannot go together."""
    found: list[str] = []
    lab, tunnel, traffic = config.lab, config.tunnel, config.traffic
    found += wan.conflicts(lab.wan)
    if traffic.family == 6:
        mtus = {"lab.wan.mtu": lab.wan.mtu, "lab.lan_mtu": lab.lan_mtu, "tunnel.mtu": tunnel.mtu}
        for path, mtu in mtus.items():
            if mtu is not None and mtu < IPV6_MTU_MIN:
                found.append(f"{path}: {mtu} is below IPv6's minimum of {IPV6_MTU_MIN}")
    if traffic.family == 6 and lab.wan.encapsulation is WanEncapsulation.PPPOE:
        found.append(
            "traffic.family: 6 cannot cross lab.wan.encapsulation = 'pppoe', which carries"
            " IPv4 only here"
        )
    if traffic.protocol is Protocol.UDP and traffic.udp_rate is None:
        found.append(
            "traffic.udp_rate: required with traffic.protocol = 'udp'"
            " (iperf3 would send only 1 Mbit/s)"
        )
    found += GENERATORS.get(traffic.generator).conflicts(traffic)
    if tunnel.kind is not TunnelKind.NONE:
        implementations = TUNNELS.get(tunnel.kind).implementations
        named = tunnel.implementation
        if named is not None and named not in implementations:
            spelt = (IMPLEMENTATION_AUTO, *implementations)
            found.append(
                f"tunnel.implementation: {shown(named)} is not an implementation"
                f" of {tunnel.kind.value}; allowed: {', '.join(spelt)}{did_you_mean(named, spelt)}"
            )
    roles = CHAINS[lab.topology].roles
    for role in lab.offloads.roles:
        if role not in roles:
            found.append(
                f"lab.offloads.roles: {role!r} is not a role of {lab.topology.value}"
                f" ({', '.join(roles)})"
            )
    for role in lab.cpus.given():
        if role not in roles:
            found.append(
                f"lab.cpus.{role}: {role!r} is not a role of {lab.topology.value}"
                f" ({', '.join(roles)})"
            )
    if lab.rps_cpus is not None and (lab.placement is Placement.PINNED or lab.cpus.given()):
        found.append(
            "lab.rps_cpus: cannot go with lab.placement = 'pinned' or lab.cpus, which steer"
            " each role's receive work to its own cores; set one of them"
        )
    for role in lab.budget.given():
        if role not in roles:
            found.append(
                f"lab.budget.{role}: {role!r} is not a role of {lab.topology.value}"
                f" ({', '.join(roles)})"
            )
    if lab.rps_cpus is not None and lab.queues is not None:
        found.append(
            "lab.rps_cpus: cannot go with lab.queues, which steers each receive queue to a"
            " core of its own; set one of them"
        )
    if tunnel.cpu_budget is not None and lab.budget.given():
        found.append(
            "tunnel.cpu_budget: cannot go with lab.budget, which already holds each role's"
            " processes (its tunnel daemon among them) to a budget; set one of them"
        )
    return found


def _normalized(config: TrialConfig) -> TrialConfig:
    """One spelling per configuration, so equivalent combinations run once: a baseline
    has no tunnel settings, TCP no UDP rate, one stream needs no stream mode, and a lab
    on the host's kernel no guest size."""
    if config.tunnel.kind is TunnelKind.NONE:
        config = replace(config, tunnel=TunnelSettings())
    if not config.lab.in_vm and config.lab.vm != VmSettings():
        config = replace(config, lab=replace(config.lab, vm=VmSettings()))
    traffic = config.traffic
    if traffic.protocol is Protocol.TCP and traffic.udp_rate is not None:
        traffic = replace(traffic, udp_rate=None)
    if traffic.streams == 1 and traffic.stream_mode is not StreamMode.AUTO:
        traffic = replace(traffic, stream_mode=StreamMode.AUTO)
    return replace(config, traffic=traffic)
