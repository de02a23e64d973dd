"""The interface every tunnel kind implements."""

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from tunnelbench.echo import did_you_mean, shown
from tunnelbench.errors import UserError
from tunnelbench.kinds import Cipher, EspMode, Protection, TunnelKind
from tunnelbench.lab.netns import Lab
from tunnelbench.lab.state import ProcessRecord
from tunnelbench.model import encapsulation as model
from tunnelbench.model.kindfacts import KernelPath, SetupFound, TunnelFacts, Wire
from tunnelbench.model.plan import IMPLEMENTATION_AUTO, IPV6_MTU_MIN, TunnelSettings
from tunnelbench.system import programs
from tunnelbench.system.probing import Capabilities
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.site import Site

#: What ESP offers, whether as the tunnel itself or around an unencrypted one.
ESP_CIPHERS = (Cipher.AES_256_GCM, Cipher.CHACHA20_POLY1305)
#: The largest IPv4 packet (its 16-bit total length): an outer packet cannot be larger.
IPV4_PACKET_MAX = 65535


@dataclass(frozen=True)
class TunnelSpec:
    """A tunnel as it will run on this machine: the plan's settings, "auto" resolved.

    ``cipher`` is None for a tunnel that does not encrypt. ``esp_implementation`` is who
    does ESP (``kernel`` or ``libipsec``) for ipsec and for protection; None without ESP.
    ``each_end``: no implementation was asked for and the ends decide for themselves as
    the tunnel is built (real hosts): each takes the kernel's where it has it, else
    ``implementation`` (see :meth:`Tunnel.build`).
    """

    implementation: str
    mtu: int = 0
    cipher: Cipher | None = None
    esp_mode: EspMode = EspMode.TUNNEL
    protection: Protection = Protection.NONE
    esp_implementation: str | None = None
    each_end: bool = False

    @property
    def esp(self) -> bool:
        """Whether ESP carries this tunnel's packets (IPsec itself, or protection)."""
        return self.protection is Protection.IPSEC


@dataclass
class TunnelHandle:
    """What a running tunnel consists of, for probes, checks and the record."""

    kind: TunnelKind
    implementation: str
    version: str
    mtu: int
    devices: dict[str, str] = field(default_factory=dict)  # role -> device
    daemons: dict[str, ProcessRecord] = field(default_factory=dict)  # role -> daemon
    logs: list[Path] = field(default_factory=list)
    #: What set-up found out and the trial records (``Resolved.record_setup``), e.g.
    #: whether OpenVPN's data channel runs in the kernel.
    found: SetupFound = field(default_factory=SetupFound)
    #: role -> the implementation that end ran, where the ends chose for themselves
    #: (real hosts: the kernel's WireGuard at one, wireguard-go at the other).
    implementations: dict[str, str] = field(default_factory=dict)


