"""Command-line options that describe a lab and an experiment, checked into settings.

Shared by ``run`` and ``lab up`` so both accept the same words with the same limits.
"""

import argparse

from tunnelbench.errors import UserError
from tunnelbench.kinds import Direction, Shaper, StreamMode, Topology, TunnelKind
from tunnelbench.plan import (
    STREAMS_MAX,
    Experiment,
    LabSettings,
    LinkSettings,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
    check_choice,
    check_family,
    check_int,
    check_mtu,
    product_configs,
)
from tunnelbench.units import parse_rate

DEFAULT_TUNNELS = "none,wireguard,vxlan"


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def comma_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty item")
    return items


def add_lab_arguments(parser: argparse.ArgumentParser) -> None:
    lab = parser.add_argument_group("lab")
    lab.add_argument(
        "--topology", default=Topology.ROAD_WARRIOR.value, help="road-warrior | site-to-site"
    )
    lab.add_argument(
        "--wan-mtu", type=whole_number, default=1500, help="MTU of the WAN link (default 1500)"
    )
    lab.add_argument(
        "--lan-mtu", type=whole_number, default=1500, help="MTU of the LAN links (default 1500)"
    )
    lab.add_argument("--rate", help="shape the WAN link to this rate, e.g. 1gbit, 100mbit")
    lab.add_argument("--shaper", default=Shaper.TBF.value, help="tbf | htb (with --rate)")
    lab.add_argument(
        "--queue-limit",
        type=whole_number,
        default=1000,
        help="shaper queue in packets (default 1000)",
    )
    lab.add_argument(
        "--tunnel-mtu",
        type=whole_number,
        help="tunnel MTU (default: WAN MTU minus the tunnel's overhead)",
    )
    lab.add_argument("--wireguard-impl", default="auto", help="auto | kernel | wireguard-go")


def lab_settings(args: argparse.Namespace) -> LabSettings:
    rate = parse_rate(args.rate, key="--rate") if args.rate is not None else None
    return LabSettings(
        topology=check_choice("--topology", args.topology, Topology),
        wan=LinkSettings(
            mtu=check_mtu("--wan-mtu", args.wan_mtu),
            rate=rate,
            shaper=check_choice("--shaper", args.shaper, Shaper),
            queue_limit=check_int("--queue-limit", args.queue_limit, 1, 100_000),
        ),
        lan_mtu=check_mtu("--lan-mtu", args.lan_mtu),
    )


def tunnel_settings(args: argparse.Namespace, kind: TunnelKind, family: int = 4) -> TunnelSettings:
    mtu = (
        None
        if args.tunnel_mtu is None
        else check_mtu("--tunnel-mtu", args.tunnel_mtu, family=family)
    )
    implementation = args.wireguard_impl if kind is TunnelKind.WIREGUARD else "auto"
    return TunnelSettings(kind=kind, implementation=implementation, mtu=mtu)


def build_experiment(args: argparse.Namespace) -> Experiment:
    """The experiment of ``tunnelbench run``'s options; every value checked."""
    family = check_family("--family", args.family)
    kinds = [check_choice("--tunnels", k, TunnelKind) for k in args.tunnels]
    streams = [
        check_int("--streams", _as_int("--streams", s), 1, STREAMS_MAX) for s in args.streams
    ]
    base = TrialConfig(
        lab=lab_settings(args),
        traffic=TrafficSettings(
            streams=1,
            stream_mode=check_choice("--stream-mode", args.stream_mode, StreamMode),
            direction=check_choice("--direction", args.direction, Direction),
            duration=check_int("--duration", args.duration, 1, 3600),
            warmup=check_int("--warmup", args.warmup, 0, 60),
            family=family,
        ),
    )
    if base.lab.wan.mtu < 1280 and family == 6:
        raise UserError(f"--wan-mtu: {base.lab.wan.mtu} is below IPv6's minimum of 1280")
    runs = check_int("--runs", args.runs, 1, 100)
    tunnels = [tunnel_settings(args, kind, family) for kind in kinds]
    return Experiment(configs=product_configs(base, tunnels, streams), repetitions=runs)


def _as_int(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{key}: {text!r} is not a whole number") from None
