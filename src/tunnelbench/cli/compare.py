"""``tunnelbench compare``: two runs, or two sets of configurations, side by side with the
ratio of medians, its interval, a rank test and a verdict (``report/compare.py``), as a
table, Markdown, JSON or an HTML page with charts; ``--fail-if-slower`` makes it a
regression gate for CI."""

import argparse
import sys
from pathlib import Path

from tunnelbench.cli.options import parse_percent
from tunnelbench.cli.parsing import Verbs, add_db_argument
from tunnelbench.cli.report import databases_read, emit, emit_markdown, output_path
from tunnelbench.report import compare, compare_page

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
    parser.add_argument(
        "--format", default="table", help="table | md | json | html (default table)"
    )
    parser.add_argument(
        "-o",
        "--output",
        help="write to this file instead of standard output (md: with its charts as PNG"
        " files beside it)",
    )
    parser.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        help="exit 1 when B is significantly slower than A (rank test, p < 0.05) by more"
        " than PCT percent in any pair, naming the pairs: a regression gate for CI",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    compare.check_format(args.format)
    limit = (
        None
        if args.fail_if_slower is None
        else parse_percent("--fail-if-slower", args.fail_if_slower)
    )
    read = databases_read(Path(args.db), (args.a, args.b), ("A", "B"))
    output = output_path(args.output, args.format, read)
    comparison = compare.build(args.a, args.b, Path(args.db))
    if output is not None and args.format == "md":
        emit_markdown(output, lambda path: compare_page.write_markdown(comparison, path))
    else:
        emit(compare_page.render(comparison, args.format), output)
    return 0 if limit is None else gate(comparison, limit)


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
