"""Builds a lab of network namespaces joined by veth links, and operates inside it.

Nothing here touches the host's own namespace: veth pairs are created inside a lab
namespace with their peer placed directly in another, and sysctls, offloads and receive
packet steering are set per namespace (``ip netns exec`` gives each command the
namespace's own ``/sys``).
"""

import contextlib
import functools
import logging
import re
import secrets
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.kinds import WanEncapsulation
from tunnelbench.lab import cgroup, placement
from tunnelbench.lab import state as lab_state
from tunnelbench.lab.daemon import wait_for_device, wait_for_socket
from tunnelbench.lab.host import Host, NetnsHost
from tunnelbench.lab.pppoe import up as pppoe_up
from tunnelbench.lab.shaping import device_commands, link_commands
from tunnelbench.lab.topology import (
    CHAINS,
    Chain,
    Underlay,
    link_address,
    plen,
    routes_for,
    tunnel_address,
)
from tunnelbench.model import cpulist
from tunnelbench.model.plan import LabSettings, Offloads
from tunnelbench.system import probing, programs
from tunnelbench.system.command import CommandError, run, side_by_side

log = logging.getLogger("tunnelbench.lab")

GATEWAY_SYSCTLS = {"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.forwarding": "1"}
# Duplicate address detection would hold new IPv6 addresses "tentative" for ~1 s. No TCP
# metrics are saved when a connection closes: a kept lab's next trial must not start its
# window where the last ended (a fresh lab has none), and nothing need be flushed.
COMMON_SYSCTLS = {
    "net.ipv6.conf.all.accept_dad": "0",
    "net.ipv6.conf.default.accept_dad": "0",
    "net.ipv4.tcp_no_metrics_save": "1",
}


def new_lab_id() -> str:
    return secrets.token_hex(3)


@dataclass
class Interface:
    role: str
    name: str
    mtu: int


def batch_failure(tool: str, namespace: str, commands: list[list[str]], stderr: str) -> str:
    """Which line of a batch failed, and the kernel's reason: ``-batch`` ends its error
    output with "Command failed -:N", which alone says nothing."""
    lines = stderr.strip().splitlines()
    numbered = (re.fullmatch(r"Command failed -:(\d+)", line) for line in lines)
    failed = next((m for m in numbered if m), None)
    reason = "; ".join(line for line in lines if not line.startswith("Command failed")) or (
        "no error output"
    )
    if failed is None or not 1 <= int(failed[1]) <= len(commands):
        return f"`{tool} -n {namespace} -batch` failed: {reason}"
    command = " ".join(commands[int(failed[1]) - 1])
    return f"`{tool} -n {namespace} {command}` failed: {reason}"


