"""``tunnelbench compare``: two runs, or two sets of configurations, side by side with the
ratio of medians, its interval, a rank test and a verdict (``report/compare.py``)."""

import argparse
from pathlib import Path

from tunnelbench.cli.parsing import Verbs, add_db_argument
from tunnelbench.cli.report import write_stdout
from tunnelbench.report import compare

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
    parser.add_argument("--format", default="table", help="table | md | json (default table)")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    write_stdout(compare.render(args.a, args.b, Path(args.db), args.format))
    return 0
