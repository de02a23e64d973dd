"""CPU lists as the kernel writes them (``0-1``, ``1,3``, ``0-3,6``): parsed, written
back in canonical form, and turned into the hexadecimal masks ``rps_cpus`` takes."""

from collections.abc import Iterable

#: Cores a list may name: far beyond any machine tunnelbench runs on, and a bound on what
#: a range in a plan can make us build.
CORE_MAX = 1023


def parse(text: str) -> tuple[int, ...]:
    """The cores of ``text``, sorted; :class:`ValueError` saying what is wrong."""
    cores: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not _ascii_digits(low) or (dash and not _ascii_digits(high)):
            raise ValueError(f"{part.strip()!r} is not a core number or a range such as 0-3")
        first, last = int(low), int(high) if dash else int(low)
        if first > last:
            raise ValueError(f"range {part.strip()!r} runs backwards")
        if last > CORE_MAX:
            raise ValueError(f"core {last} is beyond {CORE_MAX}")
        cores.update(range(first, last + 1))
    return tuple(sorted(cores))


def _ascii_digits(text: str) -> bool:
    # str.isdigit() holds for any script's digits (Arabic-Indic, full-width), which the
    # kernel never reads.
    return text.isascii() and text.isdigit()


def canonical(cores: Iterable[int]) -> str:
    """``0-2,5``: runs of consecutive cores as ranges, the kernel's own form."""
    ordered = sorted(set(cores))
    runs: list[str] = []
    start = prev = None
    for core in [*ordered, None]:
        if core is not None and prev is not None and core == prev + 1:
            prev = core
            continue
        if start is not None:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = core
    return ",".join(runs)


def mask(cores: Iterable[int]) -> str:
    """The hexadecimal mask of ``cores`` as ``/sys/.../rps_cpus`` takes it (``3`` for 0-1;
    comma-separated 32-bit groups beyond 32 cores)."""
    value = sum(1 << core for core in set(cores))
    digits = f"{value:x}"
    groups: list[str] = []
    while digits:
        groups.insert(0, digits[-8:])
        digits = digits[:-8]
    return ",".join(groups[:1] + [g.rjust(8, "0") for g in groups[1:]]) or "0"