@dataclass
class Lab:
    """A built lab. Create with :func:`build`; remove with :meth:`teardown`."""

    lab_id: str
    settings: LabSettings
    state: lab_state.LabState
    chain: Chain
    interfaces: dict[tuple[str, str], Interface] = field(default_factory=dict)
    #: role -> the cores it is held to (roles absent run free): see lab.placement.
    cpus: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: role -> the cgroup of its CPU budget (lab.budget), which its processes start in.
    cgroups: dict[str, Path] = field(default_factory=dict)
    #: role -> its ppp device, on a WAN over PPPoE (lab.pppoe).
    ppp: dict[str, str] = field(default_factory=dict)

    def ns(self, role: str) -> str:
        return f"tb-{self.lab_id}-{role}"

    @contextlib.contextmanager
    def standing(self) -> Iterator[None]:
        """Inside this block, an OSError met while the lab's namespaces are gone is the
        lab's failure (a LabError saying so), not a fault of the code.

        A lab removed under its user (``lab clean --force``) takes its files with it:
        reading a generator's output then fails with FileNotFoundError. Teardown removes
        namespaces before files, so a missing file of this lab implies missing namespaces.
        An OSError in a lab that still stands goes on as it is.
        """
        try:
            yield
        except OSError as exc:
            present = set(lab_state.list_namespaces())
            if gone := [name for name in self.state.namespaces if name not in present]:
                raise LabError(
                    f"lab {self.lab_id} was removed while in use ({', '.join(gone)} gone): {exc}"
                ) from exc
            raise

    def ifname(self, suffix: str) -> str:
        """A link name owned by this lab; at most 15 characters, unique on the host."""
        name = f"tb{self.lab_id}-{suffix}"
        if len(name) > 15:
            raise ValueError(f"interface name {name!r} is longer than 15 characters")
        return name

    def link_device(self, role: str, peer: str) -> str:
        return self.interfaces[(role, peer)].name

    def wan_device(self, role: str) -> str:
        left, right = self.chain.tunnel_ends
        return self.link_device(role, right if role == left else left)

    def address(self, role: str, peer: str, family: int) -> str:
        """The address of ``role`` on its link to ``peer``."""
        i, j = self.chain.roles.index(role), self.chain.roles.index(peer)
        return link_address(min(i, j), left=i < j, family=family)

    # -- the tunnel's view of the lab (tunnelbench.tunnels.site.Site) ------------------

    @property
    def tunnel_ends(self) -> tuple[str, str]:
        return self.chain.tunnel_ends

    @property
    def families(self) -> tuple[int, ...]:
        return self.settings.families

    def wan_underlay(self, role: str) -> Underlay:
        """The WAN addresses of ``role`` and its peer, bound to ``role``'s WAN device."""
        left, right = self.chain.tunnel_ends
        peer = right if role == left else left
        local, remote = self.address(role, peer, 4), self.address(peer, role, 4)
        return Underlay(local, remote, self.wan_device(role))

    def inner_address(self, role: str, family: int) -> str:
        left = role == self.chain.tunnel_ends[0]
        return f"{tunnel_address(left, family)}/{plen(family)}"

    def inner_peer(self, role: str, family: int) -> str:
        return tunnel_address(role != self.chain.tunnel_ends[0], family)

    def inner_routes(self, role: str, family: int) -> list[str]:
        """Every lab prefix beyond the tunnel's far end."""
        return [r.prefix for r in routes_for(self.chain, role, family, tunnel=True) if r.tunnel]

    def files(self, role: str) -> Path:
        return self.directory

    def selected(self, role: str, family: int) -> list[str]:
        # each lab prefix beyond a tunnel end is a link of that end's: it holds an address
        peer = next(r for r in self.chain.tunnel_ends if r != role)
        return self.inner_routes(peer, family)

    def record_removal(self, role: str, command: list[str]) -> None:
        pass  # the lab's namespaces take every change made in them with them

    def underlay_mtu(self) -> int:
        return self.settings.wan.ip_mtu

    def program(self, role: str, name: str, purpose: str) -> str:
        return programs.require(name, purpose)

    def can_create(self, role: str, link_type: str) -> bool:
        return probing.kernel_link_type(link_type) is None

    @property
    def roles(self) -> tuple[str, ...]:
        return self.chain.roles

    def has(self, role: str, program: str) -> bool:
        return True  # the lab's programs were required before it was built

    def clock_offset(self, role: str) -> float:
        return 0.0  # one machine, one clock

    def free_udp_port(self, role: str, ports: range) -> int:
        return ports.start  # a namespace the lab made has nothing bound

    def free_ports(self, role: str, ports: range, count: int) -> list[int]:
        if count > len(ports):
            raise LabError(f"{count} ports asked of {ports.start}-{ports.stop - 1}")
        return list(ports[:count])  # as above: the first ones

    def await_daemon(
        self,
        role: str,
        proc: "subprocess.Popen[bytes]",
        name: str,
        log: Path,
        device: str | None,
        socket: Path | None = None,
    ) -> lab_state.ProcessRecord:
        """From the daemon's own /proc entry and this machine's file system, polled
        every 10 ms (a process per poll would cost more than the wait)."""
        daemon = next(r for r in self.state.processes if r.pid == proc.pid)
        if device is not None:
            wait_for_device(daemon, name, device, log)
        if socket is not None:
            wait_for_socket(daemon, name, socket, log)
        return daemon

    def server_address(self, family: int) -> str:
        """Where test traffic goes: the server's end of its link (through the tunnel)."""
        return self.address(self.chain.server, self.chain.roles[-2], family)

    @property
    def directory(self) -> Path:
        return self.state.directory

    def host(self, role: str) -> Host:
        """Where ``role`` runs: every command, process and file of the role goes through
        it (:mod:`tunnelbench.lab.host`)."""
        cores = self.cpus.get(role)
        pinned = cpulist.canonical(cores) if cores else None
        return NetnsHost(self.ns(role), self.state, pinned, self.cgroups.get(role))

    def exec(
        self,
        role: str,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float = 30.0,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return self.host(role).run(argv, check=check, timeout=timeout, input_text=input_text)

    def ip_batch(self, role: str, commands: list[list[str]]) -> None:
        """Several ``ip`` commands in one process; the first failure is an error."""
        self._batch("ip", role, commands)

    def tc_batch(self, role: str, commands: list[list[str]]) -> None:
        """Several ``tc`` commands in one process; the first failure is an error."""
        self._batch("tc", role, commands)

    def _batch(self, tool: str, role: str, commands: list[list[str]]) -> None:
        # Batch lines are split on blanks: only lab-generated names and numbers go here.
        if not commands:
            return
        text = "\n".join(" ".join(c) for c in commands) + "\n"
        try:
            self.host(role).run([tool, "-batch", "-"], input_text=text)
        except CommandError as exc:
            raise LabError(batch_failure(tool, self.ns(role), commands, exc.stderr)) from exc

    def start(
        self,
        role: str,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | str | None = None,
    ) -> "subprocess.Popen[bytes]":
        """Start a process as ``role``, its output into the host's files, recorded for
        teardown (see :meth:`tunnelbench.lab.host.Host.spawn`).

        It is recorded just after it starts; should tunnelbench die in between, teardown
        still finds it inside the lab's namespace (see :mod:`tunnelbench.lab.state`).
        """
        return self.host(role).spawn(argv, stdout=stdout, stderr=stderr)

    def teardown(self) -> None:
        problems = lab_state.teardown(self.state)
        if problems:
            raise LabError("lab teardown incomplete: " + "; ".join(problems))


def build(settings: LabSettings, *, lab_id: str | None = None, tunnel: bool = False) -> Lab:
    """Create the namespaces, links, addresses, routes and shaping of a lab.

    ``tunnel`` says whether routes across the WAN go through a tunnel device; the tunnel
    itself is brought up afterwards by its module, which adds those routes. On any
    failure everything created so far is removed before the error propagates.
    """
    chain = CHAINS[settings.topology]
    offload_roles(settings.offloads, chain)  # refuse unknown roles before creating anything
    lab_id = lab_id or new_lab_id()
    state = lab_state.LabState(
        lab_id=lab_id, topology=settings.topology.value, owner=lab_state.current_owner()
    )
    if state.path.exists():
        raise LabError(f"a lab named {lab_id!r} already exists; remove it with `lab down`")
    state.save()
    cpus = placement.role_cpus(settings, chain.roles, probing.cpus())
    if cpus:
        programs.require("taskset", "holding the lab's processes to their cores")
    lab = Lab(lab_id=lab_id, settings=settings, state=state, chain=chain, cpus=cpus)
    try:
        _create(lab, tunnel)
    except BaseException:
        lab_state.teardown(state)
        raise
    return lab


def _wait_for_carrier(lab: Lab, timeout: float = 5.0) -> None:
    """Wait until every veth reports carrier.

    A packet sent before that fails IPv6 neighbour discovery, and the neighbour entry
    then stays unusable for about a second: the first trial would measure a stall.
    """
    deadline = time.monotonic() + timeout
    devices: dict[str, list[str]] = {}
    for (role, _), iface in lab.interfaces.items():
        devices.setdefault(role, []).append(iface.name)
    pending = set(devices)
    while pending:
        pending = {role for role in pending if not lab.host(role).links_up(devices[role])}
        if pending and time.monotonic() > deadline:
            raise LabError(f"links in {', '.join(sorted(pending))} did not come up in {timeout} s")
        if pending:
            time.sleep(0.005)


def _veth_pairs(lab: Lab) -> list[list[str]]:
    """The commands that create the chain's links (a veth pair each), with each end
    recorded in ``lab.interfaces``."""
    chain, settings = lab.chain, lab.settings
    pairs = []
    for j, link in enumerate(chain.links):
        left, right = chain.roles[j], chain.roles[j + 1]
        mtu = settings.wan.mtu if link == "wan" else settings.lan_mtu
        lab.interfaces[(left, right)] = Interface(left, lab.ifname(right), mtu)
        lab.interfaces[(right, left)] = Interface(right, lab.ifname(left), mtu)
        # Created inside the left namespace with its peer born in the right one: the
        # pair never exists in the host namespace.
        left_index, right_index = link_indexes(j)
        pairs.append(
            ["ip", "-n", lab.ns(left), "link", "add", lab.ifname(right), "mtu", str(mtu)]
            + ["index", str(left_index), *queue_counts(settings)]
            + ["type", "veth", "peer", "name", lab.ifname(left), "mtu", str(mtu)]
            + ["index", str(right_index), *queue_counts(settings)]
            + ["netns", lab.ns(right)]
        )
    return pairs


def _create(lab: Lab, tunnel: bool) -> None:
    chain, settings = lab.chain, lab.settings
    if budgets := settings.budget.given():
        limits = cgroup.limit_roles(lab.state, budgets)
        lab.cgroups = {role: Path(path) for role, path in limits.cgroups.items()}
        lab.state.facts.role_budgets = limits.resolved()
    # Each step below runs its roles' (or links') commands side by side: an emulated
    # guest takes 0.2-0.4 s to start each, and a lab is built for every configuration.
    for role in chain.roles:
        lab.state.add_namespace(lab.ns(role))
    # The first alone: on a machine's first lab, `ip netns add` makes /run/netns a mount
    # point, and two doing so at once would stack two mounts there.
    first, *others = chain.roles
    run(["ip", "netns", "add", lab.ns(first)])
    side_by_side(
        [functools.partial(_build_step, ["ip", "netns", "add", lab.ns(r)]) for r in others]
    )
    # Before any link exists: links take their IPv6 settings from "default" when born.
    gateways = chain.roles[1:-1]
    sysctls = {r: COMMON_SYSCTLS | (GATEWAY_SYSCTLS if r in gateways else {}) for r in chain.roles}
    for role in chain.roles:
        lab.host(role).set_sysctls(sysctls[role])
    side_by_side([functools.partial(_build_step, argv) for argv in _veth_pairs(lab)])
    pppoe = settings.wan.encapsulation is WanEncapsulation.PPPOE
    routes: dict[str, list[list[str]]] = {}
    batches: dict[str, list[list[str]]] = {}
    for role in chain.roles:
        commands = [["link", "set", "lo", "up"]]
        for (owner, peer), iface in lab.interfaces.items():
            if owner != role:
                continue
            # Over PPPoE the WAN's addresses are the ppp devices' (pppd sets them).
            wan_end = {role, peer} == set(chain.tunnel_ends)
            for family in () if pppoe and wan_end else settings.families:
                address = f"{lab.address(role, peer, family)}/{plen(family)}"
                command = ["address", "add", address, "dev", iface.name]
                commands.append(command + (["nodad"] if family == 6 else []))
            commands.append(["link", "set", iface.name, "up"])
        routes[role] = [
            ["route", "add", route.prefix, "via", route.via]
            for family in settings.families
            for route in routes_for(chain, role, family, tunnel)
            if route.via is not None  # tunnel routes come with the tunnel device
        ]
        # Routes via the WAN peer wait for the PPPoE session to give it an address.
        batches[role] = commands + ([] if pppoe else routes[role])
    side_by_side([functools.partial(lab.ip_batch, r, batches[r]) for r in chain.roles])
    _queue_wan(lab)
    _set_offloads(lab)
    if masks := receive_masks(lab):
        _set_rps(lab, masks)
        lab.state.facts.rps = masks
        if pppoe and settings.queues is not None:
            held = hold_session_to_one_core(lab, probing.cpus())
            lab.state.facts.rps_pppoe_wan = held
    if lab.cpus:
        lab.state.facts.placement = placement.describe(lab.cpus)
    _wait_for_carrier(lab)
    if pppoe:
        sessions = pppoe_up(lab)
        lab.ppp = {role: str(session["device"]) for role, session in sessions.items()}
        lab.state.facts.pppoe = sessions
        for role, commands in routes.items():
            lab.ip_batch(role, commands)
    lab.state.facts.interfaces = {f"{o}>{p}": i.name for (o, p), i in lab.interfaces.items()}
    lab.state.save()


def _build_step(argv: list[str]) -> None:
    """One command of the lab's own build, run in a worker thread: through this module,
    so the thread's stack says whose command it is (tests/integration/test_host_seam)."""
    run(argv)


def _queue_wan(lab: Lab) -> None:
    """The impairments, shaper and queue discipline on both ends of the WAN link (see
    :mod:`tunnelbench.lab.shaping` for the tree of qdiscs)."""
    wan = lab.settings.wan

    def queue(role: str) -> None:
        device = lab.wan_device(role)
        lab.ip_batch(role, device_commands(device, wan.queue, wan.queue_limit))
        lab.tc_batch(role, link_commands(device, wan))

    side_by_side([functools.partial(queue, role) for role in lab.chain.tunnel_ends])


def offload_roles(offloads: Offloads, chain: Chain) -> tuple[str, ...]:
    """The roles whose links get the offload settings: the listed ones, or all.

    A role this topology does not have is a :class:`LabError` naming the ones it has.
    """
    for role in offloads.roles:
        if role not in chain.roles:
            raise LabError(
                f"offloads.roles: {role!r} is not a role of this topology; "
                f"roles: {', '.join(chain.roles)}"
            )
    return offloads.roles or chain.roles


#: Why an impaired lab turns segmentation and receive offloads off by default.
IMPAIRED_OFFLOADS_REASON = (
    "the WAN is impaired: netem drops, delays and reorders what it is handed, and with"
    " offloads that is a GSO/GRO bundle of up to ~45 packets, not one wire packet"
)
#: The offloads every lab link has unless the plan or an impairment says otherwise: a
#: router's and a PC's NICs. Senders keep TSO/GSO (the kernel's default on a veth, as on
#: a NIC: the device segments after the qdisc) and receivers do GRO, which a physical
#: NIC has on by default and a veth does not (it then takes NAPI's path, as a NIC does).
#: A forwarding Linux router therefore queues aggregates: a packet-limited FIFO holds
#: up to ``queue_limit`` of them (:func:`tunnelbench.model.wan.queue_bytes` measures
#: what they held). Turning them off everywhere made every host slower than a real
#: one: wireguard-go on a shaped 1 Gbit/s link gave 287 Mbit/s and "cpu-bound" with
#: them off, the link's ceiling at 59-70% of a core with them on.
HARDWARE_OFFLOADS = {"gro": True}


def role_offloads(settings: LabSettings, chain: Chain) -> dict[str, dict[str, bool]]:
    """The offload features set on each role's links (role -> feature -> on).

    By default every role's links get :data:`HARDWARE_OFFLOADS`, as real hardware has
    them; a queue that must count wire packets asks for it narrowly (a ``bfifo``, whose
    limit is in bytes). The plan's ``lab.offloads`` settings replace those features for
    its roles. An impaired WAN turns every feature the plan does not set off on every
    role (:data:`IMPAIRED_OFFLOADS_REASON`): netem's loss and reordering are meant per
    wire packet, not per aggregate, which is a setting of the lab, recorded as such.
    """
    asked = settings.offloads.changes()
    chosen = set(offload_roles(settings.offloads, chain))
    result: dict[str, dict[str, bool]] = {}
    for role in chain.roles:
        changes = dict(asked) if role in chosen else {}
        if settings.wan.impaired:
            for name in ("gro", "gso", "tso"):
                changes.setdefault(name, False)
        for name, value in HARDWARE_OFFLOADS.items():
            changes.setdefault(name, value)
        result[role] = changes
    return result


def _set_offloads(lab: Lab) -> None:
    offloads = role_offloads(lab.settings, lab.chain)
    single: dict[str, int] = {}
    for (role, _), iface in lab.interfaces.items():
        if role not in offloads:
            continue
        if lab.settings.wan.impaired and offloads[role].get("gso") is False:
            # TCP builds GSO bundles whatever the device offers (Linux 6.0 on: the stack
            # segments them after the qdisc), so with GSO "off" a sender's own egress
            # still handed netem bundles of 2-3 packets at 20 Mbit/s, and 1% loss drawn
            # per bundle lost 0.34% of the packets. One segment per skb makes each one
            # a wire packet (measured then: 0.64-1.09%). Only for netem: on a 1 Gbit/s
            # shaped link of this machine's kernel it cut goodput to 44% of the ceiling.
            lab.ip_batch(role, [["link", "set", "dev", iface.name, "gso_max_segs", "1"]])
            single[role] = 1
        if offloads[role]:
            lab.host(role).set_offloads(iface.name, offloads[role])
    lab.state.facts.offloads = offloads
    if single:
        lab.state.facts.gso_max_segs = single


def receive_masks(lab: Lab) -> dict[str, str]:
    """role -> the RPS mask of its links' receive queues: ``lab.rps_cpus`` on every role,
    ``lab.queues``' spreading (:func:`queue_masks`), or each pinned role's own cores
    (``lab.rps_cpus`` goes with neither of the others: plan check)."""
    if lab.settings.rps_cpus is not None:
        return {role: lab.settings.rps_cpus for role in lab.chain.roles}
    if lab.settings.queues is not None:
        return queue_masks(lab, probing.cpus())
    return {role: cpulist.mask(cores) for role, cores in lab.cpus.items()}


#: The interface index of the first link's first end; each end of each link has its own
#: (:func:`link_indexes`).
FIRST_LINK_INDEX = 100


def link_indexes(link: int) -> tuple[int, int]:
    """The interface indexes of the ``link``-th veth pair's ends (left, right): distinct
    from each other and from every other end in the lab.

    Left to the kernel, both ends of a pair born in two fresh namespaces take the same
    index (each namespace counts its own), and the kernel then takes the pair for a
    device stacked on itself: its carrier change waits for the link watcher's next
    round, up to a second, where a pair of two indexes comes up at once (0.95 s against
    7 ms here, in every lab built). 100 is above the fallback tunnel devices (gre0,
    sit0, ...) a kernel puts in every new namespace."""
    return FIRST_LINK_INDEX + 2 * link, FIRST_LINK_INDEX + 2 * link + 1


def queue_counts(settings: LabSettings) -> list[str]:
    """``ip link add`` arguments for the veth's queues (none: the device's one)."""
    if settings.queues is None:
        return []
    return ["numtxqueues", str(settings.queues), "numrxqueues", str(settings.queues)]


def queue_masks(lab: Lab, online: Sequence[int]) -> dict[str, str]:
    """role -> the RPS mask of every receive queue of its links, for ``lab.queues`` N:
    N of the role's cores (its ``lab.cpus``, else every online core), so each flow's hash
    picks one of N cores, as a NIC's RSS picks one of N queues, each with its interrupt
    on a core of its own.

    Not one core per queue: a veth hands its peer every packet through receive queue 0's
    steering (the transmit queue's index is not carried over as a receive queue; measured:
    rx-1's mask never took a packet), so RPS over N cores is how the spreading is done.
    The WAN ends of a PPPoE WAN get one core: a NIC's RSS cannot hash inside PPPoE and
    puts the whole session into one queue (RPS could: the kernel's flow dissector reads
    through PPPoE, which is why it is held to one core here)."""
    count = lab.settings.queues or 1
    return {
        role: cpulist.mask((lab.cpus.get(role) or tuple(online))[:count])
        for role in lab.chain.roles
    }


def hold_session_to_one_core(lab: Lab, online: Sequence[int]) -> dict[str, str]:
    """Steer each PPPoE WAN veth to the first of its role's cores (see
    :func:`queue_masks`); returns role -> that mask."""
    held = {}
    for role in lab.chain.tunnel_ends:
        held[role] = cpulist.mask((lab.cpus.get(role) or tuple(online))[:1])
        steer(lab, role, [lab.wan_device(role)], held[role])
    return held


def _set_rps(lab: Lab, masks: dict[str, str]) -> None:
    """Write each role's receive packet steering mask to every receive queue of its veths."""
    for role, mask in masks.items():
        devices = [i.name for (r, _), i in lab.interfaces.items() if r == role]
        steer(lab, role, devices, mask)


def steer(lab: Lab, role: str, devices: Sequence[str], mask: str) -> None:
    """Write ``mask`` to ``rps_cpus`` of every receive queue of ``devices`` in ``role``'s
    namespace; a device without receive queues is a :class:`LabError`."""
    folders = [f"/sys/class/net/{device}/queues/" for device in devices]
    # The namespace's own /sys, as `ip netns exec` mounts it, lists the queues.
    found = lab.exec(role, ["find", *folders, "-maxdepth", "1", "-name", "rx-*"]).stdout
    paths = sorted(f"{line.strip()}/rps_cpus" for line in found.splitlines() if line.strip())
    if not paths:
        raise LabError(f"no receive queues found under {', '.join(folders)} in {lab.ns(role)}")
    lab.exec(role, ["tee", *paths], input_text=mask + "\n")


def unbundle_tunnel(lab: Lab, devices: dict[str, str]) -> dict[str, str]:
    """Turn segmentation offloads off on a kernel tunnel's devices (role -> device) when
    the WAN is shaped or impaired; returns role -> device for those set. A gre or geneve
    device otherwise hands the WAN's shaper GSO bundles whose outer headers it does not
    count (the link would carry more than its rate: measured in Debian 6.1, 102.4% and
    104.7% of the ceiling at 20 Mbit/s, where gretap and ipip reached 100.1% and 99.8%).
    Only the tunnel device: the links keep their offloads (:func:`role_offloads`)."""
    if lab.settings.wan.rate is None and not lab.settings.wan.impaired:
        return {}
    for role, device in devices.items():
        lab.host(role).set_offloads(device, {"gso": False, "tso": False})
    return dict(devices)


def steer_tunnel(lab: Lab, devices: dict[str, str]) -> dict[str, str]:
    """Steer the receive work of each pinned role's tunnel device (role -> device) to the
    role's cores; returns role -> device for those set. Run once the tunnel is up."""
    steered = {}
    for role, device in devices.items():
        if role in lab.cpus:
            steer(lab, role, [device], cpulist.mask(lab.cpus[role]))
            steered[role] = device
    return steered
