"""The theoretical ceiling of TCP goodput through a link of known rate. Pure, no I/O.

A full-sized TCP segment carries ``tcp_payload`` bytes; after the inner IP header, the
tunnel's encapsulation, IP fragmentation if the outer packet exceeds the link MTU, and
the framing bytes the link (or its shaper) counts, it costs ``counted_bytes_per_packet``.
The ceiling is ``rate * tcp_payload / counted_bytes_per_packet``: what TCP could deliver
if every packet were full-sized and the link never idle. It ignores ACKs (they travel the
other way, except in a bidirectional test), retransmissions and the TCP options other
than timestamps. docs/ceilings.md derives every figure and cites its source.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from tunnelbench.echo import shown, unknown_value
from tunnelbench.errors import UserError
from tunnelbench.kinds import Direction, Protocol
from tunnelbench.model.encapsulation import (
    DEFAULT_OPTIONS,
    ESP,
    GRE_FAMILY,
    IP_HEADER,
    KEEPS_IP_HEADER,
    PROTECTABLE,
    EncapOptions,
    Encapsulation,
    default_tunnel_mtu,
    layout,
)
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import Resolved
from tunnelbench.units import human_rate

E = TypeVar("E", bound=StrEnum)

TCP_HEADER = 20
TCP_TIMESTAMPS = 12  # option 10 bytes + 2 NOPs, on every segment when enabled (Linux default)
ETHERNET_HEADER = 14
ETHERNET_FCS = 4
ETHERNET_PREAMBLE_SFD = 8
ETHERNET_GAP = 12
ETHERNET_MIN_FRAME = 64  # header + payload + FCS
IPV4_MIN_MTU = 68  # RFC 791
IPV6_MIN_MTU = 1280  # RFC 8200
IP_MAX_PACKET = 65535  # the IPv4 total length / IPv6 payload length field
IPV6_FRAGMENT_HEADER = 8
TIMES = "\N{MULTIPLICATION SIGN}"  # in explain(), as the arithmetic is written by hand


class Framing(StrEnum):
    """Which bytes of a packet the link's rate is spent on.

    ``shaper``: what a Linux tbf/htb counts on an Ethernet or veth device with the
    default ``linklayer ethernet`` and ``overhead 0``: the skb, i.e. the L3 packet + the
    14-byte Ethernet header (no preamble, gap or FCS). For a GSO skb ``qdisc_pkt_len_init``
    adds the MAC + IP + TCP headers of every segment after the first, so each segment
    still counts L3 + 14. ``ethernet``: the wire of a real Ethernet port: + header 14,
    FCS 4, preamble/SFD 8, inter-frame gap 12 (= + 38), and at least a 64-byte frame.
    """

    SHAPER = "shaper"
    ETHERNET = "ethernet"


class CeilingInputError(UserError):
    """Impossible input to the model, naming the parameter (``key``) it is about, so
    that the CLI can name its own option instead."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key}: {detail}")
        self.key = key
        self.detail = detail


