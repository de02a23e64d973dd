"""Rates as ``tc`` writes them: ``100mbit``, ``1gbit``, ``2.5gbit``, ``500kbit``."""

import re

from tunnelbench.echo import shown
from tunnelbench.errors import UserError

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps)?\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_rate(text: str, *, key: str = "rate") -> int:
    """Return a rate in bit/s. ``bps`` means bytes per second, as in ``tc``."""
    match = _RATE.match(text)
    if not match:
        raise UserError(
            f"{key}: {shown(text)} is not a rate; write a number with a unit, e.g. 100mbit, 1gbit"
        )
    number, prefix, unit = match.groups()
    bits = float(number) * _SCALE[prefix.lower()] * (8 if (unit or "").lower() == "bps" else 1)
    if bits < 8000:
        raise UserError(f"{key}: {shown(text)} is below the smallest supported rate, 8kbit")
    if bits > 400 * 10**9:
        raise UserError(f"{key}: {shown(text)} is above the largest supported rate, 400gbit")
    return int(bits)


def format_rate(bits_per_second: float) -> str:
    """A rate as ``tc`` accepts it, exact to the bit."""
    value = int(bits_per_second)
    for prefix, scale in (("g", 10**9), ("m", 10**6), ("k", 10**3)):
        if value % scale == 0:
            return f"{value // scale}{prefix}bit"
    return f"{value}bit"


def human_rate(bits_per_second: float) -> str:
    """``1 Gbit/s``, ``100 Mbit/s``, ``2.5 Gbit/s``: the rate as people say it."""
    for scale, unit in ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:g} {unit}"
    return f"{bits_per_second:g} bit/s"


def mbit(bits_per_second: float) -> float:
    return bits_per_second / 1e6
