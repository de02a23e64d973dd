"""Command-line options that describe a lab and an experiment, checked into settings.

Shared by ``run`` and ``lab up`` so both accept the same words with the same limits.
The options have no argparse defaults (they are absent unless given, so a plan file can
refuse them); :func:`option` supplies the default.
"""

import argparse
import re
from dataclasses import replace
from typing import Any

from tunnelbench.bench import conflicts
from tunnelbench.bench.planfile import TIME_LIMIT_S, check_time, quicken
from tunnelbench.echo import did_you_mean, shown
from tunnelbench.errors import UserError
from tunnelbench.kinds import (
    Direction,
    Placement,
    Protocol,
    Queue,
    Shaper,
    StreamMode,
    Topology,
    TunnelKind,
)
from tunnelbench.lab.topology import CHAINS
from tunnelbench.model import wan
from tunnelbench.model.fields import SETTINGS
from tunnelbench.model.plan import (
    ADAPTIVE_MAX,
    ADAPTIVE_MIN,
    DURATION_DEFAULT,
    HOST_KERNEL,
    IMPLEMENTATION_AUTO,
    REPETITIONS_DEFAULT,
    REPETITIONS_MAX,
    ROLES,
    WARMUP_AUTO,
    AdaptiveRepetitions,
    Experiment,
    LabSettings,
    LinkSettings,
    RoleBudgets,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
    VmSettings,
    check_family,
    check_int,
    check_mtu,
    check_size,
    check_target_pct,
    product_configs,
    requested_implementation,
)
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.units import parse_rate, parse_span, refuse_other_digits

DEFAULT_TUNNELS = "none,wireguard,vxlan"

#: Every option that describes the experiment, by its argparse destination.
DEFAULTS: dict[str, str | int | bool | list[str] | None] = {
    "tunnels": DEFAULT_TUNNELS.split(","),
    "streams": ["1", "4"],
    "runs": REPETITIONS_DEFAULT,
    "duration": DURATION_DEFAULT,
    "warmup": WARMUP_AUTO,
    "direction": Direction.UPLOAD.value,
    "stream_mode": StreamMode.AUTO.value,
    "family": 4,
    "topology": Topology.ROAD_WARRIOR.value,
    "wan_mtu": 1500,
    "lan_mtu": 1500,
    "rate": None,
    "shaper": Shaper.TBF.value,
    "queue_limit": 1000,
    "queue": None,  # a pfifo of queue_limit packets
    "queue_bytes": None,
    "cpu_budget": None,  # no role held to a CPU budget
    "congestion": None,  # the lab's (cubic) or the hosts' own
    "udp": None,  # TCP
    "delay": None,  # the WAN's impairments: off
    "jitter": None,
    "loss": None,
    "reorder": None,
    "placement": Placement.FREE.value,
    "kernel": HOST_KERNEL,
    "vm_cpus": VmSettings().cpus,
    "vm_memory": VmSettings().memory,
    "fresh_labs": False,
    "tunnel_mtu": None,
    "wireguard_impl": IMPLEMENTATION_AUTO,
    "target_ci": None,  # adaptive repetitions: off
    "max_runs": None,  # with --target-ci: plan.ADAPTIVE_MAX
    "time_limit": None,  # planfile.TIME_LIMIT_S
}


#: The options that set a plan setting :mod:`tunnelbench.bench.conflicts` may name.
OPTION_KEYS = {
    "lab.wan.rate": "--rate",
    "lab.wan.shaper": "--shaper",
    "lab.wan.mtu": "--wan-mtu",
    "tunnel.mtu": "--tunnel-mtu",
    "tunnel.implementation": "--wireguard-impl",
    "traffic.family": "--family",
}


def option(args: argparse.Namespace, dest: str) -> Any:
    """An experiment option's value: as given, else its default."""
    return getattr(args, dest, DEFAULTS[dest])


def given(args: argparse.Namespace) -> list[str]:
    """The experiment options present on the command line, as their flags."""
    return ["--" + dest.replace("_", "-") for dest in DEFAULTS if hasattr(args, dest)]


def parse_percent(option: str, text: str, most: int = 100) -> float:
    """``2``, ``2%`` or ``2.5 %``: a percentage from 0 to ``most``."""
    refuse_other_digits(option, text, "2%")
    match = re.fullmatch(r"\s*([0-9]{1,5}(?:\.[0-9]{1,3})?)\s*%?\s*", text)
    value = float(match.group(1)) if match else -1.0
    if not 0 <= value <= most:
        raise UserError(f"{option}: {shown(text)} is not a percentage from 0 to {most}, e.g. 2%")
    return value


