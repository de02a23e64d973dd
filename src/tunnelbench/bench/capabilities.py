"""What this machine can do, for every kind and generator there is.

The probes themselves are :mod:`tunnelbench.system.probing`'s; which links, programs and
packages there are to probe is what the registered tunnel kinds and generators declare
(their ``link_probe``, ``programs`` and ``debian_packages``), so a new kind is probed,
reported by ``doctor`` and checked by :mod:`tunnelbench.bench.skips` with no table here
to keep in step.
"""

import functools
import os
import platform
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import MappingProxyType
from typing import TypeVar

from tunnelbench.errors import LabError
from tunnelbench.system import probing, programs
from tunnelbench.system.probing import Capabilities, Check
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.traffic.iperf3 import THREADED_SINCE, parse_version
from tunnelbench.tunnels import REGISTRY as TUNNELS

T = TypeVar("T")

#: Probes run side by side (each mostly waits for a short process to start).
PROBES_AT_ONCE = 8
#: Links the lab itself builds on (and doctor reports), whatever the tunnel.
LAB_LINKS: dict[str, tuple[str, ...]] = {
    "bridge": (),
    "ifb": (),
    "veth": ("peer", "name", "tbprobe1"),
    "tun": (),
}
#: Programs the lab needs beyond any kind's or generator's.
LAB_PROGRAMS = ("ethtool", "pppd")
#: Their Debian packages.
LAB_PACKAGES = {"ethtool": "ethtool", "pppd": "ppp"}
#: The kernel modules behind what is probed besides the tunnel kinds' links (each kind
#: declares its own ``kernel_module``): the lab's links, queue disciplines and ESP
#: algorithms, by the name ``doctor`` reports them under. What is always built in
#: (pfifo, bfifo, pfifo_fast) is absent.
KERNEL_MODULES: dict[str, tuple[str, ...]] = {
    "bridge": ("bridge",),
    "ifb": ("ifb",),
    "veth": ("veth",),
    "tun": ("tun",),
    "fq_codel": ("sch_fq_codel",),
    "cake": ("sch_cake",),
    "fq": ("sch_fq",),
    "tbf": ("sch_tbf",),
    "htb": ("sch_htb",),
    "netem": ("sch_netem",),
    "ingress": ("sch_ingress",),
    "pppoe": ("ppp_generic", "pppoe"),
    "rfc4106(gcm(aes))": ("esp4", "esp6", "gcm"),
    "rfc7539esp(chacha20,poly1305)": ("esp4", "esp6", "chacha20poly1305"),
    "cbc(aes)+hmac(sha256)": ("esp4", "esp6", "cbc", "sha256"),
}


def link_probes() -> dict[str, tuple[str, ...]]:
    """Every kernel link type a registered kind's kernel implementation creates, with the
    arguments its probe needs, then the lab's own."""
    found: dict[str, tuple[str, ...]] = {}
    for kind in TUNNELS.kinds():
        if (probe := TUNNELS.get(kind).link_probe()) is not None:
            found.setdefault(*probe)
    return found | LAB_LINKS


def modules_of(capability: str) -> tuple[str, ...]:
    """The kernel modules that give ``capability`` (a link type, queue discipline or ESP
    algorithm, as ``doctor`` names it); none if no module does."""
    modules = KERNEL_MODULES.get(capability, ())
    for kind in TUNNELS.kinds():
        tunnel = TUNNELS.get(kind)
        probe = tunnel.link_probe()
        if probe is not None and probe[0] == capability and tunnel.kernel_module:
            modules = (tunnel.kernel_module,)
    return modules


def module_hint(capability: str) -> str | None:
    """What to load when ``capability`` is missing: ``modprobe ip_gre``; None if no
    module gives it."""
    modules = modules_of(capability)
    if not modules:
        return None
    return f"modprobe {modules[0]}" if len(modules) == 1 else f"modprobe -a {' '.join(modules)}"


def probed_modules() -> tuple[str, ...]:
    """Every module the kernel's capability probes make it load (where it has them): what
    a guest loads while its Python starts (:func:`tunnelbench.vm.machine.guest_command`)."""
    capabilities = [*link_probes(), *probing.QDISC_ARGS, *probing.ESP_ARGS, "pppoe"]
    return tuple(dict.fromkeys(m for c in capabilities for m in modules_of(c)))