@dataclass(frozen=True)
class Ceiling:
    """The ceiling and its breakdown; sizes in bytes, per full-sized TCP segment."""

    rate_bps: int
    encapsulation: Encapsulation
    framing: Framing
    link_mtu: int
    tunnel_mtu: int | None  # None: no tunnel
    inner_family: int
    outer_family: int
    timestamps: bool
    tcp_payload: int
    inner_packet: int
    outer_packet: int
    padding: int
    fragments: int  # packets on the link per TCP segment
    fragment_sizes: tuple[int, ...]  # L3 bytes of each of them
    fragmented: bool
    counted_bytes_per_packet: int  # what the framing counts, summed over the fragments
    efficiency: float  # tcp_payload / counted_bytes_per_packet
    directions: int  # 2 for a bidirectional test: the ceiling of the summed goodput
    goodput_bps: float  # rate * efficiency * directions
    overhead_fields: tuple[tuple[str, int], ...] = field(default=())
    options: EncapOptions = field(default_factory=EncapOptions)
    protection: Encapsulation | None = None  # ESP around the encapsulation
    #: Bytes the link adds below IP in every frame (PPPoE: 8), counted by its shaper.
    link_header: int = 0

    @property
    def label(self) -> str:
        """``vxlan``, or ``vxlan in esp-tunnel`` when ESP protects it."""
        inside = f" in {self.protection.value}" if self.protection is not None else ""
        return self.encapsulation.value + inside

    def explain(self) -> str:
        """The arithmetic in two lines: sizes, then the division."""
        ip = IP_HEADER[self.inner_family]
        headers = TCP_HEADER + (TCP_TIMESTAMPS if self.timestamps else 0)
        sizes = (
            f"inner packet {self.inner_packet} B = {self.tcp_payload} payload + {ip} IPv"
            f"{self.inner_family} + {headers} TCP"
            + (" (with timestamps)" if self.timestamps else "")
        )
        added = self.outer_packet - self.inner_packet
        if added:
            sizes += f"; outer packet {self.outer_packet} B = {self.inner_packet} + {added}"
            sizes += f" {self.label}"
            sizes += f" (incl. {self.padding} padding)" if self.padding else ""
        if self.fragmented:
            parts = " + ".join(str(s) for s in self.fragment_sizes)
            sizes += f"; FRAGMENTED into {self.fragments} packets of {parts} B"
        framing = "L3 + 14" if self.framing is Framing.SHAPER else "L3 + 38, min. 64 B frame"
        if self.link_header:
            framing = framing.replace("L3", f"L3 + {self.link_header} PPPoE", 1)
        sizes += f"; counted {self.counted_bytes_per_packet} B ({self.framing.value}: {framing})"
        both = f" {TIMES} 2 directions" if self.directions == 2 else ""
        rate = human_rate(self.rate_bps)
        arithmetic = (
            f"{self.tcp_payload} B payload / {self.counted_bytes_per_packet} B counted per "
            f"packet {TIMES} {rate}{both} = {self.goodput_bps / 1e6:.1f} Mbit/s"
        )
        return f"{sizes}\n{arithmetic}"


def ceiling(
    rate_bps: int,
    *,
    link_mtu: int,
    encapsulation: Encapsulation | str,
    tunnel_mtu: int | None = None,
    inner_mtu: int | None = None,
    inner_family: int = 4,
    outer_family: int = 4,
    framing: Framing | str = Framing.SHAPER,
    timestamps: bool = True,
    options: EncapOptions = DEFAULT_OPTIONS,
    directions: int = 1,
    protection: Encapsulation | str | None = None,
    link_header: int = 0,
) -> Ceiling:
    """The ceiling of TCP goodput at ``rate_bps`` through a link of ``link_mtu``.

    ``tunnel_mtu`` None is the tunnel's default (:func:`default_tunnel_mtu`; WireGuard
    link - 80 as wg-quick, others the largest that fits unfragmented). ``inner_mtu`` is
    the MTU that sets the TCP segment size (the smallest on the path; default the tunnel
    MTU, or the link MTU without a tunnel); it may be below the tunnel MTU, which then
    only caps WireGuard's padding. ``directions`` 2 models a bidirectional test: the
    link is shaped both ways, so the summed goodput's ceiling is twice the one-way one
    (ACKs sharing the link then cost up to ~2%, which the model ignores).
    ``protection`` (esp-tunnel or esp-transport) puts each encapsulated packet in ESP, as
    ``tunnel.protection = "ipsec"`` does around VXLAN or GRE; both layers use
    ``outer_family``. ``encapsulation``, ``framing`` and ``protection`` also accept their
    names (``"wireguard"``, ``"ethernet"``). ``link_header``: bytes the link itself adds
    below IP in every frame (a PPPoE session: 8), with ``link_mtu`` the IP MTU above them.
    Impossible input raises :class:`CeilingInputError`.
    """
    encapsulation, framing, protection = _members(encapsulation, framing, protection)
    _check(
        rate_bps, link_mtu, encapsulation, inner_family, outer_family, options, directions,
        protection,
    )  # fmt: skip
    device_mtu = _device_mtu(
        encapsulation, link_mtu, tunnel_mtu, inner_family, outer_family, options, protection
    )
    inner = _inner_mtu(inner_mtu, device_mtu, inner_family)
    payload = inner - IP_HEADER[inner_family] - TCP_HEADER - (TCP_TIMESTAMPS if timestamps else 0)
    packed = layout(
        encapsulation,
        inner,
        inner_family=inner_family,
        outer_family=outer_family,
        tunnel_mtu=device_mtu,
        options=options,
        protection=protection,
    )
    _check_outer_packet(packed.outer_packet, device_mtu)
    sizes = fragment_sizes(packed.outer_packet, link_mtu, outer_family)
    counted = sum(counted_bytes(size + link_header, framing) for size in sizes)
    efficiency = payload / counted
    return Ceiling(
        rate_bps=rate_bps,
        encapsulation=encapsulation,
        framing=framing,
        link_mtu=link_mtu,
        tunnel_mtu=None if encapsulation is Encapsulation.NONE else device_mtu,
        inner_family=inner_family,
        outer_family=outer_family,
        timestamps=timestamps,
        tcp_payload=payload,
        inner_packet=inner,
        outer_packet=packed.outer_packet,
        padding=packed.padding,
        fragments=len(sizes),
        fragment_sizes=sizes,
        fragmented=len(sizes) > 1,
        counted_bytes_per_packet=counted,
        efficiency=efficiency,
        directions=directions,
        goodput_bps=rate_bps * efficiency * directions,
        overhead_fields=packed.fields,
        options=options,
        protection=protection,
        link_header=link_header,
    )