def parse_milliseconds(option: str, text: str) -> float:
    """``50``, ``50ms`` or ``0.5 ms``: a round trip in milliseconds, above 0 and at most
    an hour."""
    refuse_other_digits(option, text, "50ms")
    match = re.fullmatch(r"\s*([0-9]{1,7}(?:\.[0-9]{1,3})?)\s*(?:ms)?\s*", text)
    value = float(match.group(1)) if match else -1.0
    if not 0 < value <= 3_600_000:
        raise UserError(
            f"{option}: {shown(text)} is not a round trip in milliseconds, e.g. 50 or 50ms"
        )
    return value


def kinds_epilog() -> str:
    """What ``run --help`` and ``tune --help`` end with: the tunnel kinds and load
    generators there are, read from their registries (a new kind appears by itself)."""
    kinds = ", ".join(k.value for k in TUNNELS.kinds())
    generators = ", ".join(g.value for g in GENERATORS.kinds())
    return (
        f"tunnel kinds: {kinds}. load generators (a plan's traffic.generator): {generators}."
        " Plan files: docs/plans.md."
    )


def role_budgets(text: str) -> RoleBudgets:
    """``--cpu-budget gw=50%,client=0.25``: each role's share of one core, as
    ``lab.budget.ROLE`` takes it."""
    shares: dict[str, float | None] = {}
    for item in comma_list(text):
        role, equals, share = item.partition("=")
        role = role.strip()
        if not equals or not share.strip():
            raise UserError(f"--cpu-budget: {shown(item)} is not ROLE=SHARE, e.g. gw=50%")
        if role not in ROLES:
            raise UserError(
                f"--cpu-budget: unknown role {shown(role)}; allowed: {', '.join(ROLES)}"
                f"{did_you_mean(role, ROLES)}"
            )
        if role in shares:
            raise UserError(f"--cpu-budget: {role} is given twice")
        share = share.strip()
        # A plan gives 0.5 as a number; on the command line every value is text.
        value = float(share) if re.fullmatch(r"[0-9]{1,3}(?:\.[0-9]{1,6})?", share) else share
        shares[role] = _field(f"lab.budget.{role}", f"--cpu-budget {role}", value)
    return RoleBudgets(**shares)


def warmup_seconds(text: str) -> int | str:
    """``--warmup``: whole seconds, or ``auto`` (until the path is in steady state)."""
    if text.strip() == WARMUP_AUTO:
        return WARMUP_AUTO
    try:
        return _int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} or 'auto'") from None


def whole_number(text: str) -> int:
    try:
        return _int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int(text: str) -> int:
    """``int(text)`` of ASCII digits only (``int`` takes '٣' and '1_000'), and of no more
    than Python converts (4,300 digits); ValueError says what is wrong with it."""
    digits = text.strip().removeprefix("-").removeprefix("+")
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{shown(text)} is not a whole number")
    if len(digits) > 4000:
        raise ValueError(f"{shown(text)} is out of range ({len(digits):,} digits)")
    return int(text)


def comma_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"{shown(text)} has an empty item")
    return items


def add_traffic_choices(group: argparse._ActionsContainer) -> None:
    """``--direction``, ``--stream-mode`` (their values are the enums'), ``--udp`` and
    ``--congestion``, of ``run`` and ``tune``."""
    group.add_argument("--direction", choices=[d.value for d in Direction], help="(default upload)")
    group.add_argument(
        "--stream-mode",
        choices=[m.value for m in StreamMode],
        help="one iperf3 with -P N, one pair per stream, or auto (default auto)",
    )
    group.add_argument(
        "--udp",
        metavar="RATE",
        help="UDP at this rate per stream, e.g. 500mbit, instead of TCP (default TCP)",
    )
    group.add_argument(
        "--congestion",
        metavar="CC",
        help=(
            "TCP's congestion control on both ends, e.g. bbr (default cubic in the lab,"
            " the hosts' own on real hosts)"
        ),
    )


def add_budget_argument(group: argparse._ActionsContainer) -> None:
    """``--cpu-budget`` (of ``run`` and ``tune``: a budget holds the processes a trial
    starts, and ``lab up`` starts none)."""
    group.add_argument(
        "--cpu-budget",
        metavar="ROLE=SHARE,...",
        help="hold each role's processes to a share of one core, e.g. gw=50%%,client=0.25"
        f" (roles: {', '.join(ROLES)}; default none)",
    )


