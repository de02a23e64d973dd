"""Values echoed back in error messages, capped so that a huge input gives a short line.

An error names the key and the bad value; the value comes from the user (a plan file, a
command line) and may be a megabyte of text, a 4,000-digit number (whose decimal form
Python refuses to compute beyond 4,300 digits) or a list nested a thousand deep. These
functions show such a value in at most :data:`ECHO_MAX` characters, ending with ``...``
when it was cut, and never fail.
"""

import reprlib
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
