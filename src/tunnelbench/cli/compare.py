"""The ``compare`` verb: two runs, or two sets of configurations, side by side with the
ratio of medians, its interval, a rank test and a verdict (``report/compare.py``).

Kept apart from ``cli.py`` so that adding the verb there is one call.
"""

import argparse
from pathlib import Path

from tunnelbench.bench.store import DEFAULT_DB

SIDE_HELP = (
    "RUN, latest, DATABASE (its latest run) or DATABASE:RUN, optionally followed by "
    "@SETTING=VALUE[,SETTING=VALUE...] to pick some of its configurations, "
    "e.g. latest@traffic.streams=4"
)


def add_parser(verbs: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    compare = verbs.add_parser(
        "compare",
        help="is B faster than A? ratio of medians, 95%% interval, rank test, verdict",
    )
    compare.add_argument("a", metavar="A", help=SIDE_HELP)
    compare.add_argument("b", metavar="B", help="as A")
    compare.add_argument("--db", default=str(DEFAULT_DB), help="results database for RUN")
    compare.add_argument("--format", default="table", help="table | md | json (default table)")
    compare.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tunnelbench.cli.report import write_stdout
    from tunnelbench.report import compare

    write_stdout(compare.render(args.a, args.b, Path(args.db), args.format))
    return 0
