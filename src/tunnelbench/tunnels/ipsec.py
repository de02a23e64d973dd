"""IPsec: IKEv2 by strongSwan, ESP tunnel mode between the two tunnel ends.

ESP is the kernel's (XFRM, through an XFRM interface) when this kernel has the asked
cipher's AEAD, else strongSwan's userspace ESP (kernel-libipsec: a TUN device, ESP in
UDP); see :mod:`tunnelbench.tunnels.esp`. Like WireGuard, each end's tunnel device gets
the inner addresses 198.19.0.1/.2 and routes to the far side's prefixes, and the
CHILD_SA's traffic selectors are exactly those: the end's own inner address and the
prefixes behind it, both families.

Transport mode is refused: it protects only packets between the two ends themselves,
and the lab's traffic is routed through them (``tunnel.protection = "ipsec"`` around
VXLAN is where transport mode applies).
"""

import functools
import platform
from collections.abc import Mapping
from dataclasses import replace
from typing import ClassVar

from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Cipher, EspMode, TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.model import encapsulation as model
from tunnelbench.model.kindfacts import Wire
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.system import programs, versions
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.base import (
    ESP_CIPHERS,
    Tunnel,
    TunnelHandle,
    TunnelSpec,
    require_esp,
)
from tunnelbench.tunnels.esp import Session
from tunnelbench.tunnels.site import Site
from tunnelbench.tunnels.strongswan import KERNEL, LIBIPSEC, Child


class Ipsec(Tunnel):
    kind = TunnelKind.IPSEC
    implementations: ClassVar[tuple[str, ...]] = strongswan.IMPLEMENTATIONS
    ciphers: ClassVar[tuple[Cipher, ...]] = ESP_CIPHERS
    userspace_implementations: ClassVar[tuple[str, ...]] = (LIBIPSEC,)
    display = "IPsec"
    packages = strongswan.PACKAGES
    # The lab's ipsec is tunnel mode (transport cannot carry routed traffic).
    encapsulation = model.Encapsulation.ESP_TUNNEL

    def wire(self, spec: TunnelSpec) -> Wire:
        """ESP itself is the encapsulation: its cipher and NAT-T size it."""
        spec = _as_esp(spec)
        assert spec.esp_implementation is not None and spec.cipher is not None
        kind, options = strongswan.esp_model(spec.esp_implementation, spec.cipher, spec.esp_mode)
        return Wire(kind, options)

    def overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        # outer IP + UDP 8 (libipsec) + ESP header 8 + IV 8 + trailer 2 + ICV 16, plus
        # 0-3 bytes of padding
        return self.esp_overhead(_as_esp(spec), outer_family)

    def default_mtu(self, underlay_mtu: int, spec: TunnelSpec) -> int:
        # The largest inner packet whose ESP packet (padding included) fits the WAN, as
        # Linux's esp4_get_mtu; libipsec reads at most 1400 bytes from its TUN device.
        spec = _as_esp(spec)
        assert spec.esp_implementation is not None and spec.cipher is not None
        kind, options = strongswan.esp_model(spec.esp_implementation, spec.cipher, spec.esp_mode)
        fits = model.default_tunnel_mtu(
            kind, underlay_mtu, inner_family=4, outer_family=4, options=options
        )
        if spec.esp_implementation == LIBIPSEC:
            return min(fits, strongswan.LIBIPSEC_MAX_MTU)
        return fits

    def _uses_esp(self, settings: TunnelSettings) -> bool:
        return True

    def _carried_overhead(self, spec: TunnelSpec) -> int:
        return 0  # ESP carries the inner packet itself

    def check(self, settings: TunnelSettings) -> None:
        if settings.esp_mode is EspMode.TRANSPORT:
            raise UserError(
                "tunnel.esp_mode: 'transport' protects only packets between the two tunnel "
                "ends themselves, and ipsec carries the lab's routed traffic, which needs "
                "'tunnel'; transport mode goes with tunnel.protection = 'ipsec' around vxlan"
            )
        cipher = self._resolve_cipher(settings)
        self._check_protection(settings)
        if settings.implementation == LIBIPSEC and settings.mtu is not None:
            self._check_esp_mtu(
                TunnelSpec(LIBIPSEC, settings.mtu, cipher, esp_implementation=LIBIPSEC)
            )

    def resolve(
        self, settings: TunnelSettings, underlay_mtu: int, esp: str | None = None
    ) -> TunnelSpec:
        self.check(settings)
        cipher = self._resolve_cipher(settings)
        assert cipher is not None  # ipsec always encrypts
        # A name is checked against the kind's list; which ESP "auto" means depends on
        # the cipher (the kernel may have one AEAD and not the other).
        requested = settings.implementation
        if requested is not None:
            self.resolve_implementation(requested)
        implementation = esp
        if implementation is None:
            implementation = strongswan.resolve_implementation(requested, cipher, settings.esp_mode)
            require_esp(implementation, "tunnel.implementation")
        if settings.cpu_budget is not None and implementation == KERNEL:
            raise UserError(
                "tunnel.cpu_budget: needs a userspace tunnel daemon; ipsec uses kernel ESP "
                "here (charon only negotiates keys); set tunnel.implementation = 'libipsec'"
            )
        spec = TunnelSpec(
            implementation=implementation,
            cipher=cipher,
            esp_mode=settings.esp_mode,
            esp_implementation=implementation,
        )
        spec = replace(spec, mtu=settings.mtu or self.default_mtu(underlay_mtu, spec))
        self._check_esp_mtu(spec)
        return spec

    def programs(self, implementation: str) -> list[tuple[str, str]]:
        return list(strongswan.PROGRAMS)

    def version(self, implementation: str) -> str:
        return f"{charon_version()}, ESP by {_esp_by(implementation, platform.release())}"

    def end_programs(self) -> tuple[str, ...]:
        return (*(program for program, _ in strongswan.PROGRAMS), "mount", "ip")

    def build(self, site: Site, spec: TunnelSpec) -> TunnelHandle:
        """Both daemons through the site, the ESP devices addressed and routed, then the
        CHILD_SA each end's traffic selectors ask for; named by who does ESP."""
        assert spec.cipher is not None
        handle = TunnelHandle(self.kind, spec.implementation, "", spec.mtu)
        session = Session(site, spec.implementation, spec.cipher, spec.esp_mode)
        session.start(device_mtu=spec.mtu)
        left, right = site.tunnel_ends
        children = {}
        for role in (left, right):
            device = session.devices[role]
            handle.devices[role] = device
            # Before the SAs: libipsec installs its routes with a source address inside
            # the local traffic selector, which must exist by then.
            self.address_and_route(site, role, device, spec.mtu)
            children[role] = (Child(strongswan.CONNECTION, *selectors(site, role, spec.mtu)),)
        session.establish(children)
        session.record(handle)
        return handle

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        handle = self.build(lab, spec)
        handle.version = self.version(spec.implementation)
        return handle

    def end_version(self, implementation: str, kernel: str, first_lines: Mapping[str, str]) -> str:
        charon = first_lines.get(strongswan.CHARON, "")
        try:
            daemon = f"strongSwan {strongswan.version(charon)}"
        except LabError:
            daemon = f"strongSwan (version not found: {charon or 'no output'})"
        return f"{daemon}, ESP by {_esp_by(implementation, kernel)}"