def _device_mtu(
    encapsulation: Encapsulation,
    link_mtu: int,
    tunnel_mtu: int | None,
    inner_family: int,
    outer_family: int,
    options: EncapOptions,
    protection: Encapsulation | None,
) -> int:
    """The MTU of the device the traffic enters: the link's without a tunnel, else the
    tunnel's as given or its default; impossible ones raise :class:`CeilingInputError`."""
    if encapsulation is Encapsulation.NONE:
        if tunnel_mtu is not None:
            raise CeilingInputError(
                "tunnel_mtu", f"{tunnel_mtu}: none has no tunnel; its packets follow the link MTU"
            )
        return link_mtu
    if tunnel_mtu is not None:
        _check_inner_mtu("tunnel_mtu", tunnel_mtu, inner_family)
        return tunnel_mtu
    device_mtu = default_tunnel_mtu(
        encapsulation,
        link_mtu,
        inner_family=inner_family,
        outer_family=outer_family,
        options=options,
        protection=protection,
    )
    if device_mtu < _min_mtu(inner_family):
        raise CeilingInputError(
            "link_mtu",
            f"{link_mtu} leaves a {encapsulation.value} tunnel MTU of {device_mtu}, below "
            f"IPv{inner_family}'s minimum of {_min_mtu(inner_family)}",
        )
    return device_mtu


def _members(
    encapsulation: Encapsulation | str,
    framing: Framing | str,
    protection: Encapsulation | str | None,
) -> tuple[Encapsulation, Framing, Encapsulation | None]:
    """The arguments given by name as members, ``protection`` checked against what it
    protects (None: none)."""
    encapsulated = _member("encapsulation", encapsulation, Encapsulation)
    framed = _member("framing", framing, Framing)
    if protection is None:
        return encapsulated, framed, None
    protected = _member("protection", protection, Encapsulation)
    _check_protection(encapsulated, protected)
    return encapsulated, framed, protected


def _check_outer_packet(outer_packet: int, device_mtu: int) -> None:
    if outer_packet > IP_MAX_PACKET:
        raise CeilingInputError(
            "tunnel_mtu",
            f"{device_mtu}: the encapsulated packet would be {outer_packet} bytes, "
            f"above IP's limit of {IP_MAX_PACKET}",
        )


