"""``lab.wan`` on real hosts: the WAN link's shaper, queue under test and impairments put
on the two ends of the link the tunnel crosses, as the lab puts them on its WAN veths.

The ends are the hosts file's ``tunnel.ends``; each end's WAN device is its route to the
other end (:meth:`tunnelbench.remote.site.HostsSite.wan_underlay`). The ``tc`` command
lines are the lab's own (:func:`tunnelbench.lab.shaping.link_commands`), so a queue
comparison on a real router is the lab's queue comparison. What a trial measures there
is then what the lab models: the trials record the hosts' MTUs as their ``lab.wan.mtu``
and ``lab.lan_mtu``, so the ceiling is that of the real path.

Only a device whose root queue is the kernel's own (handle ``0:``: ``noqueue``,
``pfifo_fast``, ``mq``, or the ``default_qdisc``) is touched: deleting the root puts that
back, so the removal is exact. A root someone configured is refused by name and left
alone. Every change is recorded on its host before it is made, as the tunnels' are.
"""

import dataclasses
import json

from tunnelbench.errors import LabError
from tunnelbench.lab.shaping import device_commands, link_commands
from tunnelbench.model.plan import WAN_TC_SETTINGS, LinkSettings
from tunnelbench.remote.session import Session
from tunnelbench.remote.site import HostsSite, route_to

#: The ``lab.wan`` settings a real link takes: what ``tc`` puts on its ends. Its MTU and
#: encapsulation are the hosts' own.
SETTABLE = WAN_TC_SETTINGS
#: The handle of a root qdisc the kernel attached itself.
KERNEL_ROOT = "0:"


def unset(wan: LinkSettings) -> LinkSettings:
    """``wan`` with every :data:`SETTABLE` setting at its default."""
    default = LinkSettings()
    return dataclasses.replace(wan, **{name: getattr(default, name) for name in SETTABLE})


def is_set(wan: LinkSettings) -> bool:
    """Whether ``wan`` asks for anything on the link."""
    return unset(wan) != wan


def problems(session: Session) -> list[str]:
    """Why the WAN link's ends cannot take ``lab.wan``, end by end: a black box, no
    ``tc``, no address to find the link by, a root queue that is not the kernel's own."""
    plan = session.file.tunnel
    found = []
    for role in plan.ends:
        if role not in session.hosts:
            found.append(f"{role}: a black box (no ssh): its WAN queue cannot be set (lab.wan)")
        elif "tc" not in session.facts[role].programs:
            found.append(f"{role}: tc is not installed (iproute2); lab.wan sets its WAN queue")
    far = plan.ends[1]
    if session.file.hosts[far].address is None:
        found.append(f"{far}.address: needed to find the WAN link to {far} (lab.wan)")
    if found:
        return found
    site = HostsSite(session)
    for role in plan.ends:
        device = wan_device(site, role)
        kind, handle = root_qdisc(session, role, device)
        if handle != KERNEL_ROOT:
            found.append(
                f"{role}: {device}'s root queue is {kind} {handle}, not the kernel's own;"
                " tunnelbench replaces only that (deleting its own restores it exactly)."
                " Remove yours, or leave lab.wan unset"
            )
    return found


def wan_device(site: HostsSite, role: str) -> str:
    """``role``'s device towards the other end of the WAN link."""
    device = site.wan_underlay(role).device
    if device is None:
        raise LabError(f"{role}: its route to the WAN link's other end names no device")
    return device


def root_qdisc(session: Session, role: str, device: str) -> tuple[str, str]:
    """(kind, handle) of ``device``'s root qdisc on ``role``'s host."""
    done = session.hosts[role].run(["tc", "-j", "qdisc", "show", "dev", device, "root"])
    try:
        (root,) = [q for q in json.loads(done.stdout) if q.get("root")]
        return str(root["kind"]), str(root["handle"])
    except (ValueError, KeyError, TypeError):
        raise LabError(f"{role}: tc gave no root qdisc of {device}: {done.stdout[:200]}") from None


def mtus(session: Session) -> tuple[int, int]:
    """The real path's (WAN MTU, LAN MTU): the smaller of the WAN ends' devices, and the
    server's device towards the client's source address."""
    _, source = route_to(session, "client", session.file.target(False))
    device, _ = route_to(session, "server", source)
    text = session.hosts["server"].run(["cat", f"/sys/class/net/{device}/mtu"]).stdout
    return HostsSite(session).underlay_mtu(), int(text.strip())


def _asked(wan: LinkSettings) -> tuple[object, ...] | None:
    """What ``wan`` puts on the link, comparable; None when nothing."""
    return tuple(getattr(wan, name) for name in SETTABLE) + (wan.mtu,) if is_set(wan) else None


class WanLink:
    """The WAN link's settings as they stand on its ends during a run."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.standing: tuple[object, ...] | None = None
        #: role -> its WAN device, while settings stand on it.
        self.devices: dict[str, str] = {}
        self._undo: dict[str, list[list[str]]] = {}

    def set(self, wan: LinkSettings) -> None:
        """Put ``wan``'s settings on the link's ends, the previous ones removed first;
        nothing when they stand already. A ``tc`` refusal fails with its words."""
        if (asked := _asked(wan)) == self.standing:
            return
        self.clear()
        if asked is None:
            return
        site = HostsSite(self.session)
        for role in self.session.file.tunnel.ends:
            host = self.session.hosts[role]
            device = wan_device(site, role)
            steps = self._undo.setdefault(role, [])
            self.devices[role] = device
            for command in device_commands(device, wan.queue, wan.queue_limit):
                length = host.run(["cat", f"/sys/class/net/{device}/tx_queue_len"]).stdout
                reverse = ["ip", "link", "set", "dev", device, "txqueuelen", length.strip()]
                host.undo(reverse)
                steps.append(reverse)
                host.run(["ip", *command])
            reverse = ["tc", "qdisc", "del", "dev", device, "root"]
            host.undo(reverse)
            steps.append(reverse)
            for command in link_commands(device, wan):
                done = host.run(["tc", *command], check=False)
                if done.returncode != 0:
                    said = done.stderr.strip() or f"exit status {done.returncode}"
                    raise LabError(f"{role}: tc {' '.join(command)}: {said}")
        self.standing = asked

    def clear(self) -> None:
        """Remove what :meth:`set` put on the ends. Their records stay on the hosts for a
        run that dies first; a root deleted twice is the kernel's own the second time,
        which cleanup takes for done."""
        for role, steps in self._undo.items():
            for step in reversed(steps):
                self.session.hosts[role].run(step)
        self._undo.clear()
        self.devices.clear()
        self.standing = None


def refusal(lab_key: str) -> str:
    """Why a ``lab.*`` setting is refused for real hosts."""
    return (
        f"{lab_key}: cannot be set for real hosts (their links, MTUs, offloads and cores are"
        " their own; of the lab's settings only lab.wan's rate, shaper, queue and"
        " impairments are put on their WAN link, for the trials that ask); remove it from"
        " the plan or run it in a lab without --hosts"
    )
