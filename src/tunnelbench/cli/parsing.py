"""What every verb module uses to register itself: the parser class and the type of the
collection of verbs it adds its parser to.

Each verb module (``cli/<verb>.py``) exposes ``register(verbs)``, which adds its parser
(and its own sub-verbs) and sets ``func`` to its handler; :mod:`tunnelbench.cli.main`
lists the modules once and maps every error a handler raises to one exit code.

An option whose value is one of a set declares the set as argparse ``choices`` (from the
enum or the registry that defines it), so that ``--help``, shell completion and the
check all read the same list, which cannot go stale.
"""

import argparse
import re
from typing import Any, NoReturn, TypeAlias

from tunnelbench.bench.store import DB_VARIABLE, DEFAULT_DB, default_db
from tunnelbench.echo import capped, shown, unknown_value

Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class CappedParser(argparse.ArgumentParser):
    """argparse, with the values it echoes in a usage error capped (``invalid choice:
    '<a megabyte>'``). Subcommands' parsers are of the same class."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A value not among the option's ``choices`` (each item of a comma list) is
        bad input like any other: one line in the words a plan's value gets, with the
        closest allowed value, exit code 2 (argparse's own message is two lines of
        usage and ``invalid choice`` with no suggestion). Overrides argparse's check."""
        if action.choices is None:
            return
        for item in value if isinstance(value, list) else [value]:
            if item not in action.choices:
                allowed = [str(choice) for choice in action.choices]
                self.exit(2, f"tunnelbench: error: {option_name(action)}: "
                          f"{unknown_value(item, allowed)}\n")  # fmt: skip

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"'([^']{60,})'", lambda m: shown(m.group(1)), message)
        super().error(re.sub(r"\S{80,}", lambda m: capped(m.group(0)), message))


def option_name(action: argparse.Action) -> str:
    """How an error names an option: its long flag (``--format``), or a positional
    argument's name."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    return str(action.metavar or action.dest)


class FromVariable(str):
    """The value of ``--db`` when ``$TUNNELBENCH_DB`` gave it (argparse keeps a default
    as it is, so the type says where the path came from: see :func:`db_from_variable`)."""


def db_from_variable(args: argparse.Namespace) -> bool:
    """Whether the verb's database is the one ``$TUNNELBENCH_DB`` names (``--db`` not
    given), so that its errors name the variable, not an option the user did not type."""
    return isinstance(getattr(args, "db", None), FromVariable)


def add_db_argument(parser: argparse.ArgumentParser, what: str = "results database") -> None:
    """``--db``, which defaults to ``$TUNNELBENCH_DB`` or ``./tunnelbench.db``; the help
    says which, and the value in force when the variable is set."""
    db = default_db()
    here = f"; here {shown(str(db))}" if db != DEFAULT_DB else ""
    parser.add_argument(
        "--db",
        default=FromVariable(str(db)) if db != DEFAULT_DB else str(db),
        metavar="PATH",
        help=f"{what} (default: ${DB_VARIABLE} or ./{DEFAULT_DB}{here})".replace("%", "%%"),
    )
