"""Rates as ``tc`` writes them: ``100mbit``, ``1gbit``, ``2.5gbit``, ``500kbit``.

Only bits are accepted. ``tc`` reads ``100mbps`` as 100 megabytes per second (800
Mbit/s), where most people mean 100 Mbit/s; a run once went 8x faster than asked that
way. So every spelling that one reader takes for bits and another for bytes (``mbps``,
``mb``, ``mb/s``, ``mbyte``...) is refused with both readings, and the user picks one.
A bare number is refused too: ``tc`` reads ``100000`` as 100 kbit/s, where the writer
may have meant anything from bits to megabits.

Numbers are read in ASCII digits only, here and in every other setting that takes a
number as text (:func:`refuse_other_digits`): ``\\d`` and ``float()`` read any script's
digits (Arabic-Indic, full-width), which no other tool in the chain (tc, iperf3) accepts.
"""

import re
import unicodedata

from tunnelbench.echo import shown
from tunnelbench.errors import UserError

#: A number as every setting writes it: ASCII digits, an optional decimal part.
NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_NUMBER = rf"^\s*({NUMBER})\s*"
# re.ASCII: under IGNORECASE a Unicode pattern takes the Kelvin sign for "k".
_RATE = re.compile(_NUMBER + r"([kmgt]?)bits?(?:/s)?\s*$", re.IGNORECASE | re.ASCII)
_BARE = re.compile(_NUMBER + "$", re.ASCII)
#: Bytes in tc's reading, or either in a reader's: bps (tc: bytes/s), b, b/s, byte(s).
_AMBIGUOUS = re.compile(
    _NUMBER + r"([kmgt]?)(bps|b/s|b|bytes?(?:/s)?)\s*$", re.IGNORECASE | re.ASCII
)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BYTE_NAMES = {"": "bytes/s", "k": "kilobytes/s", "m": "megabytes/s", "g": "gigabytes/s"}
_BYTE_NAMES["t"] = "terabytes/s"
#: Longer numbers are refused without the arithmetic (the message stays one short line).
_DIGITS_SHOWN = 15
_BIT_NAMES = {"": "bit/s", "k": "kbit/s", "m": "Mbit/s", "g": "Gbit/s", "t": "Tbit/s"}
#: What every refused rate is told to look like.
RATE_FORMS = "write a number with a unit, e.g. 100mbit, 1gbit"


def parse_rate(text: str, *, key: str = "rate") -> int:
    """Return a rate in bit/s: a number with ``bit``, ``kbit``, ``mbit``, ``gbit`` or
    ``tbit`` (and ``/s``). A bare number, which ``tc`` reads as bit/s, is refused."""
    refuse_other_digits(key, text, "100mbit")
    if ambiguous := _AMBIGUOUS.match(text):
        raise UserError(f"{key}: {_both_readings(text, *ambiguous.groups())}")
    if bare := _BARE.match(text):
        number = bare.group(1)
        if len(number) > _DIGITS_SHOWN:
            raise UserError(f"{key}: {shown(text)} has no unit; {RATE_FORMS}")
        raise UserError(
            f"{key}: {shown(text)} has no unit: tc reads it as {human_rate(float(number))};"
            f" {RATE_FORMS}"
        )
    match = _RATE.match(text)
    if not match:
        raise UserError(f"{key}: {shown(text)} is not a rate; {RATE_FORMS}")
    number, prefix = match.groups()
    bits = float(number) * _SCALE[(prefix or "").lower()]
    if bits < 8000:
        raise UserError(f"{key}: {shown(text)} is below the smallest supported rate, 8kbit")
    if bits > 400 * 10**9:
        raise UserError(f"{key}: {shown(text)} is above the largest supported rate, 400gbit")
    return int(bits)


def refuse_other_digits(key: str, text: str, example: str) -> None:
    """Refuse ``text`` (the value of ``key``) when it holds a digit other than ASCII
    0-9 (full-width, Arabic-Indic, superscript), naming the first one; ``example``: the
    value written right."""
    for char in text:
        if char.isnumeric() and char not in "0123456789":
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            raise UserError(
                f"{key}: {shown(text)} holds {char!r} ({name}), not an ASCII digit; write"
                f" numbers with 0-9, e.g. {example}"
            )


def _both_readings(text: str, number: str, prefix: str, unit: str) -> str:
    """Why ``text`` is refused: what it means as bytes (tc's reading of ``bps``; a
    reader's of ``b``), and how to write each reading in bits."""
    p, unit = prefix.lower(), unit.lower()
    if len(number) > _DIGITS_SHOWN:
        return f"{shown(text)} may mean bytes or bits per second; write it in bits, e.g. 100mbit"
    octets = _decimal(float(number) * 8)
    as_bytes = f"{number} {_BYTE_NAMES[p]} = {octets} {_BIT_NAMES[p]}"
    if unit.startswith("byte"):
        return f"{shown(text.strip())} is {as_bytes}; rates are written in bits: {octets}{p}bit"
    if unit == "bps":
        how = f"tc reads this as {as_bytes}"
    else:
        how = f"this may mean {number} {_BIT_NAMES[p]} or {as_bytes}"
    return (
        f"{shown(text.strip())}: {how}; write {number}{p}bit for {number} {_BIT_NAMES[p]}"
        f" or {octets}{p}bit"
    )


def _decimal(value: float) -> str:
    """A number as a person writes it: 800, 2.4, 0.8 (no float noise, no exponent)."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


_SPAN = re.compile(rf"\s*({NUMBER})\s*([smhd])\s*", re.ASCII)
_SPAN_SCALE = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
#: The longest span a setting may name: ten years.
SPAN_MAX_S = 3650 * 86_400


def parse_span(key: str, value: object) -> float:
    """A span of wall time in seconds: ``"7d"``, ``"36h"``, ``"90m"``, ``"3600s"``; a
    bare number is refused (seconds to one reader, days to another)."""
    if not isinstance(value, str):
        raise UserError(f"{key}: {shown(value)} is not a time span such as '7d', '36h' or '90m'")
    refuse_other_digits(key, value, "7d")
    match = _SPAN.fullmatch(value)
    if match is None:
        raise UserError(f"{key}: {shown(value)} is not a time span such as '7d', '36h' or '90m'")
    seconds = float(match.group(1)) * _SPAN_SCALE[match.group(2)]
    if not 1 <= seconds <= SPAN_MAX_S:
        raise UserError(f"{key}: {shown(value)} is out of range; allowed 1s..3650d")
    return seconds


def human_span(seconds: float) -> str:
    """``424 days``, ``2.5 days``, ``36 h``, ``45 min``: a long span as people say it."""
    units = ((86_400, "days"), (3600, "h"))
    scale, unit = next(((s, u) for s, u in units if seconds >= 2 * s), (60, "min"))
    value = seconds / scale
    return f"{value:.0f} {unit}" if value >= 10 else f"{_decimal(round(value, 1))} {unit}"


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