def add_kernel_arguments(group: argparse._ActionsContainer) -> None:
    """``--kernel`` and the VM's size (of ``run`` and ``doctor``)."""
    group.add_argument(
        "--kernel",
        help="host (default): the lab on this machine's kernel; debian, a Debian kernel"
        " package or release (e.g. 6.1.0-56-amd64), or an unpacked kernel's directory:"
        " the lab in a VM on that kernel (docs/kernels.md)",
    )
    group.add_argument(
        "--vm-cpus", type=whole_number, help="with --kernel: the guest's vCPUs (default 2)"
    )
    group.add_argument(
        "--vm-memory", help="with --kernel: the guest's memory, e.g. 2G, 512M (default 2G)"
    )


def add_lab_arguments(parser: argparse.ArgumentParser, *, kernel: bool = True) -> None:
    """The lab's options; ``kernel``: with ``--kernel`` and the VM's size (``run``; a lab
    in a VM lives only for a run's trials, so ``lab up`` and ``tune`` have neither)."""
    lab = parser.add_argument_group("lab", argument_default=argparse.SUPPRESS)
    lab.add_argument(
        "--topology", choices=[t.value for t in Topology], help="(default road-warrior)"
    )
    lab.add_argument("--wan-mtu", type=whole_number, help="MTU of the WAN link (default 1500)")
    lab.add_argument("--lan-mtu", type=whole_number, help="MTU of the LAN links (default 1500)")
    lab.add_argument("--rate", help="shape the WAN link to this rate, e.g. 1gbit, 100mbit")
    lab.add_argument(
        "--shaper", choices=[s.value for s in Shaper], help="with --rate (default tbf)"
    )
    lab.add_argument(
        "--queue-limit", type=whole_number, help="shaper queue in packets (default 1000)"
    )
    lab.add_argument(
        "--queue",
        help="the WAN's queue discipline under the shaper: "
        + ", ".join(q.value for q in Queue)
        + " (default a pfifo of --queue-limit packets; docs/plans.md)",
    )
    lab.add_argument(
        "--queue-bytes", type=whole_number, help="with --queue bfifo: its limit in bytes"
    )
    lab.add_argument(
        "--delay",
        help="add this delay to every packet leaving either end of the WAN link (netem),"
        " e.g. 20ms, 500us; a round trip gains twice it (default none)",
    )
    lab.add_argument(
        "--jitter",
        help="with --delay: vary each packet's delay uniformly by up to this much, e.g."
        " 5ms, keeping packets in order (default none)",
    )
    lab.add_argument(
        "--loss",
        help="drop this share of the packets at each end of the WAN link, e.g. 1%% (default none)",
    )
    lab.add_argument(
        "--reorder",
        help="with --delay: send this share of the packets at once, ahead of the delayed"
        " ones, e.g. 1%% (default none)",
    )
    lab.add_argument(
        "--placement",
        choices=[p.value for p in Placement],
        help="free: the scheduler places the lab's processes; pinned: each role on cores of"
        " its own, its receive work steered there (default free)",
    )
    if kernel:
        add_kernel_arguments(lab)
    lab.add_argument(
        "--tunnel-mtu",
        type=whole_number,
        help="tunnel MTU (default: WAN MTU minus the tunnel's overhead)",
    )
    lab.add_argument(
        "--wireguard-impl",
        help=" | ".join((IMPLEMENTATION_AUTO, *TUNNELS.get(TunnelKind.WIREGUARD).implementations))
        + "; `run` takes a comma list and compares them (default auto: kernel if the kernel"
        " has it, else wireguard-go)",
    )


