"""Values echoed back in error messages, capped so that a huge input gives a short line.

An error names the key and the bad value; the value comes from the user (a plan file, a
command line) and may be a megabyte of text, a 4,000-digit number (whose decimal form
Python refuses to compute beyond 4,300 digits) or a list nested a thousand deep. These
functions show such a value in at most :data:`ECHO_MAX` characters, ending with ``...``
when it was cut, and never fail.

A value that must be one of a set gets, after what is allowed, the closest allowed value
(:func:`did_you_mean`), the same way a misspelt key does: ``; did you mean 'wireguard'?``.
"""

import difflib
import reprlib
from collections.abc import Iterable
from typing import Any

#: The most characters an echoed value takes in a message.
ECHO_MAX = 60
#: Whole numbers of more bits than this are described, not written out.
_INT_BITS_MAX = 160


class _Capped(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxset = self.maxdict = 6
        self.maxstring = self.maxother = ECHO_MAX
        self.maxlong = ECHO_MAX

    def repr_int(self, x: int, level: int) -> str:
        return integer(x)

    def repr_bool(self, x: bool, level: int) -> str:
        return repr(x)


_REPR = _Capped()


def integer(value: int) -> str:
    """A whole number in digits, or described by its size when it is too long to show."""
    if value.bit_length() <= _INT_BITS_MAX:
        return str(value)
    digits = int(value.bit_length() * 0.30103) + 1  # log10(2): the size, give or take one
    sign = "-" if value < 0 else ""
    return f"<{sign}{digits:,}-digit number>"


def shown(value: Any) -> str:
    """``repr(value)`` in at most :data:`ECHO_MAX` characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        return integer(value)
    try:
        text = _REPR.repr(value)
    except Exception:  # a repr must never turn an error message into a traceback
        text = f"<{type(value).__name__}>"
    return capped(text)


def capped(text: str, limit: int = ECHO_MAX) -> str:
    """``text`` cut to ``limit`` characters, ending with ``...`` when it was cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Words longer than this are no misspelling of an allowed value; difflib is spared them.
_SUGGEST_MAX = 100


def did_you_mean(word: object, known: Iterable[str], where: str = "") -> str:
    """``"; did you mean 'wireguard'?"`` when one of ``known`` is close to ``word`` (as
    :func:`difflib.get_close_matches` judges), else ``""``; ``where`` prefixes the
    suggestion (a key's section, e.g. ``"matrix."``). The one suggestion of every error
    about a key or a value that must be one of a set."""
    if not isinstance(word, str) or len(word) > _SUGGEST_MAX:
        return ""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f"; did you mean {where + close[0]!r}?" if close else ""


def unknown_value(value: object, allowed: Iterable[str]) -> str:
    """``unknown value 'wirguard'; allowed: none, wireguard, ...; did you mean
    'wireguard'?``: the message (after its key) for a value not among ``allowed``."""
    names = [str(name) for name in allowed]
    return f"unknown value {shown(value)}; allowed: {', '.join(names)}{did_you_mean(value, names)}"
