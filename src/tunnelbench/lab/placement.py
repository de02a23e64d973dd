"""Which cores each role of a lab runs on.

A pinned role's processes start under ``taskset`` (:class:`~tunnelbench.lab.host.NetnsHost`)
and the receive processing of its links and tunnel device is steered to the same cores
with RPS (``rps_cpus``), so a role's packet work stays where its processes are.

What pinning reaches and what it cannot, on a lab of namespaces:

- It holds the processes (generators, userspace tunnel daemons, the ping probe) and the
  receive half of each veth and tunnel device (RPS moves the packet to the role's core
  before the stack processes it).
- It cannot hold what runs in the sender's context: a veth transmit runs on the core of
  whoever sent, and the kernel's own tunnels (VXLAN, kernel WireGuard, ESP) encrypt and
  encapsulate in the sending context or in softirq on the receiving core. XPS has nothing
  to choose on a veth with one transmit queue, so it is not set. There is no real NIC, so
  there is no IRQ affinity to set.

The layout (:func:`layout`) with fewer cores than roles gives the client, the upload
sender, a core of its own and lets the other roles share the rest: the sender is kept
apart from the gateway's tunnel and forwarding work and from the receiver, but the
client's own userspace tunnel daemon (encryption on upload) shares the sender's core.
"""

from collections.abc import Sequence

from tunnelbench.kinds import Placement
from tunnelbench.model import cpulist
from tunnelbench.model.plan import LabSettings


def layout(roles: Sequence[str], cores: Sequence[int]) -> dict[str, tuple[int, ...]]:
    """The pinned layout of ``roles`` (in chain order, client first) over ``cores``.

    With at least as many cores as roles, the cores are split into one contiguous block
    per role (extra cores go to the roles after the client, which have the tunnel and
    forwarding work). With fewer, the client gets the first core and the other roles are
    split over the rest in contiguous groups; a single core holds every role.
    """
    cores = sorted(cores)
    if not cores:
        raise ValueError("no cores to place the lab on")
    if len(cores) == 1:
        return {role: (cores[0],) for role in roles}
    if len(cores) >= len(roles):
        share, extra = divmod(len(cores), len(roles))
        placed: dict[str, tuple[int, ...]] = {}
        at = 0
        for index, role in enumerate(roles):
            size = share + (1 if 0 < index <= extra else 0)
            placed[role] = tuple(cores[at : at + size])
            at += size
        return placed
    rest, others = cores[1:], list(roles[1:])
    placed = {roles[0]: (cores[0],)}
    for index, role in enumerate(others):
        placed[role] = (rest[index * len(rest) // len(others)],)
    return placed


def role_cpus(
    settings: LabSettings, roles: Sequence[str], cores: Sequence[int]
) -> dict[str, tuple[int, ...]]:
    """The cores each role is held to (roles absent run free): the layout when pinned,
    with a role's own ``lab.cpus.<role>`` taking its place."""
    placed = layout(roles, cores) if settings.placement is Placement.PINNED else {}
    for role, text in settings.cpus.given().items():
        if role in roles:
            placed[role] = cpulist.parse(text)
    return placed


def describe(placed: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """role -> canonical CPU list, as a trial records it."""
    return {role: cpulist.canonical(cores) for role, cores in placed.items()}
