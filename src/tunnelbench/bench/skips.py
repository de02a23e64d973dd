"""Whether a configuration can run on this machine, and if not, why: one plain reason
naming the setting, so a plan skips it (or a command-line request refuses it).

Pure rules over the :class:`~tunnelbench.bench.capabilities.Capabilities` probed once. A
capability that could not be probed never causes a skip: the run meets the real error.
"""

from tunnelbench.bench import conflicts
from tunnelbench.kinds import TunnelKind, WanEncapsulation
from tunnelbench.model import cpulist
from tunnelbench.model.plan import TrialConfig, TunnelSettings, VmSettings
from tunnelbench.system import programs
from tunnelbench.system.probing import Capabilities, CgroupCpu, Check, Congestion, mask_cpus
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.tunnels import REGISTRY

#: The WAN's impairments, in the order a skip names the first one set.
IMPAIRMENTS = ("delay", "jitter", "loss", "reorder")


def unmet(config: TrialConfig, caps: Capabilities) -> str | None:
    """None when this machine can run ``config``; else one reason naming the setting.

    A capability that could not be probed never causes a skip.
    """
    rules = (_family, _tunnel, _cpu_budget, _qdiscs, _congestion_rule, _rps, _cores, _pppoe, _tools)
    for rule in rules:
        if reason := rule(config, caps):
            return reason
    return None


def in_guest(vm: VmSettings) -> Capabilities:
    """What is known here of a VM guest of size ``vm`` before it boots: its programs are
    this machine's (it runs on this machine's root file system), its CPUs its vCPUs; its
    kernel's links, queues and ESP are not known (probed in the guest), so they cause no
    skip here."""
    unknown = Check(None, "probed in the guest, on its own kernel")
    return Capabilities(
        kernel="",
        euid=0,  # the guest runs tunnelbench as root
        netns=unknown,
        links={},
        qdiscs={},
        esp={},
        congestion=Congestion(None, unknown.detail),
        cgroup=CgroupCpu(None, unknown.detail),
        programs={},  # looked up on this machine's PATH, the guest's too
        cpus=tuple(range(vm.cpus)),
    )


def _implementations(kind: TunnelKind, *, auto: bool = False) -> tuple[str, ...]:
    """A kind's implementations; with ``auto``, those "auto" may choose, in its order."""

    tunnel = REGISTRY.get(kind)
    return (tunnel.auto_order or tunnel.implementations) if auto else tunnel.implementations


def _program(caps: Capabilities, name: str) -> bool | None:
    """Whether a program is installed; None when it was not probed."""
    if name in caps.programs:
        return caps.programs[name].ok
    return programs.find(name) is not None


def _available(caps: Capabilities, kind: str, implementation: str) -> bool | None:
    """Whether an implementation exists here: the kernel's link type, or every program
    the userspace implementation needs; None when that was not probed."""
    if REGISTRY.get(TunnelKind(kind)).in_kernel(implementation):
        return caps.links.get(kind, Check(None)).ok
    found = [
        _program(caps, name) for name, _ in REGISTRY.get(TunnelKind(kind)).programs(implementation)
    ]
    if False in found:
        return False
    return None if None in found else True


def resolve(tunnel: TunnelSettings, caps: Capabilities) -> str | None:
    """The implementation the runner would use (none asked for, "auto": the first
    available, kernel first); None when that cannot be told or nothing is available."""
    if tunnel.implementation is not None:
        return tunnel.implementation
    for name in _implementations(tunnel.kind, auto=True):
        found = _available(caps, tunnel.kind.value, name)
        if found is None:
            return None
        if found:
            return name
    return None


def _family(config: TrialConfig, caps: Capabilities) -> str | None:
    return family_refusal(config)


def family_refusal(config: TrialConfig) -> str | None:
    """A tunnel that cannot carry the traffic's IP version (ipip: IPv4 only), on any
    machine (real hosts too): named first, as no kernel would help. A plan and the
    command line refuse it before this (:func:`~tunnelbench.bench.conflicts.family_refusal`
    decides for all)."""
    return conflicts.family_refusal(config)


def _tunnel(config: TrialConfig, caps: Capabilities) -> str | None:
    tunnel, kind = config.tunnel, config.tunnel.kind.value
    if tunnel.kind is TunnelKind.NONE:
        return None
    registered, named = REGISTRY.get(tunnel.kind), tunnel.implementation
    if named is not None and named not in registered.implementations:
        return None  # not a machine problem: resolving the implementation names it
    wanted = _implementations(tunnel.kind, auto=True) if named is None else (named,)
    if any(_available(caps, kind, name) is not False for name in wanted):
        return None
    refused = caps.links.get(kind, Check(None)).detail
    if not registered.userspace_implementations:
        return f"tunnel.kind: {kind} links cannot be created here ({refused})"
    if not registered.kernel_implementations:  # userspace only (openvpn): name the programs
        needed = registered.programs(wanted[0])
        missing = " and ".join(name for name, _ in needed if _program(caps, name) is False)
        return f"tunnel.kind: {kind} needs {missing}, not installed here"
    kernel = f"kernel {registered.display}"
    if named is not None and registered.in_kernel(named):
        return f"tunnel.implementation: {kernel} is not available ({refused})"
    if named is not None:
        missing = "; ".join(
            f"{name} ({why}) was not found" for name, why in _missing(caps, tunnel.kind, named)
        )
        return f"tunnel.implementation: {named} is not installed: {missing}"
    others = " or ".join(name for name in wanted if not registered.in_kernel(name))
    return (
        f"tunnel.implementation: auto finds neither {kernel} ({refused}) "
        f"nor {others} (not installed)"
    )


