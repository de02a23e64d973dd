"""Which configurations of a run one side of a comparison means: ``RUNREF@SELECTOR``.

A selector is comma-separated ``setting.path=value`` filters over the plan's setting
paths (``traffic.streams=4``, ``tunnel.kind=wireguard,traffic.direction=download``). Each
path and value is checked by the same parser as in a plan file (``plan_fields.SETTINGS``),
so a typo gets the same "did you mean" answer, and a value is compared in its parsed form
(``lab.wan.rate=1gbit`` matches a rate stored as 1000000000 bit/s).
"""

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.echo import capped, did_you_mean, shown
from tunnelbench.errors import UserError
from tunnelbench.model.fields import SETTINGS
from tunnelbench.model.plan import flatten

RATE_PATHS = ("lab.wan.rate", "traffic.udp_rate")
#: No setting holds a number of more digits; longer ones are refused unconverted.
_DIGITS_MAX = 30


@dataclass(frozen=True)
class Filter:
    path: str
    value: Any  # parsed, as the configuration stores it

    def __str__(self) -> str:
        return f"{self.path}={selector_text(self.path, self.value)}"


@dataclass(frozen=True)
class Selector:
    filters: tuple[Filter, ...]

    @classmethod
    def parse(cls, text: str, where: str) -> "Selector":
        """Check every filter of ``text``; ``where`` names the argument in errors."""
        filters: list[Filter] = []
        for term in text.split(","):
            path, sep, raw = term.partition("=")
            path = path.strip()
            if not sep or not path or not raw:
                raise UserError(
                    f"{where}: {shown(term)} in selector {shown(text)} is not SETTING=VALUE, "
                    "e.g. traffic.streams=4"
                )
            if path not in SETTINGS:
                hint = did_you_mean(path[:100], SETTINGS)
                raise UserError(
                    f"{where}: {capped(path)}: unknown setting in selector {shown(text)}{hint}"
                )
            if any(f.path == path for f in filters):
                raise UserError(f"{where}: {path}: given twice in selector {shown(text)}")
            try:
                value = SETTINGS[path].parse(path, _raw(path, raw.strip()))
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from None
            filters.append(Filter(path, value))
        return cls(tuple(filters))

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(f.path for f in self.filters)

    def __str__(self) -> str:
        return ",".join(str(f) for f in self.filters)

    def select(self, summaries: list[ConfigSummary], where: str, run: str) -> list[ConfigSummary]:
        """The configurations every filter matches; a filter that matches none is an
        error that lists the values the run has for that path."""
        settings = [flatten(s.config.to_dict()) for s in summaries]
        for f in self.filters:
            if not any(flat.get(f.path) == f.value for flat in settings):
                present = dict.fromkeys(
                    selector_text(f.path, flat.get(f.path)) for flat in settings
                )
                raise UserError(
                    f"{where}: {f} matches no configuration of {run}; "
                    f"{f.path} there: {', '.join(present)}"
                )
        chosen = [
            s
            for s, flat in zip(summaries, settings, strict=True)
            if all(flat.get(f.path) == f.value for f in self.filters)
        ]
        if not chosen:
            raise UserError(
                f"{where}: no configuration of {run} has {' and '.join(map(str, self.filters))}"
            )
        return chosen


def _raw(path: str, text: str) -> Any:
    """A selector value as the TOML value a plan file would hold (a list of roles is
    written ``client+gw``: commas separate filters)."""
    if path == "lab.offloads.roles":
        return text.split("+")
    if re.fullmatch(r"-?[0-9]+", text):
        if len(text.lstrip("-0")) > _DIGITS_MAX:
            raise UserError(f"{path}: {shown(text)} is out of range ({len(text):,} digits)")
        return int(text)
    if re.fullmatch(r"-?[0-9]+\.[0-9]*", text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def selector_text(path: str, value: Any) -> str:
    """A stored setting as a selector would write it."""
    if value is None:
        return "auto" if path == "tunnel.mtu" else "none"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if path in RATE_PATHS:
        return f"{value / 1e6:g}mbit"
    if isinstance(value, list | tuple):
        return "+".join(str(v) for v in value) or "(every role)"  # roles: () is all of them
    return str(value)
