"""Limits the lab itself imposed on a trial, as the trial's record shows them.

A router forwards with its NIC's offloads on: GRO bundles what arrives, GSO/TSO segment
after the qdisc, so its CPU pays for bundles, not for every wire packet. A lab that
turns them off (a plan's ``lab.offloads``; the lab's own choice for an impaired WAN, so
that netem drops and reorders wire packets; before offloads stayed on, for a shaped one
too) makes every host do a wire packet's work per packet: a CPU limit it then shows is
partly the lab's (measured: wireguard-go on a shaped 1 Gbit/s link, 4 streams, 287
Mbit/s and a saturated core with offloads off, the link's full ceiling at 59-70% of a
core with them on). Such a verdict is named as the lab's, and its advice is the lab
setting, not the router.

The record: ``Resolved.lab.offloads`` (role -> feature -> on, as the lab set them) and
``Resolved.lab.gso_max_segs`` (role -> segments per skb where the lab made every skb one
wire packet). Not a kernel tunnel device's GSO, which a shaped lab turns off so that the
shaper counts the headers it sends (``Resolved.lab.unbundled_tunnel_devices``): no plan
setting reaches it, and it is the tunnel device's work alone.
"""

from dataclasses import dataclass

from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import Resolved

#: The offloads whose absence makes a host handle every wire packet on its own.
FEATURES = ("gro", "gso", "tso")


@dataclass(frozen=True)
class LabLimit:
    """What the lab turned off, where, and whether the plan asked for it."""

    features: tuple[str, ...]  # "gro", "gso", "tso": off on some role's links
    roles: tuple[str, ...]
    one_segment: tuple[str, ...]  # roles whose links carried one segment per skb
    asked: tuple[str, ...]  # the plan's own lab.offloads settings that turned them off

    #: The verdict's qualifier.
    label = "offloads off"

    def text(self) -> str:
        """Which offloads the lab turned off and where, and on whose word."""
        what = "/".join(f.upper() for f in self.features) or "segmentation offloads"
        where = f"{what} off on the links of {', '.join(self.roles)}" if self.roles else ""
        extra = []
        if self.one_segment:
            extra.append(f"one segment per skb (gso_max_segs 1) on {', '.join(self.one_segment)}")
        said = "; ".join(p for p in (where, *extra) if p)
        who = f"the plan's {', '.join(self.asked)}" if self.asked else "the lab's own choice"
        return f"{said} ({who})"


def lab_limit(config: TrialConfig, resolved: Resolved) -> LabLimit | None:
    """The offloads the trial's lab turned off; None when it left them all as the
    kernel has them (or the record predates the offload record)."""
    off_roles, features = [], []
    for role, changes in sorted((resolved.lab.offloads or {}).items()):
        off = [f for f in FEATURES if changes.get(f) is False]
        if off:
            off_roles.append(role)
            features += [f for f in off if f not in features]
    one_segment = tuple(sorted(r for r, n in (resolved.lab.gso_max_segs or {}).items() if n == 1))
    if not (off_roles or one_segment):
        return None
    plan = config.lab.offloads
    asked = tuple(f"lab.offloads.{f} = false" for f in FEATURES if getattr(plan, f) is False)
    return LabLimit(
        features=tuple(f for f in FEATURES if f in features),
        roles=tuple(off_roles),
        one_segment=one_segment,
        asked=asked,
    )