def guest_preload() -> list[list[list[str]]]:
    """What a guest runs while its Python starts (10 s under emulation, with a vCPU to
    spare), two groups side by side: the probes' modules loaded, and one ESP security
    association of each algorithm made in a namespace of its own. The kernel instantiates
    an algorithm at its first SA (its templates, their modules, the crypto self-tests):
    the three ESP probes took 13-14 s of an emulated guest's probing, the other probes
    were done in 8."""
    esp = [["unshare", "--net", "--", *probing.esp_probe_argv(name)] for name in probing.ESP_ARGS]
    return [[["modprobe", "-q", "-a", *probed_modules()]], esp]


def install_hint(program: str) -> str | None:
    """What to install when ``program`` is missing, as the generator or tunnel kind that
    needs it says (``apt-get install --no-install-recommends wireguard-tools``)."""
    hints = [GENERATORS.get(g).install_hint(program) for g in GENERATORS.kinds()]
    hints += [TUNNELS.get(k).install_hint(program) for k in TUNNELS.kinds()]
    for hint in hints:
        if hint is not None:
            return hint
    package = LAB_PACKAGES.get(program)
    return programs.apt_install(package) if package else None


def program_names() -> tuple[str, ...]:
    """Every program a registered generator or any implementation of a registered kind
    needs, and the lab's own, in registry order without repeats."""
    names: list[str] = []
    for generator in GENERATORS.kinds():
        names += [name for name, _ in GENERATORS.get(generator).programs()]
    names += LAB_PROGRAMS
    for kind in TUNNELS.kinds():
        tunnel = TUNNELS.get(kind)
        for implementation in tunnel.implementations:
            names += [name for name, _ in tunnel.programs(implementation)]
    return tuple(dict.fromkeys(names))


def package_names() -> tuple[str, ...]:
    """The Debian packages whose installed versions a kind records."""
    names = [p for kind in TUNNELS.kinds() for p in TUNNELS.get(kind).debian_packages()]
    return tuple(dict.fromkeys(names))


def multithreaded(iperf3_version: str) -> bool | None:
    """Whether this iperf3 runs a thread per stream; None when the version is unreadable."""
    try:
        return parse_version(iperf3_version) >= THREADED_SINCE
    except LabError:
        return None


def iperf3_threaded(caps: Capabilities) -> bool | None:
    iperf3 = caps.programs.get("iperf3")
    return multithreaded(iperf3.version) if iperf3 is not None else None


@functools.cache
def probe() -> Capabilities:
    """Everything, probed once per process (read-only: every caller shares it).

    Each probe is a short process or two in an anonymous namespace of its own, mostly
    start-up time: all are started before any is waited for. An emulated guest spent
    30 s on them one by one, and 31 s group by group (a group waited for its slowest:
    loading the ESP algorithms' modules took 10 s)."""
    prefix, how = probing.namespace()
    with ThreadPoolExecutor(max_workers=PROBES_AT_ONCE) as pool:

        def each(
            check: Callable[..., T], items: dict[str, tuple[object, ...]]
        ) -> dict[str, Future[T]]:
            return {name: pool.submit(check, *args) for name, args in items.items()}

        def results(futures: dict[str, Future[T]]) -> MappingProxyType[str, T]:
            return MappingProxyType({name: future.result() for name, future in futures.items()})

        # The slowest first: with a pool of PROBES_AT_ONCE they would otherwise start last.
        esp = each(probing.esp, {name: (name,) for name in probing.ESP_ARGS})
        links = each(probing.link, {kind: (kind, args) for kind, args in link_probes().items()})
        qdiscs = each(
            probing.attempt,
            {kind: (probing.qdisc_probe_argv(kind),) for kind in probing.QDISC_ARGS},
        )
        found = each(probing.program, {name: (name,) for name in program_names()})
        packages = each(probing.debian_package, {name: (name,) for name in package_names()})
        congestion = pool.submit(probing.congestion)
        cgroup = pool.submit(probing.cgroup)
        openvpn_dco = pool.submit(probing.openvpn_dco)
        pppoe = pool.submit(probing.pppoe)
        return Capabilities(
            kernel=platform.release(),
            euid=os.geteuid(),
            netns=Check(prefix is not None, how),
            links=results(links),
            qdiscs=results(qdiscs),
            esp=results(esp),
            congestion=congestion.result(),
            cgroup=cgroup.result(),
            programs=results(found),
            cpus=probing.cpus(),
            openvpn_dco=openvpn_dco.result(),
            pppoe=pppoe.result(),
            packages=results(packages),
        )