def lab_settings(args: argparse.Namespace) -> LabSettings:
    kernel = _field("lab.kernel", "--kernel", option(args, "kernel"))
    for dest in ("vm_cpus", "vm_memory"):
        if kernel == HOST_KERNEL and hasattr(args, dest):
            flag = "--" + dest.replace("_", "-")
            raise UserError(f"{flag}: sizes the VM of a lab on another kernel; give --kernel too")
    rate_text = option(args, "rate")
    rate = parse_rate(rate_text, key="--rate") if rate_text is not None else None
    topology = _field("lab.topology", "--topology", option(args, "topology"))
    link = LinkSettings(
        mtu=_field("lab.wan.mtu", "--wan-mtu", option(args, "wan_mtu")),
        rate=rate,
        shaper=_field("lab.wan.shaper", "--shaper", option(args, "shaper")),
        queue_limit=_field("lab.wan.queue_limit", "--queue-limit", option(args, "queue_limit")),
    )
    queue, queue_bytes = _queue(args)
    impaired = _impairments(args)
    return LabSettings(
        topology=topology,
        wan=replace(
            link,
            queue=queue,
            queue_bytes=queue_bytes,
            delay=impaired.delay,
            jitter=impaired.jitter,
            loss=impaired.loss,
            reorder=impaired.reorder,
        ),
        budget=role_budgets(budget) if (budget := option(args, "cpu_budget")) else RoleBudgets(),
        lan_mtu=_field("lab.lan_mtu", "--lan-mtu", option(args, "lan_mtu")),
        placement=_field("lab.placement", "--placement", option(args, "placement")),
        kernel=kernel,
        vm=VmSettings(
            cpus=_field("lab.vm.cpus", "--vm-cpus", option(args, "vm_cpus")),
            memory=_field("lab.vm.memory", "--vm-memory", option(args, "vm_memory")),
        ),
    )


def _queue(args: argparse.Namespace) -> tuple[Queue | None, int | None]:
    """``--queue`` and ``--queue-bytes`` checked as their plan settings are, and together."""
    text, size = option(args, "queue"), option(args, "queue_bytes")
    queue: Queue | None = None if text is None else _field("lab.wan.queue", "--queue", text)
    limit: int | None = (
        None if size is None else _field("lab.wan.queue_bytes", "--queue-bytes", size)
    )
    keys = {"queue": "--queue", "queue_bytes": "--queue-bytes", **wan.PLAN_KEYS}
    if problems := wan.conflicts(LinkSettings(queue=queue, queue_bytes=limit), keys):
        raise UserError(problems[0])
    return queue, limit


def _impairments(args: argparse.Namespace) -> LinkSettings:
    """``--delay``, ``--jitter``, ``--loss``, ``--reorder`` checked as their plan settings
    are, alone and together (a link with these alone set); those not given are off."""
    keys = {name: f"--{name}" for name in wan.PLAN_KEYS}

    def given(name: str) -> Any:
        text = option(args, name)
        return None if text is None else _field(wan.PLAN_KEYS[name], keys[name], text)

    found = LinkSettings(
        delay=given("delay"), jitter=given("jitter"), loss=given("loss"), reorder=given("reorder")
    )
    if problems := wan.conflicts(found, keys):
        raise UserError(problems[0])
    return found


def wireguard_impls(args: argparse.Namespace) -> list[str | None]:
    """``--wireguard-impl``: one implementation, or a comma list to compare; None for
    ``auto`` (no choice: the kind's own)."""
    text = option(args, "wireguard_impl")
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise UserError(f"--wireguard-impl: {shown(text)} has an empty item")
    if len(set(names)) < len(names):
        raise UserError(f"--wireguard-impl: {shown(text)} names an implementation twice")
    return [requested_implementation(name) for name in names]


def tunnel_settings(args: argparse.Namespace, kind: TunnelKind, family: int = 4) -> TunnelSettings:
    """One tunnel's settings, for a lab by hand: ``--wireguard-impl`` must name only one."""
    mtu = _tunnel_mtu(args, family)
    implementation = None
    if kind is TunnelKind.WIREGUARD:
        implementation, *more = wireguard_impls(args)
        if more:
            raise UserError("--wireguard-impl: a lab has one tunnel; name one implementation")
    return TunnelSettings(kind=kind, implementation=implementation, mtu=mtu)


def _tunnel_mtu(args: argparse.Namespace, family: int) -> int | None:
    tunnel_mtu = option(args, "tunnel_mtu")
    return None if tunnel_mtu is None else check_mtu("--tunnel-mtu", tunnel_mtu, family=family)


def check_conflicts(config: TrialConfig, args: argparse.Namespace) -> None:
    """Refuse options that no machine can run together (``--tunnel-mtu`` above what the
    WAN carries, ``--shaper`` without ``--rate``), as a plan refuses their settings,
    naming the options."""
    given = {
        path for path, flag in OPTION_KEYS.items() if hasattr(args, flag[2:].replace("-", "_"))
    }
    if problems := conflicts.conflicts(config, given, OPTION_KEYS):
        raise UserError(problems[0])


def _field(path: str, key: str, value: Any) -> Any:
    """``value`` of option ``key`` checked by the plan field table's parser for ``path``:
    an option and its plan setting accept the same values with the same limits."""
    return SETTINGS[path].parse(key, value)