class Tunnel(ABC):
    kind: ClassVar[TunnelKind]
    #: Implementations a user may ask for (asking for none is "auto").
    implementations: ClassVar[tuple[str, ...]]
    #: The implementations "auto" may choose, in order of preference (empty: all).
    auto_order: ClassVar[tuple[str, ...]] = ()
    #: Routes through an L2 tunnel need the far end's inner address as next hop.
    layer2: ClassVar[bool] = False
    #: The ciphers the tunnel itself offers, its default first; empty if it does not
    #: encrypt.
    ciphers: ClassVar[tuple[Cipher, ...]] = ()
    #: Whether ``tunnel.protection = "ipsec"`` can wrap it (ESP around its packets). A
    #: protectable kind also names its ``encapsulation``, adds :meth:`esp_overhead` to
    #: its overhead, and in ``setup`` builds its tunnel between the underlay addresses
    #: :func:`tunnelbench.tunnels.esp.protect` returns (see Vxlan); resolving, the
    #: default MTU and the libipsec MTU check are done here.
    protectable: ClassVar[bool] = False
    #: The ceiling model's name of this kind's own encapsulation (what ESP wraps when
    #: the kind is protected); None when the model does not know it.
    encapsulation: ClassVar[model.Encapsulation | None] = None
    #: The inner IP versions it carries; traffic of another is refused before any lab.
    families: ClassVar[tuple[int, ...]] = (4, 6)
    #: The kind's name as people write it ("WireGuard", "VXLAN").
    display: ClassVar[str]
    #: The implementations whose data path runs in a userspace process; every other of
    #: :attr:`implementations` runs it in the kernel (:meth:`in_kernel`).
    userspace_implementations: ClassVar[tuple[str, ...]] = ()
    #: The kernel module that provides its kernel implementation's link type (what
    #: ``doctor`` says to load when the link cannot be created); None without one.
    kernel_module: ClassVar[str | None] = None
    #: The Debian package of each program :meth:`programs` names (what ``doctor`` says
    #: to install when it is missing); see :meth:`install_hint`.
    packages: ClassVar[Mapping[str, str]] = {}
    #: Every kind that declares itself protectable, gathered as the kinds are defined
    #: (an error message lists them; the registry is not importable from here).
    protectable_kinds: ClassVar[set[TunnelKind]] = set()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__ and cls.protectable:
            Tunnel.protectable_kinds.add(cls.kind)

    def in_kernel(self, implementation: str) -> bool:
        """Whether ``implementation``, one of this kind's, runs its data path in the
        kernel rather than in a userspace process (False for a name not of this kind)."""
        return (
            implementation in self.implementations
            and implementation not in self.userspace_implementations
        )

    @property
    def kernel_implementations(self) -> tuple[str, ...]:
        """This kind's implementations whose data path runs in the kernel."""
        return tuple(name for name in self.implementations if self.in_kernel(name))

    def link_probe(self) -> tuple[str, tuple[str, ...]] | None:
        """The kernel link type its kernel implementation creates, and the arguments a
        probe must give ``ip link add ... type`` for the refusal to be the kernel's;
        None when it creates none."""
        return None

    def debian_packages(self) -> tuple[str, ...]:
        """Debian packages whose installed version its implementations record."""
        return ()

    def kernel_offload(self, caps: Capabilities) -> str | None:
        """Why its userspace implementation's data path would run in the kernel on a
        machine with ``caps`` (OpenVPN's DCO), or None: a CPU budget on its daemon then
        throttles nothing."""
        return None

    def facts(self, spec: TunnelSpec, found: SetupFound | None = None) -> TunnelFacts:
        """What analysis and reports need to know of this kind as ``spec`` resolved it,
        stored with each trial (they do not import the tunnels); ``found``: what set-up
        reported (a handle's ``found``), for what only set-up can tell."""
        esp = spec.esp_implementation
        return TunnelFacts(
            display=self.display,
            encrypts=spec.cipher is not None,
            userspace=spec.implementation in self.userspace_implementations
            or esp == strongswan.LIBIPSEC,
            implementations=self.implementations,
            userspace_implementations=self.userspace_implementations,
            wire=self.wire(spec),
            # The kernel's ESP (xfrm) asks the crypto API for its AEAD; libipsec does
            # its own in userspace. A kind with crypto of its own overrides this.
            kernel_crypto_api=esp is not None and esp != strongswan.LIBIPSEC,
            kernel_path=self._kernel_esp(spec) if esp == strongswan.LIBIPSEC else None,
        )

    def _kernel_esp(self, spec: TunnelSpec) -> KernelPath:
        """The kernel's ESP, for ESP that strongSwan's libipsec did in userspace; chosen
        by ``tunnel.implementation`` where ESP is the kind itself (ipsec)."""
        algorithm = strongswan.KERNEL_ALGORITHMS.get(spec.cipher) if spec.cipher else None
        chooses = spec.implementation == strongswan.LIBIPSEC
        return KernelPath(
            name=f"the kernel's ESP with {spec.cipher.value}"
            if spec.cipher
            else "the kernel's ESP",
            suggestion="use the kernel's ESP instead of strongSwan's userspace libipsec",
            why="libipsec copies every packet between the kernel and userspace",
            setting="tunnel.implementation" if chooses else None,
            value=strongswan.KERNEL if chooses else None,
            capability=("esp", algorithm) if algorithm else None,
        )

    def wire(self, spec: TunnelSpec) -> Wire | None:
        """The ceiling model's view of this kind's packets; None when it has none.
        ESP around a protected kind takes its mode, cipher and NAT-T from ``spec``."""
        if self.encapsulation is None:
            return None
        if not spec.esp or spec.esp_implementation is None or spec.cipher is None:
            return Wire(self.encapsulation)
        protection, options = strongswan.esp_model(
            spec.esp_implementation, spec.cipher, spec.esp_mode
        )
        return Wire(self.encapsulation, options, protection)

    def overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        """Bytes of encapsulation added to each inner packet (outer IP header included):
        the wire model's fields for the kind's own encapsulation with its default options,
        and ESP's around it; so the lab's default MTU and the ceiling cannot disagree."""
        assert self.encapsulation is not None, f"{self.kind.value} declares no wire model"
        own = sum(size for _, size in model.fields(self.encapsulation, outer_family))
        return own + self.esp_overhead(spec, outer_family)

    def default_mtu(self, underlay_mtu: int, spec: TunnelSpec) -> int:
        if spec.esp and self.encapsulation is not None:
            return self._protected_mtu(underlay_mtu, spec, self.encapsulation)
        return underlay_mtu - self.overhead(spec, 4)

    def check(self, settings: TunnelSettings) -> None:
        """The settings checked against this kind alone, as no machine could change them
        (ESP around a kind that cannot carry it, a cipher it does not offer, an ESP mode
        without ESP): a plan refuses them before anything runs. A :class:`UserError`
        names the first; :meth:`resolve` checks them before what depends on the machine."""
        self._resolve_cipher(settings)
        self._check_protection(settings)
        if settings.esp_mode is not EspMode.TUNNEL and not self._uses_esp(settings):
            raise UserError(
                f"tunnel.esp_mode: {settings.esp_mode.value!r} applies to ipsec and to "
                f"tunnel.protection = 'ipsec' only, not to {self.kind.value}"
            )

    def resolve(
        self, settings: TunnelSettings, underlay_mtu: int, esp: str | None = None
    ) -> TunnelSpec:
        """The settings checked against this kind and "auto" resolved; a
        :class:`UserError` names the first setting this kind cannot do. ``esp``: who
        does ESP (for ipsec, or protection), decided by the caller where this machine
        is not a tunnel end (real hosts: each end's kernel); else decided here."""
        self.check(settings)
        spec = TunnelSpec(
            implementation=self.resolve_implementation(settings.implementation),
            cipher=self._resolve_cipher(settings),
            esp_mode=settings.esp_mode,
            protection=settings.protection,
        )
        if spec.protection is Protection.IPSEC:
            assert spec.cipher is not None  # protection always resolves an ESP cipher
            if esp is None:
                esp = strongswan.resolve_implementation(None, spec.cipher, spec.esp_mode)
                require_esp(esp, "tunnel.protection")
            spec = replace(spec, esp_implementation=esp)
        spec = replace(spec, mtu=settings.mtu or self.default_mtu(underlay_mtu, spec))
        self._check_esp_mtu(spec)
        self._check_packet_size(spec)
        return spec

    def _check_packet_size(self, spec: TunnelSpec) -> None:
        """An encapsulated packet must fit in one IPv4 packet (65,535 bytes, the lab's
        outer family): wireguard-go stalls at a tunnel MTU of 65476 and dies at 65535."""
        assert spec.mtu is not None
        overhead = self.overhead(spec, 4)
        if spec.mtu + overhead > IPV4_PACKET_MAX:
            raise UserError(
                f"tunnel.mtu: {spec.mtu} plus {overhead} bytes of {self.kind.value}"
                f" encapsulation exceeds the {IPV4_PACKET_MAX:,}-byte maximum of an IPv4"
                f" packet; at most {IPV4_PACKET_MAX - overhead}"
            )

    # --- ESP, for ipsec and for tunnel.protection = "ipsec" ---

    def esp_overhead(self, spec: TunnelSpec, outer_family: int = 4) -> int:
        """Bytes ESP adds around each of this tunnel's packets, padding (0-3) excluded;
        0 without ESP."""
        if spec.esp_implementation is None or spec.cipher is None:
            return 0
        kind, options = strongswan.esp_model(spec.esp_implementation, spec.cipher, spec.esp_mode)
        return sum(size for _, size in model.fields(kind, outer_family, options))

    def _protected_mtu(
        self, underlay_mtu: int, spec: TunnelSpec, carried: model.Encapsulation
    ) -> int:
        """The largest inner packet whose packet, encapsulated and then in ESP (padding
        included), fits the underlay unfragmented; libipsec caps what its TUN carries."""
        assert spec.esp_implementation is not None and spec.cipher is not None
        kind, options = strongswan.esp_model(spec.esp_implementation, spec.cipher, spec.esp_mode)
        fits = model.default_tunnel_mtu(
            carried, underlay_mtu, inner_family=4, outer_family=4, options=options, protection=kind
        )
        if spec.esp_implementation == strongswan.LIBIPSEC:
            fits = min(fits, strongswan.LIBIPSEC_MAX_MTU - self._carried_overhead(spec))
        return fits

    def _carried_overhead(self, spec: TunnelSpec) -> int:
        """This tunnel's own bytes around an inner packet, without ESP's: what ESP
        carries beyond the inner packet (0 for ipsec itself)."""
        return self.overhead(replace(spec, esp_implementation=None), 4)

    def _check_esp_mtu(self, spec: TunnelSpec) -> None:
        """libipsec reads at most 1400 bytes per packet from its TUN device."""
        if spec.esp_implementation != strongswan.LIBIPSEC:
            return
        carried = self._carried_overhead(spec)
        largest = strongswan.LIBIPSEC_MAX_MTU - carried
        if spec.mtu > largest:
            adds = f" and {self.kind.value} adds {carried}" if carried else ""
            raise UserError(
                f"tunnel.mtu: {spec.mtu} is above {largest}: {strongswan.LIBIPSEC_NAME} "
                f"reads packets of at most {strongswan.LIBIPSEC_MAX_MTU} bytes from its TUN "
                f"device{adds}"
            )

    def _uses_esp(self, settings: TunnelSettings) -> bool:
        return settings.protection is Protection.IPSEC

    def _check_protection(self, settings: TunnelSettings) -> Protection:
        if settings.protection is not Protection.NONE and not self.protectable:
            able = sorted(k.value for k in Tunnel.protectable_kinds)
            raise UserError(
                f"tunnel.protection: {self.kind.value} cannot be wrapped in "
                f"{settings.protection.value}; only {', '.join(able[:-1])} and {able[-1]} can"
            )
        return settings.protection

    def _resolve_cipher(self, settings: TunnelSettings) -> Cipher | None:
        offered = ESP_CIPHERS if settings.protection is Protection.IPSEC else self.ciphers
        if not offered:
            if settings.cipher is Cipher.AUTO:
                return None
            raise UserError(
                f"tunnel.cipher: {self.kind.value} does not encrypt, so {settings.cipher.value!r} "
                "cannot apply; leave it 'auto'"
                + (" or set tunnel.protection = 'ipsec'" if self.protectable else "")
            )
        if settings.cipher is Cipher.AUTO:
            return offered[0]
        if settings.cipher not in offered:
            allowed = ", ".join(("auto", *(c.value for c in offered)))
            raise UserError(
                f"tunnel.cipher: {self.kind.value} does not offer {settings.cipher.value!r}; "
                f"allowed: {allowed}"
            )
        return settings.cipher

    def resolve_implementation(self, requested: str | None) -> str:
        """The implementation asking for none ("auto", None) means here; a named one is
        checked, not replaced."""
        if requested is None:
            return (self.auto_order or self.implementations)[0]
        if requested not in self.implementations:
            spelt = (IMPLEMENTATION_AUTO, *self.implementations)
            raise UserError(
                f"tunnel.implementation: {shown(requested)} is not an implementation of "
                f"{self.kind.value}; allowed: {', '.join(spelt)}{did_you_mean(requested, spelt)}"
            )
        return requested

    def programs(self, implementation: str) -> list[tuple[str, str]]:
        """(program, purpose) pairs this implementation needs; checked before any set-up."""
        return []

    def end_programs(self) -> tuple[str, ...]:
        """The programs each tunnel end runs to build this kind, whichever implementation
        it takes there: what a real host must have (the rest of :meth:`programs` run
        where the run is controlled)."""
        return ("ip",)

    def end_version(
        self, implementation: str, kernel: str, first_lines: Mapping[str, str]
    ) -> str | None:
        """What ran one end on a real host, from its kernel's release and the first line
        each of its programs prints for ``--version``; None: the caller's own words."""
        return None

    def install_hint(self, program: str) -> str | None:
        """How to get ``program`` (one of :meth:`programs`' names) when it is missing:
        by default the ``apt-get install`` of its Debian package; None if unknown."""
        package = self.packages.get(program)
        return programs.apt_install(package) if package else None

    @abstractmethod
    def version(self, implementation: str) -> str:
        """The version of the implementation, recorded with every trial."""

    def setup(self, lab: Lab, spec: TunnelSpec) -> TunnelHandle:
        """Bring the tunnel up between the lab's two tunnel ends and route through it: by
        default as :meth:`build` does on any site; a kind that needs more of the lab (its
        daemons, files, ESP) overrides this instead."""
        return self.build(lab, spec)

    def build(self, site: Site, spec: TunnelSpec) -> TunnelHandle:
        """Bring the tunnel up between ``site``'s two ends through the site alone (see
        :mod:`tunnelbench.tunnels.site`): a kind that implements it runs on real hosts
        too (:attr:`anywhere`)."""
        raise NotImplementedError(f"{self.kind.value} is built in the namespace lab only")

    @property
    def anywhere(self) -> bool:
        """Whether :meth:`build` is implemented: the kind runs on every site."""
        return type(self).build is not Tunnel.build

    # --- shared steps for subclasses ---

    def carried_families(self, lab_families: tuple[int, ...], mtu: int) -> tuple[int, ...]:
        """The IP versions a tunnel of ``mtu`` carries in a lab of ``lab_families``: the
        kind's own, those the lab's links carry, and IPv6 only at 1280 or more."""
        return tuple(
            f for f in self.families if f in lab_families and (f == 4 or mtu >= IPV6_MTU_MIN)
        )

    def address_and_route(self, site: Site, role: str, device: str, mtu: int) -> None:
        """Give a tunnel device its inner addresses, bring it up and add its routes."""
        commands = [["link", "set", device, "mtu", str(mtu), "up"]]
        for family in self.carried_families(site.families, mtu):
            commands.append(
                ["address", "add", site.inner_address(role, family), "dev", device]
                + (["nodad"] if family == 6 else [])
            )
            for prefix in site.inner_routes(role, family):
                via = ["via", site.inner_peer(role, family)] if self.layer2 else []
                commands.append(["route", "add", prefix, *via, "dev", device])
        site.ip_batch(role, commands)


def require_esp(implementation: str, key: str) -> None:
    """strongSwan's programs and the plugins ``implementation`` loads, checked before
    anything is set up; a :class:`UserError` under ``key`` names what is missing."""
    for program, purpose in strongswan.PROGRAMS:
        programs.require(program, purpose)
    if missing := strongswan.missing_plugins(implementation):
        raise UserError(
            f"{key}: ESP by {implementation} needs strongSwan plugins that are not "
            f"installed: {', '.join(missing)}"
        )