def _as_esp(spec: TunnelSpec) -> TunnelSpec:
    """ipsec's implementation is its ESP's; an unresolved cipher is the default."""
    return replace(
        spec,
        esp_implementation=spec.esp_implementation or spec.implementation,
        cipher=spec.cipher or ESP_CIPHERS[0],
    )


def selectors(site: Site, role: str, mtu: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``role``'s traffic selectors: its own inner addresses and the prefixes behind it
    (local), the peer's inner addresses and the prefixes behind the peer (remote), as the
    site selects them (:meth:`Site.selected`); every family the tunnel carries."""
    left, right = site.tunnel_ends
    peer = right if role == left else left
    local: list[str] = []
    remote: list[str] = []
    for family in Ipsec().carried_families(site.families, mtu):
        host = 32 if family == 4 else 128
        local.append(f"{_bare(site.inner_address(role, family))}/{host}")
        local += site.selected(role, family)
        remote.append(f"{_bare(site.inner_address(peer, family))}/{host}")
        remote += site.selected(peer, family)
    return tuple(local), tuple(remote)


def _bare(address: str) -> str:
    """An interface address without its prefix length."""
    return address.partition("/")[0]


def _esp_by(implementation: str, kernel: str) -> str:
    """Who does ESP, in a version line: libipsec, or the kernel by its release."""
    return "kernel-libipsec" if implementation == LIBIPSEC else f"linux {kernel}"


@functools.cache
def charon_version() -> str:
    """``strongSwan 5.9.8``, from this machine's daemon itself."""
    charon = programs.require(strongswan.CHARON, "strongSwan's IKE daemon")
    done = versions.ask([charon, "--version"])
    return f"strongSwan {strongswan.version(done.stdout + done.stderr)}"