def build_experiment(args: argparse.Namespace) -> Experiment:
    """The experiment of ``tunnelbench run``'s options; every value checked."""
    family = check_family("--family", option(args, "family"))
    kinds = [_field("tunnel.kind", "--tunnels", k) for k in option(args, "tunnels")]
    streams = [
        _field("traffic.streams", "--streams", _as_int("--streams", s))
        for s in option(args, "streams")
    ]
    protocol = _protocol(args)
    base = TrialConfig(
        lab=lab_settings(args),
        traffic=TrafficSettings(
            streams=1,
            stream_mode=_field("traffic.stream_mode", "--stream-mode", option(args, "stream_mode")),
            direction=_field("traffic.direction", "--direction", option(args, "direction")),
            duration=_field("traffic.duration", "--duration", option(args, "duration")),
            warmup=_field("traffic.warmup", "--warmup", option(args, "warmup")),
            family=family,
            protocol=protocol.protocol,
            udp_rate=protocol.udp_rate,
            congestion=protocol.congestion,
        ),
    )
    _check_budget_roles(base.lab)
    if base.lab.wan.mtu < 1280 and family == 6:
        raise UserError(f"--wan-mtu: {base.lab.wan.mtu} is below IPv6's minimum of 1280")
    runs, adaptive = _repetitions(args)
    tunnels = [
        TunnelSettings(kind=kind, implementation=implementation, mtu=_tunnel_mtu(args, family))
        for kind in kinds
        for implementation in (wireguard_impls(args) if kind is TunnelKind.WIREGUARD else [None])
    ]
    configs = product_configs(base, tunnels, streams)
    for config in configs:
        check_conflicts(config, args)
    experiment = Experiment(
        configs=configs,
        repetitions=runs,
        adaptive=adaptive,
        fresh_labs=bool(option(args, "fresh_labs")),
    )
    check_size(experiment, "--tunnels x --streams x --runs")
    limit = option(args, "time_limit")
    seconds = TIME_LIMIT_S if limit is None else parse_span("--time-limit", limit)
    quick = getattr(args, "quick", False) is True
    check_time(quicken(experiment) if quick else experiment, seconds, "--time-limit")
    return experiment


def _protocol(args: argparse.Namespace) -> TrafficSettings:
    """``--udp RATE`` (UDP at that rate per stream) or ``--congestion`` (TCP's): traffic
    with these alone set."""
    rate, congestion = option(args, "udp"), option(args, "congestion")
    if rate is not None and congestion is not None:
        raise UserError("--congestion: a TCP setting; it cannot go with --udp")
    if rate is not None:
        return TrafficSettings(
            protocol=Protocol.UDP, udp_rate=_field("traffic.udp_rate", "--udp", rate)
        )
    if congestion is not None:
        return TrafficSettings(congestion=_field("traffic.congestion", "--congestion", congestion))
    return TrafficSettings()


def _check_budget_roles(lab: LabSettings) -> None:
    roles = CHAINS[lab.topology].roles
    for role in lab.budget.given():
        if role not in roles:
            raise UserError(
                f"--cpu-budget: {role!r} is not a role of {lab.topology.value} ({', '.join(roles)})"
            )


def _repetitions(args: argparse.Namespace) -> tuple[int, AdaptiveRepetitions | None]:
    """``--runs N``; with ``--target-ci`` it is the minimum, and ``--max-runs`` the most
    (the same limits and defaults as a plan's ``repetitions = { target, min, max }``)."""
    target = option(args, "target_ci")
    if target is None:
        if option(args, "max_runs") is not None:
            raise UserError("--max-runs: only with --target-ci (it caps adaptive repetitions)")
        return check_int("--runs", option(args, "runs"), 1, REPETITIONS_MAX), None
    target_pct = check_target_pct("--target-ci", target)
    # A bootstrap interval needs two runs.
    runs = check_int("--runs", getattr(args, "runs", ADAPTIVE_MIN), 2, REPETITIONS_MAX)
    most = option(args, "max_runs")
    most = check_int("--max-runs", ADAPTIVE_MAX if most is None else most, 2, REPETITIONS_MAX)
    if most < runs:
        given = "" if hasattr(args, "max_runs") else f" (it defaults to {ADAPTIVE_MAX})"
        raise UserError(f"--max-runs: {most} is below --runs ({runs}){given}")
    return runs, AdaptiveRepetitions(target_pct=target_pct, max_repetitions=most)


def _as_int(key: str, text: str) -> int:
    try:
        return _int(text)
    except ValueError as exc:
        raise UserError(f"{key}: {exc}") from None
