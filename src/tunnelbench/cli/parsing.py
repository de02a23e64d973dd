"""What every verb module uses to register itself: the parser class and the type of the
collection of verbs it adds its parser to.

Each verb module (``cli/<verb>.py``) exposes ``register(verbs)``, which adds its parser
(and its own sub-verbs) and sets ``func`` to its handler; :mod:`tunnelbench.cli.main`
lists the modules once and maps every error a handler raises to one exit code.
"""

import argparse
import re
from typing import NoReturn, TypeAlias

from tunnelbench.echo import capped, shown

Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class CappedParser(argparse.ArgumentParser):
    """argparse, with the values it echoes in a usage error capped (``invalid choice:
    '<a megabyte>'``). Subcommands' parsers are of the same class."""

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"'([^']{60,})'", lambda m: shown(m.group(1)), message)
        super().error(re.sub(r"\S{80,}", lambda m: capped(m.group(0)), message))
