"""``tunnelbench compare``: two runs, or two sets of configurations, side by side with the
ratio of medians, its interval, a rank test and a verdict (``report/compare.py``), as a
table, Markdown, JSON or an HTML page with charts; ``--fail-if-slower`` and the
latency limits (``--fail-if-latency-worse``, ``--fail-if-latency-above``) make it a
regression gate for CI.

Exit codes: 0 when the comparison was written and no gate failed; 1 when a
gate failed, each reason a ``compare:`` line on standard error: a pair over a limit, or
a configuration the gate could not judge (only in A, or failed or skipped in B where A
measured it), or nothing compared at all; 2 for bad input (an option, a run, a
selector), with nothing written, as for every verb. A gate never passes a comparison it
could not make."""

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.cli.options import parse_milliseconds, parse_percent
from tunnelbench.cli.parsing import Verbs, add_db_argument
from tunnelbench.cli.report import (
    check_stdout,
    databases_read,
    output_path,
    side_files_help,
    write_report,
)
from tunnelbench.report import compare, formats
from tunnelbench.report.formats import FormatName, Where

SIDE_HELP = (
    "RUN, latest, DATABASE (its latest run) or DATABASE:RUN, optionally followed by "
    "@SETTING=VALUE[,SETTING=VALUE...] to pick some of its configurations, "
    "e.g. latest@traffic.streams=4"
)


def register(verbs: Verbs) -> None:
    parser = verbs.add_parser(
        "compare",
        help="is B faster than A? ratio of medians, 95%% interval, rank test, verdict",
    )
    parser.add_argument("a", metavar="A", help=SIDE_HELP)
    parser.add_argument("b", metavar="B", help="as A")
    add_db_argument(parser, "results database for RUN")
    known = formats.comparing()
    parser.add_argument(
        "--format",
        default=FormatName.TABLE.value,
        choices=formats.names(known),
        help=f"{' | '.join(formats.names(known))} (default {FormatName.TABLE})",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="write to PATH instead of standard output" + side_files_help(known, "comparison"),
    )
    parser.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        help="exit 1 when B is significantly slower than A (rank test, p < 0.05) by more"
        " than PCT percent in any pair, naming the pairs: a regression gate for CI. Any"
        " --fail-if-* option also exits 1 when nothing paired, or when a configuration of A"
        " has no partner in B or B's failed or was skipped (2: bad input)",
    )
    parser.add_argument(
        "--fail-if-latency-worse",
        metavar="PCT",
        help="exit 1 when B's loaded round trip (each run's p95) is significantly longer"
        " than A's (rank test, p < 0.05) by more than PCT percent in any pair",
    )
    parser.add_argument(
        "--fail-if-latency-above",
        metavar="MS",
        help="exit 1 when any B configuration's median loaded round trip p95 is above MS"
        " milliseconds",
    )
    parser.set_defaults(func=handle)


@dataclass(frozen=True)
class Gate:
    """What ``compare`` fails on; None: not asked."""

    slower_pct: float | None
    latency_worse_pct: float | None
    latency_above_ms: float | None


def handle(args: argparse.Namespace) -> int:
    fmt, rendering = formats.for_comparison(args.format)
    limits = Gate(
        slower_pct=None
        if args.fail_if_slower is None
        else parse_percent("--fail-if-slower", args.fail_if_slower),
        latency_worse_pct=None
        if args.fail_if_latency_worse is None
        else parse_percent("--fail-if-latency-worse", args.fail_if_latency_worse, most=10_000),
        latency_above_ms=None
        if args.fail_if_latency_above is None
        else parse_milliseconds("--fail-if-latency-above", args.fail_if_latency_above),
    )
    read = databases_read(Path(args.db), (args.a, args.b), ("A", "B"))
    output = output_path(args.output, read, fmt, rendering.side_files)
    check_stdout(fmt, output)
    comparison = compare.build(args.a, args.b, Path(args.db))
    write_report(comparison, rendering, Where(stdout=output is None), output)
    if limits == Gate(None, None, None):
        return 0
    failed = [
        judged_gate(comparison),
        gate(comparison, limits.slower_pct) if limits.slower_pct is not None else 0,
        latency_gate(comparison, limits),
    ]
    return max(failed)


def judged_gate(comparison: compare.Comparison) -> int:
    """1 when the gate could not judge what it was asked to: nothing compared, or a
    configuration of A without a partner in B, or B's side failed or skipped; each named
    on standard error. What does not fail (new in B, skipped in both) is named too."""
    failed = 0
    if not compare.compared(comparison):
        a, b = (f"{side.name} in {side.db}" for side in (comparison.a, comparison.b))
        print(
            f"compare: the gate compared nothing: no configuration of A ({a}) paired with"
            f" one of B ({b}) where both measured goodput",
            file=sys.stderr,
        )
        failed = 1
    if (rule := comparison.pairing.text) is not None:
        print(f"compare: {rule}", file=sys.stderr)
        failed |= comparison.pairing.refused is not None
    for item in compare.unjudged(comparison):
        name = compare.pair_name(comparison, item.row)
        verb = "not judged" if item.fails else "note"
        print(f"compare: {verb}: {name}: {item.reason}", file=sys.stderr)
        failed |= item.fails
    return int(failed)


def latency_gate(comparison: compare.Comparison, limits: Gate) -> int:
    """1 when a pair's loaded round trip is worse than either latency limit allows, with
    the pairs on standard error; pairs the test cannot decide are said too."""
    failed = 0
    if limits.latency_above_ms is not None:
        for row in compare.latency_above(comparison, limits.latency_above_ms):
            print(
                f"compare: loaded RTT p95 above {limits.latency_above_ms:g} ms:"
                f" {compare.pair_name(comparison, row)}: {_p95_text(row)}",
                file=sys.stderr,
            )
            failed = 1
    if limits.latency_worse_pct is not None:
        for row in compare.latency_worse(comparison, limits.latency_worse_pct):
            assert row.latency_stats is not None
            print(
                f"compare: loaded RTT worse by more than {limits.latency_worse_pct:g}%:"
                f" {compare.pair_name(comparison, row)}:"
                f" {compare.latency_verdict(row.latency_stats)}",
                file=sys.stderr,
            )
            failed = 1
        if undecided := compare.latency_undecided(comparison):
            names = "; ".join(compare.pair_name(comparison, row) for row in undecided)
            print(
                f"compare: {len(undecided)} pair(s) have too few runs for the rank test to"
                f" see a longer round trip ({names}); at least 4 runs a side can reach"
                " p < 0.05",
                file=sys.stderr,
            )
    return failed


def _p95_text(row: compare.Row) -> str:
    runs = compare.p95_runs(row.b)
    return f"median {statistics.median(runs):,.2f} ms over {len(runs)} run(s)"


def gate(comparison: compare.Comparison, pct: float) -> int:
    """1 when a pair is significantly slower by more than ``pct`` percent, with the pairs
    on standard error; pairs the test cannot decide are said too (they pass)."""
    slower = compare.slower(comparison, pct)
    for row in slower:
        assert row.stats is not None
        print(
            f"compare: slower by more than {pct:g}%: {compare.pair_name(comparison, row)}:"
            f" {row.stats.verdict}",
            file=sys.stderr,
        )
    if undecided := compare.undecided(comparison):
        names = "; ".join(compare.pair_name(comparison, row) for row in undecided)
        print(
            f"compare: {len(undecided)} pair(s) have too few runs for the rank test to see a"
            f" slowdown ({names}); at least 4 runs a side can reach p < 0.05",
            file=sys.stderr,
        )
    return 1 if slower else 0
