"""Which configuration of B each of A's is compared with: the rule of ``compare``.

First by equal settings: two configurations pair when every setting is equal, leaving
out the paths either side's selector names (``7@traffic.streams=1`` against
``7@traffic.streams=4`` pairs each 1-stream configuration with the same one at 4
streams), and the tunnel settings when one side holds only no-tunnel baselines (which
have none).

Then, for what that left unpaired in A, by one differing setting: two runs whose plans
differ in one setting (``tunnel.mtu = 1420`` in one, ``1280`` in the other) pair nothing
by equal settings, yet the comparison is plain. When each of A's unpaired configurations
differs from exactly one of B's unpaired ones, in the same single setting, with one value
on each side (``tunnel.mtu: 1420 → 1280``), they are paired by it and the rule is said.
Anything less clear is refused with the reason, never guessed: an A configuration with two
such partners in B, or one partner for two of A's; different settings for different
configurations; several values on one side; or a setting that other, equally set
configurations of both runs share (a run of 1 and 4 streams against one of 1 and 8 is not
"4 → 8"). A setting a configuration does not have (a baseline's tunnel MTU) is not shared.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunnelbench.analysis.summary import ConfigSummary, varying_axes
from tunnelbench.model.plan import Settings, flatten
from tunnelbench.report.selector import selector_text

Pair = tuple[ConfigSummary | None, ConfigSummary | None]


@dataclass(frozen=True)
class Pairing:
    """How a comparison's configurations were paired: by equal settings alone, or also
    by the one ``setting`` in which each unpaired A configuration differs from one of
    B's (``a_value`` → ``b_value``); ``refused`` says why that second rule was not
    applied where A had configurations left without a partner."""

    setting: str | None = None
    a_value: Any = None
    b_value: Any = None
    refused: str | None = None

    @property
    def text(self) -> str | None:
        """``paired by differing tunnel.mtu: 1420 → 1280``, the refusal, or None when
        every configuration paired by equal settings."""
        if self.setting is not None:
            a, b = (selector_text(self.setting, v) for v in (self.a_value, self.b_value))
            return f"paired by differing {self.setting}: {a} → {b}"
        if self.refused is not None:
            return f"not paired by one differing setting: {self.refused}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": "equal settings" if self.setting is None else "one differing setting",
            "setting": self.setting,
            "a": plain(self.a_value),
            "b": plain(self.b_value),
            "refused": self.refused,
            "text": self.text,
        }


def plain(value: Any) -> Any:
    """A setting's value as JSON holds it (an enum by its value)."""
    return json.loads(json.dumps(value, default=lambda v: getattr(v, "value", str(v))))


def settings(s: ConfigSummary, ignored: frozenset[str], ignore_tunnel: bool) -> Settings:
    """The settings that pairing looks at: all but ``ignored`` (and the tunnel's)."""
    return {
        path: value
        for path, value in s.config.settings().items()
        if path not in ignored and not (ignore_tunnel and path.startswith("tunnel."))
    }


def _key(flat: Settings) -> str:
    return json.dumps(flat, sort_keys=True, default=str)


def _differing(x: Settings, y: Settings) -> set[str]:
    return {path for path in x.keys() | y.keys() if x.get(path) != y.get(path)}


def name(s: ConfigSummary, among: Sequence[ConfigSummary]) -> str:
    """``wireguard (wireguard-go) traffic.streams=4``: the label and the settings in
    which it differs from the others ``among`` (its side's), as a selector writes them."""
    flat = flatten(s.config.to_dict())
    axes = [a for a in varying_axes(list(among)) if a not in ("tunnel.kind",)]
    parts = [f"{a}={selector_text(a, flat.get(a))}" for a in axes]
    return " ".join([s.label, *parts])


