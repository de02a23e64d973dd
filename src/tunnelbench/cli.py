"""The ``tunnelbench`` command: parse arguments, call the layers below, print."""

import argparse
import logging
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TypeVar

from tunnelbench import __version__
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Direction, Shaper, StreamMode, Topology, TunnelKind
from tunnelbench.plan import (
    STREAMS_MAX,
    Experiment,
    LabSettings,
    LinkSettings,
    Trial,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
    check_choice,
    check_family,
    check_int,
    check_mtu,
    product_configs,
)
from tunnelbench.runner import TrialOutcome
from tunnelbench.store import DEFAULT_DB
from tunnelbench.units import mbit, parse_rate

T = TypeVar("T")

DEFAULT_TUNNELS = "none,wireguard,vxlan"


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _csv(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty item")
    return items


def _lab_arguments(parser: argparse.ArgumentParser) -> None:
    lab = parser.add_argument_group("lab")
    lab.add_argument("--topology", default=Topology.ROAD_WARRIOR.value, help="road-warrior | site-to-site")
    lab.add_argument("--wan-mtu", type=_int, default=1500, help="MTU of the WAN link (default 1500)")
    lab.add_argument("--lan-mtu", type=_int, default=1500, help="MTU of the LAN links (default 1500)")
    lab.add_argument("--rate", help="shape the WAN link to this rate, e.g. 1gbit, 100mbit")
    lab.add_argument("--shaper", default=Shaper.TBF.value, help="tbf | htb (with --rate)")
    lab.add_argument("--queue-limit", type=_int, default=1000, help="shaper queue in packets (default 1000)")
    lab.add_argument("--tunnel-mtu", type=_int, help="tunnel MTU (default: WAN MTU minus the tunnel's overhead)")
    lab.add_argument("--wireguard-impl", default="auto", help="auto | kernel | wireguard-go")


def _lab_settings(args: argparse.Namespace) -> LabSettings:
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


def _tunnel_settings(args: argparse.Namespace, kind: TunnelKind, family: int = 4) -> TunnelSettings:
    mtu = None if args.tunnel_mtu is None else check_mtu("--tunnel-mtu", args.tunnel_mtu, family=family)
    return TunnelSettings(kind=kind, implementation=args.wireguard_impl, mtu=mtu)


def build_experiment(args: argparse.Namespace) -> Experiment:
    """The experiment of ``tunnelbench run``'s options; every value checked."""
    family = check_family("--family", args.family)
    kinds = [check_choice("--tunnels", k, TunnelKind) for k in args.tunnels]
    streams = [check_int("--streams", _as_int("--streams", s), 1, STREAMS_MAX) for s in args.streams]
    base = TrialConfig(
        lab=_lab_settings(args),
        tunnel=_tunnel_settings(args, TunnelKind.WIREGUARD, family),
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
    return Experiment(configs=product_configs(base, kinds, streams), repetitions=runs)


def _as_int(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{key}: {text!r} is not a whole number") from None


def cmd_run(args: argparse.Namespace) -> int:
    from tunnelbench import runner
    from tunnelbench.analysis.summary import summarize_run
    from tunnelbench.report import table
    from tunnelbench.store import Store

    experiment = build_experiment(args)
    runner.require_root("tunnelbench run")
    runner.resolve(experiment)  # every check before the database is touched
    store = Store(Path(args.db))
    progress = None if args.quiet else _print_progress
    try:
        run_id = runner.execute(
            experiment, store, command_line=shlex.join(sys.argv), progress=progress
        )
        trials = store.trials(run_id)
        print()
        print(table.render(summarize_run(trials)))
        failed = [t for t in trials if t.status != "ok"]
        for trial in failed:
            print(f"trial {trial.seq} failed: {trial.error}")
        print(f"\nstored as run {run_id} in {args.db}; `tunnelbench report {run_id} --db {args.db}`")
        return 1 if failed and len(failed) == len(trials) else 0
    finally:
        store.close()


def _print_progress(index: int, total: int, trial: Trial, outcome: TrialOutcome | None) -> None:
    c = trial.config
    what = f"{c.tunnel.kind.value}, {c.traffic.streams} stream(s), {c.traffic.direction.value}, run {trial.repetition}"
    if outcome is None:
        print(f"[{index}/{total}] {what} ...", end="", flush=True)
    elif outcome.status == "ok":
        print(f" {mbit(outcome.metrics['goodput_bps']):,.0f} Mbit/s", flush=True)
    else:
        print(f" FAILED: {outcome.error}", flush=True)


def cmd_report(args: argparse.Namespace) -> int:
    from tunnelbench.analysis.summary import summarize_run
    from tunnelbench.report import json_report, table
    from tunnelbench.store import Store

    store = Store.open_existing(Path(args.db))
    try:
        if args.format == "json":
            print(json_report.render(store, args.run))
        else:
            run = store.run(args.run)
            print(f"run {run.id} ({run.status}): {run.command_line}")
            print(table.render(summarize_run(store.trials(run.id))))
    finally:
        store.close()
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    from tunnelbench import labcmd

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "up": labcmd.up,
        "status": labcmd.status,
        "exec": labcmd.exec_,
        "down": labcmd.down,
        "clean": labcmd.clean,
    }
    return handlers[args.lab_verb](args)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="tunnelbench",
        description="Benchmark tunnels and VPNs in a network-namespace lab.",
    )
    top.add_argument("--version", action="version", version=f"tunnelbench {__version__}")
    top.add_argument("-v", "--verbose", action="store_true", help="log every command run")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    run = verbs.add_parser("run", help="run a benchmark and print a table")
    run.add_argument("--tunnels", type=_csv, default=_csv(DEFAULT_TUNNELS), help=f"tunnel kinds to compare (default {DEFAULT_TUNNELS})")
    run.add_argument("--streams", type=_csv, default=["1", "4"], help="stream counts (default 1,4)")
    run.add_argument("--runs", type=_int, default=3, help="repetitions of each configuration (default 3)")
    run.add_argument("--duration", type=_int, default=5, help="measured seconds per trial (default 5)")
    run.add_argument("--warmup", type=_int, default=1, help="seconds excluded at the start (default 1)")
    run.add_argument("--direction", default=Direction.UPLOAD.value, help="upload | download | bidir")
    run.add_argument("--stream-mode", default=StreamMode.AUTO.value, help="auto | single | processes")
    run.add_argument("--family", type=_int, default=4, help="IP version of the traffic: 4 or 6")
    _lab_arguments(run)
    run.add_argument("--db", default=str(DEFAULT_DB), help="results database (default ./tunnelbench.db)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    run.set_defaults(func=cmd_run)

    report = verbs.add_parser("report", help="print a stored run")
    report.add_argument("run", nargs="?", default="latest", help="run id or 'latest'")
    report.add_argument("--format", choices=["table", "json"], default="table")
    report.add_argument("--db", default=str(DEFAULT_DB))
    report.set_defaults(func=cmd_report)

    lab = verbs.add_parser("lab", help="build, inspect and remove labs by hand")
    lab_verbs = lab.add_subparsers(dest="lab_verb", required=True, metavar="LAB_VERB")
    up = lab_verbs.add_parser("up", help="build a lab and leave it running")
    up.add_argument("--tunnel", default="none", help="none | wireguard | vxlan")
    up.add_argument("--name", help="lab id: 1-6 lowercase letters or digits (default random)")
    _lab_arguments(up)
    lab_verbs.add_parser("status", help="list labs and what they hold")
    ex = lab_verbs.add_parser("exec", help="run a command in a lab namespace")
    ex.add_argument("--lab", help="lab id (default: the only lab)")
    ex.add_argument("role", help="client | gw | gwa | gwb | server")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    down = lab_verbs.add_parser("down", help="remove one lab")
    down.add_argument("lab_id")
    lab_verbs.add_parser("clean", help="remove every lab tunnelbench recorded")
    lab.set_defaults(func=cmd_lab)
    return top


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(name)s: %(message)s",
    )
    # SIGTERM gets the same orderly teardown as Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        code: int = args.func(args)
        return code
    except UserError as exc:
        print(f"tunnelbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except LabError as exc:
        print(f"tunnelbench: lab error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\ntunnelbench: interrupted; the lab was torn down", file=sys.stderr)
        return 130