def _missing(caps: Capabilities, kind: TunnelKind, named: str) -> list[tuple[str, str]]:
    """The programs an implementation needs that are not installed, with their purpose."""
    needed = REGISTRY.get(kind).programs(named)
    return [(name, purpose) for name, purpose in needed if _program(caps, name) is False]


def _cpu_budget(config: TrialConfig, caps: Capabilities) -> str | None:
    tunnel, kind = config.tunnel, config.tunnel.kind.value
    if config.lab.budget.given() and caps.cgroup.ok is False:
        return f"lab.budget: no cgroup CPU controller ({caps.cgroup.detail})"
    if tunnel.cpu_budget is None:
        return None
    if refused := conflicts.budget_refusal(tunnel):  # a plan refuses it before this
        return refused
    needs = "tunnel.cpu_budget: needs a userspace tunnel daemon"
    resolved = resolve(tunnel, caps)
    if resolved is not None and REGISTRY.get(tunnel.kind).in_kernel(resolved):
        return f"{needs}; {kind} resolves to kernel here"
    if offload := REGISTRY.get(tunnel.kind).kernel_offload(caps):
        return f"{needs}; {offload}"
    if caps.cgroup.ok is False:
        return f"tunnel.cpu_budget: no cgroup CPU controller ({caps.cgroup.detail})"
    return None


def _qdiscs(config: TrialConfig, caps: Capabilities) -> str | None:
    wan = config.lab.wan
    needed = [("lab.wan.queue", wan.queue.value)] if wan.queue is not None else []
    if wan.rate is not None:
        # The shaper's leaf is the queue asked for, else a pfifo.
        needed = [("lab.wan.shaper", wan.shaper.value), *(needed or [("lab.wan.queue", "pfifo")])]
    if wan.impaired:
        # netem at the root, above the rest: named by the first impairment set.
        key = next(f"lab.wan.{n}" for n in IMPAIRMENTS if getattr(wan, n) is not None)
        needed.insert(0, (key, "netem"))
    for key, kind in needed:
        found = caps.qdiscs.get(kind, Check(None))
        if found.ok is False:
            return f"{key}: {kind} is not available in this kernel ({found.detail})"
    return None


def _congestion_rule(config: TrialConfig, caps: Capabilities) -> str | None:
    wanted, cc = config.traffic.congestion, caps.congestion
    if wanted is None or cc.ok is not True or wanted in cc.available + cc.loadable:
        return None
    has = ", ".join(cc.available)
    return f"traffic.congestion: {wanted} is not available; this kernel has {has}"


def _rps(config: TrialConfig, caps: Capabilities) -> str | None:
    mask = config.lab.rps_cpus
    if mask is None or not caps.cpus:
        return None
    try:
        wanted = mask_cpus(mask)
    except ValueError:
        return f"lab.rps_cpus: {mask!r} is not a hexadecimal CPU mask"
    if wanted - set(caps.cpus):
        shown = f"0x{sum(1 << cpu for cpu in wanted):x}"
        return (
            f"lab.rps_cpus: mask {shown} names CPUs this machine does not have "
            f"({len(caps.cpus)} online)"
        )
    return None


def _cores(config: TrialConfig, caps: Capabilities) -> str | None:
    """Cores a role is held to must be online here (``lab.cpus``; the pinned layout is
    made from the online ones)."""
    if not caps.cpus:
        return None
    online = cpulist.canonical(caps.cpus)
    for role, text in config.lab.cpus.given().items():
        if missing := set(cpulist.parse(text)) - set(caps.cpus):
            return (
                f"lab.cpus.{role}: core {cpulist.canonical(missing)} is not online here"
                f" (cores {online})"
            )
    return None


def _pppoe(config: TrialConfig, caps: Capabilities) -> str | None:
    if config.lab.wan.encapsulation is not WanEncapsulation.PPPOE:
        return None
    if caps.pppoe.ok is False:
        return f"lab.wan.encapsulation: pppoe: {caps.pppoe.detail}"
    if _program(caps, "pppd") is False:
        return "lab.wan.encapsulation: pppoe needs pppd (Debian ppp), which is not installed"
    return None


def _tools(config: TrialConfig, caps: Capabilities) -> str | None:
    # Offloads need no ethtool: the lab sets them from inside each namespace.
    generator = config.traffic.generator
    for name, _ in GENERATORS.get(generator).programs():
        if _program(caps, name) is False:
            what = "is" if name == generator.value else f"needs {name}, which is"
            return f"traffic.generator: {generator.value} {what} not installed"
    return None
