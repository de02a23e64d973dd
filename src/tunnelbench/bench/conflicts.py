"""Settings that no machine can run together: refused before anything runs (exit 2).

What one machine lacks (a kernel module, a program) skips a plan's configuration on that
machine (:mod:`tunnelbench.bench.skips`); what no machine could run is an error of the
plan or of the command line, found by ``plan show`` as by ``run``, for a lab in a VM as
for one on this machine's kernel: traffic of an IP version the tunnel cannot carry (IPv6
through ipip), a tunnel MTU whose packets do not fit the WAN, a shaper with no rate, a
setting the tunnel kind does not have (ESP around WireGuard, an AES cipher for it,
libipsec above the 1,400 bytes it reads), a CPU budget on a kernel tunnel.

Pure: the tunnel kinds' own rules (:meth:`tunnelbench.tunnels.base.Tunnel.check`) and the
wire model's sizes (:mod:`tunnelbench.model.encapsulation`); nothing is probed.
"""

from collections.abc import Callable, Collection, Mapping

from tunnelbench.errors import UserError
from tunnelbench.kinds import Cipher, Protection, TunnelKind
from tunnelbench.model import encapsulation as model
from tunnelbench.model.plan import TrialConfig, TunnelSettings
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.base import ESP_CIPHERS, Tunnel, TunnelSpec

#: How a setting is named in the messages: a plan's key paths as they are.
PLAN_KEYS: Mapping[str, str] = {}


def conflicts(
    config: TrialConfig, given: Collection[str], keys: Mapping[str, str] = PLAN_KEYS
) -> list[str]:
    """Every conflict of ``config``, each one line naming its keys. ``given``: the
    setting paths the user set (a default is not a choice to refuse); ``keys``: how
    the user named a setting (a command-line flag), by its path."""

    def key(path: str) -> str:
        return keys.get(path, path)

    found = []
    if refused := family_refusal(config, key):
        found.append(refused)
    wan = config.lab.wan
    if "lab.wan.shaper" in given and "lab.wan.rate" not in given and wan.rate is None:
        found.append(
            f"{key('lab.wan.shaper')}: {wan.shaper.value!r} shapes the WAN to"
            f" {key('lab.wan.rate')}, which is not set; set a rate, e.g. '100mbit', or leave"
            f" {key('lab.wan.shaper')} out"
        )
    if config.tunnel.kind is not TunnelKind.NONE:  # a baseline carries no tunnel settings
        found += _tunnel(config, key)
    return found


def _tunnel(config: TrialConfig, key: Callable[[str], str]) -> list[str]:
    settings = config.tunnel
    tunnel = TUNNELS.get(settings.kind)
    try:
        tunnel.check(settings)
    except UserError as exc:
        return [str(exc)]
    found = []
    if refused := budget_refusal(settings, key("tunnel.cpu_budget")):
        found.append(refused)
    underlay = config.lab.wan.ip_mtu
    most = largest_mtu(tunnel, settings, underlay)
    if settings.mtu is not None and settings.mtu > most:
        inside = f" ({underlay} inside PPPoE)" if underlay != config.lab.wan.mtu else ""
        what = settings.kind.value + (" in ESP" if settings.protection is Protection.IPSEC else "")
        found.append(
            f"{key('tunnel.mtu')}: {settings.mtu} does not fit {key('lab.wan.mtu')}"
            f" {config.lab.wan.mtu}{inside}: {what} adds {underlay - most} bytes, so at most"
            f" {most}"
        )
    return found


def family_refusal(config: TrialConfig, key: Callable[[str], str] = str) -> str | None:
    """Why the tunnel cannot carry the traffic's IP version on any machine (ipip: IPv4
    only; sit: IPv6 only), or None; ``key`` names a setting as the user did. The one rule
    for a plan, the command line and a hosts run."""
    family, kind = config.traffic.family, config.tunnel.kind
    carried = TUNNELS.get(kind).families
    if family in carried:
        return None
    carriers = ", ".join(
        k.value
        for k in TUNNELS.kinds()
        if k is not TunnelKind.NONE and family in TUNNELS.get(k).families
    )
    only = " and ".join(f"IPv{f}" for f in carried)
    name = key("traffic.family")
    other = f"{name} {carried[0]}" if name.startswith("--") else f"{name} = {carried[0]}"
    return (
        f"{name}: {kind.value} carries {only} only, not IPv{family}; use {other} or a tunnel"
        f" kind that carries IPv{family} ({carriers})"
    )


def budget_refusal(settings: TunnelSettings, key: str = "tunnel.cpu_budget") -> str | None:
    """Why ``tunnel.cpu_budget`` (named ``key``) can hold no daemon of this tunnel on any
    machine, or None (also when no budget is set)."""
    if settings.cpu_budget is None:
        return None
    tunnel, kind, named = TUNNELS.get(settings.kind), settings.kind.value, settings.implementation
    needs = f"{key}: needs a userspace tunnel daemon"
    if settings.kind is TunnelKind.NONE:
        return f"{needs}; none is no tunnel"
    if not tunnel.userspace_implementations:
        return f"{needs}; {kind} is a kernel tunnel"
    if named is not None and named not in tunnel.userspace_implementations:
        return f"{needs}; tunnel.implementation = {named!r} runs {kind} in the kernel"
    return None


def largest_mtu(tunnel: Tunnel, settings: TunnelSettings, underlay_mtu: int) -> int:
    """The largest tunnel MTU whose packets, encapsulated, fit an underlay of
    ``underlay_mtu`` unfragmented (the kernel refuses a VXLAN MTU above it; the other
    kinds fragment every full packet). From the wire model, with the ESP that adds least
    (the kernel's; libipsec adds UDP's 8 bytes): a limit no machine can exceed."""
    wire = tunnel.wire(_widest_spec(tunnel, settings))
    if wire is None:
        return underlay_mtu

    def packed(size: int) -> model.Layout:
        return model.layout(
            wire.encapsulation,
            size,
            inner_family=4,
            outer_family=4,
            tunnel_mtu=size,
            options=wire.options,
            protection=wire.protection,
        )

    fixed = packed(underlay_mtu).overhead - packed(underlay_mtu).padding
    size = underlay_mtu - fixed
    while size > 0 and packed(size).outer_packet > underlay_mtu:  # ESP pads 0-3 bytes
        size -= 1
    return size


def _widest_spec(tunnel: Tunnel, settings: TunnelSettings) -> TunnelSpec:
    """``settings`` as the machine that allows the largest packets would resolve them."""
    esp = settings.protection is Protection.IPSEC or settings.kind is TunnelKind.IPSEC
    cipher: Cipher | None = None
    esp_implementation: str | None = None
    if esp:
        cipher = settings.cipher if settings.cipher in ESP_CIPHERS else ESP_CIPHERS[0]
        named = settings.implementation if settings.kind is TunnelKind.IPSEC else None
        esp_implementation = named or strongswan.KERNEL
    # Without ESP a kind's implementations share one wire: any of them will do.
    return TunnelSpec(
        implementation=esp_implementation or settings.implementation or tunnel.implementations[0],
        mtu=settings.mtu or 0,
        cipher=cipher,
        esp_mode=settings.esp_mode,
        protection=settings.protection,
        esp_implementation=esp_implementation,
    )