def _inner_mtu(inner_mtu: int | None, device_mtu: int, inner_family: int) -> int:
    """The MTU that sets the TCP segment: ``inner_mtu`` where given (at most the
    device's), else the device's."""
    if inner_mtu is None:
        return device_mtu
    _check_inner_mtu("inner_mtu", inner_mtu, inner_family)
    if inner_mtu > device_mtu:
        raise CeilingInputError(
            "inner_mtu", f"{inner_mtu} exceeds the tunnel/link MTU {device_mtu}"
        )
    return inner_mtu


def counted_bytes(l3_packet: int, framing: Framing) -> int:
    """The bytes ``framing`` counts for one L3 packet on the link."""
    if framing is Framing.SHAPER:
        return l3_packet + ETHERNET_HEADER
    frame = max(l3_packet + ETHERNET_HEADER + ETHERNET_FCS, ETHERNET_MIN_FRAME)
    return frame + ETHERNET_PREAMBLE_SFD + ETHERNET_GAP


def fragment_sizes(packet: int, link_mtu: int, family: int) -> tuple[int, ...]:
    """The L3 sizes of the packets an IP packet of ``packet`` bytes becomes on the link.

    Every fragment but the last carries the most data that fits, a multiple of 8 bytes;
    each repeats the IPv4 header (20), or the IPv6 header (40) plus a Fragment header (8).
    This is what ``ip_do_fragment``/``ip6_fragment`` produce.
    """
    if packet <= link_mtu:
        return (packet,)
    header = IP_HEADER[family] + (IPV6_FRAGMENT_HEADER if family == 6 else 0)
    room = (link_mtu - header) // 8 * 8
    data = packet - IP_HEADER[family]
    sizes = []
    while data > room:
        sizes.append(header + room)
        data -= room
    sizes.append(header + data)
    return tuple(sizes)


def _member(key: str, value: str, enum: type[E]) -> E:
    try:
        return enum(value)
    except ValueError:
        allowed = [member.value for member in enum]
        raise CeilingInputError(key, unknown_value(value, allowed)) from None


def _check(
    rate_bps: int,
    link_mtu: int,
    encapsulation: Encapsulation,
    inner_family: int,
    outer_family: int,
    options: EncapOptions,
    directions: int,
    protection: Encapsulation | None = None,
) -> None:
    if rate_bps <= 0:
        raise CeilingInputError("rate_bps", f"{rate_bps} is not a positive rate")
    for key, family in (("inner_family", inner_family), ("outer_family", outer_family)):
        if family not in IP_HEADER:
            raise CeilingInputError(key, f"{shown(family)} is not an IP version; allowed: 4, 6")
    if encapsulation in KEEPS_IP_HEADER and outer_family != inner_family:
        raise CeilingInputError(
            "outer_family",
            f"{outer_family}: {encapsulation.value} keeps the inner packet's IP header, so the "
            f"outer family must be the inner one ({inner_family})",
        )
    low = _min_mtu(outer_family)
    if not low <= link_mtu <= IP_MAX_PACKET:
        raise CeilingInputError(
            "link_mtu", f"{link_mtu} is out of range; allowed {low}..{IP_MAX_PACKET}"
        )
    if directions not in (1, 2):
        raise CeilingInputError("directions", f"{directions} is not 1 or 2")
    _check_options(encapsulation, options, outer_family, protection)


def _check_protection(encapsulation: Encapsulation, protection: Encapsulation) -> None:
    if protection not in ESP:
        raise CeilingInputError(
            "protection", f"{protection.value} cannot protect; allowed: esp-tunnel, esp-transport"
        )
    if encapsulation not in PROTECTABLE:
        allowed = ", ".join(e.value for e in PROTECTABLE)
        raise CeilingInputError(
            "protection", f"{encapsulation.value} cannot be put in ESP; only {allowed} can"
        )