def pair(
    a: Sequence[ConfigSummary],
    b: Sequence[ConfigSummary],
    ignored: frozenset[str],
    ignore_tunnel: bool,
) -> tuple[list[Pair], Pairing]:
    """A's configurations, each with its partners in B (or None), then B's left
    unpaired; and the rule used beyond equal settings. See the module docstring."""
    flat_a = [settings(s, ignored, ignore_tunnel) for s in a]
    flat_b = [settings(s, ignored, ignore_tunnel) for s in b]
    b_keys = [_key(f) for f in flat_b]
    partners: dict[int, list[int]] = {}
    for i, f in enumerate(flat_a):
        partners[i] = [j for j, k in enumerate(b_keys) if k == _key(f)]
    taken = {j for js in partners.values() for j in js}
    lone_a = [i for i, js in partners.items() if not js]
    lone_b = [j for j in range(len(b)) if j not in taken]
    pairing = Pairing()
    if lone_a and lone_b:
        matched, pairing = _by_one_setting(a, b, flat_a, flat_b, lone_a, lone_b, partners)
        for i, j in matched.items():
            partners[i] = [j]
            taken.add(j)
    out: list[Pair] = []
    for i, s in enumerate(a):
        out += [(s, b[j]) for j in partners[i]] or [(s, None)]
    out += [(None, s) for j, s in enumerate(b) if j not in taken]
    return out, pairing


def _by_one_setting(
    a: Sequence[ConfigSummary],
    b: Sequence[ConfigSummary],
    flat_a: list[Settings],
    flat_b: list[Settings],
    lone_a: list[int],
    lone_b: list[int],
    partners: dict[int, list[int]],
) -> tuple[dict[int, int], Pairing]:
    """A's unpaired configuration -> B's, by the one setting they differ in; empty,
    with the reason, when the rule does not hold or would be a guess."""
    found: dict[int, list[tuple[int, str]]] = {}
    for i in lone_a:
        found[i] = []
        for j in lone_b:
            diff = _differing(flat_a[i], flat_b[j])
            if len(diff) == 1:
                found[i].append((j, diff.pop()))
    if none := [i for i in lone_a if not found[i]]:
        first = name(a[none[0]], a)
        more = f" (and {len(none) - 1} more)" if len(none) > 1 else ""
        return {}, Pairing(
            refused=f"A's {first}{more} differs from each of B's unpaired configurations in"
            " more than one setting"
        )
    if many := [i for i in lone_a if len(found[i]) > 1]:
        i = many[0]
        options = ", ".join(
            f"{path}={selector_text(path, flat_b[j].get(path))}" for j, path in found[i]
        )
        return {}, Pairing(
            refused=f"ambiguous: A's {name(a[i], a)} differs in one setting from"
            f" {len(found[i])} of B's configurations ({options}); pick one with a selector"
        )
    matched = {i: found[i][0][0] for i in lone_a}
    paths = sorted({found[i][0][1] for i in lone_a})
    if len(paths) > 1:
        return {}, Pairing(
            refused=f"ambiguous: A's unpaired configurations differ from B's in different"
            f" settings ({', '.join(paths)}); compare them with selectors"
        )
    (path,) = paths
    if len(set(matched.values())) < len(matched):
        return {}, Pairing(
            refused=f"ambiguous: one of B's configurations differs only in {path} from"
            " several of A's; compare them with selectors"
        )
    for side, flats, chosen in (("A", flat_a, matched.keys()), ("B", flat_b, matched.values())):
        values = dict.fromkeys(_key({"v": flats[k].get(path)}) for k in chosen)
        if len(values) > 1:
            shown = ", ".join(selector_text(path, flats[k].get(path)) for k in chosen)
            return {}, Pairing(
                refused=f"ambiguous: {path} takes several values in {side}'s unpaired"
                f" configurations ({shown}); compare them with selectors"
            )
    shared = [
        i for i, js in partners.items() if js and flat_a[i].get(path) is not None
    ]  # configurations paired by equal settings that have the setting too
    if shared:
        value = selector_text(path, flat_a[shared[0]].get(path))
        return {}, Pairing(
            refused=f"ambiguous: {path} is also a setting both runs share ({path}={value}"
            f" in {name(a[shared[0]], a)}); compare them with selectors"
        )
    one = next(iter(matched))
    return matched, Pairing(
        setting=path, a_value=flat_a[one].get(path), b_value=flat_b[matched[one]].get(path)
    )
