"""Stable names for lab devices in metric names.

Device names carry the lab id (``tb<lab>-<peer>``), which changes with every trial, so
metrics name a device by what it is instead:

- a veth by its link in the topology's chain: ``wan``, ``lan``, ``lan-a``, ``lan-b``
  (the role owning the end tells the two ends apart: ``qdisc.gw.wan`` is the gateway's
  end of the WAN link);
- the tunnel device by ``tunnel``; a WAN end's ppp device over PPPoE by ``ppp``;
- any other device the lab created (named ``tb<lab>-<suffix>``, e.g. an ``ifb`` device
  a shaper might redirect ingress traffic to) by its suffix, which holds no lab id.

Devices the lab did not create (``lo``, fallback tunnel devices the kernel adds to every
namespace) are not lab interfaces and get no name: the probes skip them.

A real host's devices keep their own names (:meth:`DeviceNames.hosts`): its owner named
them, and they do not change between trials. Only its tunnel device (whose name holds the
run's tag) and its WAN device are named as the lab names its own, so that the rules
read them alike; ``lo`` is skipped there too.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from tunnelbench.lab.netns import Lab

TUNNEL = "tunnel"
WAN = "wan"  # the WAN link, as the chains name it (tunnelbench.lab.topology)
PPP = "ppp"  # a WAN end's device over PPPoE (lab.pppoe)


@dataclass(frozen=True)
class DeviceNames:
    """Maps (role, device) to the device's stable name."""

    known: Mapping[str, Mapping[str, str]]  # role -> device -> stable name
    #: What every device the lab creates starts with: "tb<lab>-"; None: every device
    #: but ``lo`` by its own name (a real host's).
    prefix: str | None

    @classmethod
    def of(cls, lab: Lab, tunnel_devices: Mapping[str, str]) -> "DeviceNames":
        known: dict[str, dict[str, str]] = {role: {} for role in lab.chain.roles}
        roles = lab.chain.roles
        for (role, peer), iface in lab.interfaces.items():
            link = lab.chain.links[min(roles.index(role), roles.index(peer))]
            known[role][iface.name] = link
        for role, device in tunnel_devices.items():
            known[role][device] = TUNNEL
        for role, device in lab.ppp.items():
            known[role][device] = PPP
        return cls(known, lab.ifname(""))

    @classmethod
    def hosts(cls, known: Mapping[str, Mapping[str, str]]) -> "DeviceNames":
        """Real hosts' devices: those in ``known`` (role -> device -> name) so named,
        every other by its own name."""
        return cls(known, None)

    def name(self, role: str, device: str) -> str | None:
        """The stable name of ``device`` in ``role``'s namespace; None if not the lab's."""
        known = self.known.get(role, {}).get(device)
        if known is not None:
            return known
        if self.prefix is None:
            return None if device == "lo" else device
        if device.startswith(self.prefix) and len(device) > len(self.prefix):
            return device[len(self.prefix) :]
        return None