def _check_options(
    encapsulation: Encapsulation,
    options: EncapOptions,
    outer_family: int,
    protection: Encapsulation | None = None,
) -> None:
    """An option given to a kind it does not apply to is a mistake worth naming."""
    default = EncapOptions()
    esp = "esp-tunnel and esp-transport"
    gre = "gre and gretap"
    in_esp = encapsulation in ESP or protection in ESP
    applies = {
        "cipher": (in_esp, esp),
        "nat_t": (in_esp, esp),
        "gre_key": (encapsulation in GRE_FAMILY, gre),
        "gre_csum": (encapsulation in GRE_FAMILY, gre),
        "gre_seq": (encapsulation in GRE_FAMILY, gre),
        "geneve_options": (encapsulation is Encapsulation.GENEVE, "geneve"),
        "encap_limit": (
            outer_family == 6 and encapsulation in (Encapsulation.IPIP, *GRE_FAMILY),
            "ipip, gre and gretap over IPv6",
        ),
    }
    for name, (ok, where) in applies.items():
        if not ok and getattr(options, name) != getattr(default, name):
            here = f"{encapsulation.value} over IPv{outer_family}"
            raise CeilingInputError(name, f"applies to {where} only, not to {here}")
    geneve = options.geneve_options
    if geneve % 4 or not 0 <= geneve <= 252:
        raise CeilingInputError(
            "geneve_options", f"{geneve} is not a multiple of 4 between 0 and 252"
        )


def _check_inner_mtu(key: str, value: int, inner_family: int) -> None:
    """An MTU that sets the TCP segment size must carry one; IPv6 needs 1280."""
    low = _min_mtu(inner_family)
    if not low <= value <= IP_MAX_PACKET:
        raise CeilingInputError(
            key, f"{value} is out of range for IPv{inner_family}; allowed {low}..{IP_MAX_PACKET}"
        )


def _min_mtu(family: int) -> int:
    return IPV6_MIN_MTU if family == 6 else IPV4_MIN_MTU


def for_config(config: TrialConfig, resolved: Resolved) -> Ceiling | None:
    """The ceiling of a tunnelbench trial, or None when the model does not apply.

    None unless the WAN link is shaped (``lab.wan.rate``; only that link is, by tbf or
    htb, hence the ``shaper`` framing), for UDP, and for tunnel kinds whose wire model the
    trial did not record. The TCP segment size follows the smallest MTU on the path: the
    tunnel's (``resolved.setup.mtu``) and the LAN's, or the WAN's and the LAN's without a
    tunnel (the road-warrior client sits on the WAN link, the server on the LAN).
    For ``bidir`` the shaper carries both directions at the full rate each, so the
    result is the ceiling of the *summed* goodput: twice the one-way ceiling. The wire
    model (ESP's cipher and NAT-T included) is what the tunnel kind declared for the
    trial (:class:`tunnelbench.model.kindfacts.Wire`).
    """
    wan = config.lab.wan
    wire = resolved.tunnel.wire if resolved.tunnel is not None else None
    if wan.rate is None or wire is None or config.traffic.protocol is not Protocol.TCP:
        return None
    family = config.traffic.family
    directions = 2 if config.traffic.direction is Direction.BIDIR else 1
    link_header = wan.mtu - wan.ip_mtu  # PPPoE's, counted by the shaper on the veth
    if wire.encapsulation is Encapsulation.NONE:
        return ceiling(
            wan.rate,
            link_mtu=wan.ip_mtu,
            encapsulation=wire.encapsulation,
            inner_mtu=min(wan.ip_mtu, config.lab.lan_mtu),
            inner_family=family,
            outer_family=family,
            directions=directions,
            link_header=link_header,
        )
    assert resolved.setup.mtu is not None  # every tunnel records its device's MTU
    tunnel_mtu = resolved.setup.mtu
    return ceiling(
        wan.rate,
        link_mtu=wan.ip_mtu,
        encapsulation=wire.encapsulation,
        tunnel_mtu=tunnel_mtu,
        inner_mtu=min(tunnel_mtu, config.lab.lan_mtu),
        inner_family=family,
        outer_family=wire.outer_family,
        directions=directions,
        options=wire.options,
        protection=wire.protection,
        link_header=link_header,
    )
