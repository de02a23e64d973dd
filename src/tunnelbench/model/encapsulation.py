"""The bytes each tunnel encapsulation adds to one inner packet: the ceiling model's table.

Pure arithmetic, no I/O. Every figure is taken from the implementation or the RFC that
defines it (docs/ceilings.md lists the sources field by field). The inner packet is an IP
packet of the inner family; the result is the outer IP packet as it leaves the tunnel
endpoint, before any IP fragmentation (that, and what a link counts, is
:mod:`tunnelbench.analysis.ceiling`'s business).
"""

from dataclasses import dataclass
from enum import StrEnum

IP_HEADER = {4: 20, 6: 40}
UDP_HEADER = 8
ETHERNET_HEADER = 14  # the inner frame of an L2 tunnel carries no FCS and no preamble
# Linux's ip6tnl/ip6gre add a Tunnel Encapsulation Limit destination option (RFC 2473
# section 5.1; 8 bytes with its padding) unless the tunnel is made with `encaplimit none`.
IPV6_ENCAP_LIMIT = 8

WIREGUARD_HEADER = 16  # type 4 + receiver index 4 + counter 8
WIREGUARD_TAG = 16  # Poly1305
WIREGUARD_PADDING = 16  # plaintext padded to a multiple of 16 (capped at the tunnel MTU)
#: wg-quick's default: room for an IPv6 outer header, so a 1500-byte link gives 1420.
WIREGUARD_DEFAULT_OVERHEAD = 80

VXLAN_HEADER = 8
GENEVE_HEADER = 8
GENEVE_OPTIONS_MAX = 252  # the header's option length is 6 bits counting 4-byte words
GRE_HEADER = 4
GRE_OPTION = 4  # each of key, checksum (+ reserved1), sequence number

ESP_HEADER = 8  # SPI 4 + sequence number 4
ESP_IV = 8  # RFC 4106 (AES-GCM) and RFC 7634 (ChaCha20-Poly1305): 8-byte explicit IV
ESP_ICV = 16  # both AEADs' full-length tag
ESP_TRAILER = 2  # pad length 1 + next header 1
ESP_ALIGN = 4  # both ciphers have block size 1; RFC 4303 and Linux align to 4 bytes

OPENVPN_OPCODE = 4  # opcode/key id 1 + peer id 3 (P_DATA_V2)
OPENVPN_PACKET_ID = 4  # the AEAD nonce's on-wire part
OPENVPN_TAG = 16


class Encapsulation(StrEnum):
    """The encapsulations the model knows, in the order docs/ceilings.md lists them."""

    NONE = "none"
    IPIP = "ipip"
    GRE = "gre"
    GRETAP = "gretap"
    VXLAN = "vxlan"
    GENEVE = "geneve"
    WIREGUARD = "wireguard"
    OPENVPN = "openvpn"
    ESP_TUNNEL = "esp-tunnel"
    ESP_TRANSPORT = "esp-transport"


class Cipher(StrEnum):
    """ESP's AEAD ciphers. Both have an 8-byte IV, a 16-byte tag and block size 1, so
    their overhead is the same; the choice is recorded so the result says what it
    assumed."""

    AES_GCM = "aes-gcm"
    CHACHA20_POLY1305 = "chacha20-poly1305"


ESP = (Encapsulation.ESP_TUNNEL, Encapsulation.ESP_TRANSPORT)
#: ESP's fields that follow the payload: in a stack they close it, after the carried
#: packet.
ESP_TRAILERS = ("ESP trailer", "ICV")
#: Encapsulations ESP can wrap (``protection``): unencrypted tunnels with their own
#: outer IP header.
PROTECTABLE = (
    Encapsulation.IPIP,
    Encapsulation.GRE,
    Encapsulation.GRETAP,
    Encapsulation.VXLAN,
    Encapsulation.GENEVE,
)
GRE_FAMILY = (Encapsulation.GRE, Encapsulation.GRETAP)
#: Encapsulations that keep the inner packet's own IP header instead of adding one.
KEEPS_IP_HEADER = (Encapsulation.NONE, Encapsulation.ESP_TRANSPORT)


@dataclass(frozen=True)
class EncapOptions:
    """Settings that change an encapsulation's size. Each applies to some kinds only;
    :func:`tunnelbench.analysis.ceiling.ceiling` rejects one given to another kind."""

    cipher: Cipher = Cipher.AES_GCM  # esp-*
    nat_t: bool = False  # esp-*: UDP encapsulation (RFC 3948) adds 8 bytes
    gre_key: bool = False  # gre, gretap
    gre_csum: bool = False  # gre, gretap
    gre_seq: bool = False  # gre, gretap
    geneve_options: int = 0  # geneve: option bytes, a multiple of 4 up to 252
    # ipip, gre, gretap over IPv6: Linux's default; False models `encaplimit none`.
    encap_limit: bool = True


DEFAULT_OPTIONS = EncapOptions()


@dataclass(frozen=True)
class Layout:
    """One inner packet encapsulated: what is added around it, in wire order.

    ``fields`` are the fixed headers and trailers (the inner packet and the padding are
    not among them); ``padding`` depends on the inner packet's length.
    """

    inner_packet: int
    fields: tuple[tuple[str, int], ...]
    padding: int

    @property
    def overhead(self) -> int:
        return sum(size for _, size in self.fields) + self.padding

    @property
    def outer_packet(self) -> int:
        return self.inner_packet + self.overhead


def fields(
    encapsulation: Encapsulation, outer_family: int, options: EncapOptions = DEFAULT_OPTIONS
) -> tuple[tuple[str, int], ...]:
    """The fixed bytes an encapsulation adds, in wire order (padding excluded)."""
    ip = (f"outer IPv{outer_family}", IP_HEADER[outer_family])
    udp = ("UDP", UDP_HEADER)
    limit = (
        (("IPv6 encapsulation limit option", IPV6_ENCAP_LIMIT),)
        if outer_family == 6 and options.encap_limit
        else ()
    )
    match encapsulation:
        case Encapsulation.NONE:
            return ()
        case Encapsulation.IPIP:
            return (ip, *limit)
        case Encapsulation.GRE | Encapsulation.GRETAP:
            gre = [("GRE", GRE_HEADER)]
            gre += [("GRE checksum", GRE_OPTION)] if options.gre_csum else []
            gre += [("GRE key", GRE_OPTION)] if options.gre_key else []
            gre += [("GRE sequence", GRE_OPTION)] if options.gre_seq else []
            inner_frame = (
                [("inner Ethernet", ETHERNET_HEADER)]
                if encapsulation is Encapsulation.GRETAP
                else []
            )
            return (ip, *limit, *gre, *inner_frame)
        case Encapsulation.VXLAN:
            return (ip, udp, ("VXLAN", VXLAN_HEADER), ("inner Ethernet", ETHERNET_HEADER))
        case Encapsulation.GENEVE:
            geneve = (("Geneve", GENEVE_HEADER),)
            extra = (("Geneve options", options.geneve_options),) if options.geneve_options else ()
            return (ip, udp, *geneve, *extra, ("inner Ethernet", ETHERNET_HEADER))
        case Encapsulation.WIREGUARD:
            return (
                ip,
                udp,
                ("WireGuard header", WIREGUARD_HEADER),
                ("Poly1305 tag", WIREGUARD_TAG),
            )
        case Encapsulation.OPENVPN:
            return (
                ip,
                udp,
                ("OpenVPN opcode + peer id", OPENVPN_OPCODE),
                ("OpenVPN packet id", OPENVPN_PACKET_ID),
                ("AEAD tag", OPENVPN_TAG),
            )
        case Encapsulation.ESP_TUNNEL | Encapsulation.ESP_TRANSPORT:
            outer = (ip,) if encapsulation is Encapsulation.ESP_TUNNEL else ()
            nat_t = (udp,) if options.nat_t else ()
            return (
                *outer,
                *nat_t,
                ("ESP header", ESP_HEADER),
                ("IV", ESP_IV),
                ("ESP trailer", ESP_TRAILER),
                ("ICV", ESP_ICV),
            )
    raise AssertionError(encapsulation)  # pragma: no cover - every member is matched


def padding(
    encapsulation: Encapsulation, inner_packet: int, *, inner_family: int, tunnel_mtu: int
) -> int:
    """Bytes of padding added to one inner packet of ``inner_packet`` bytes.

    WireGuard pads the plaintext to a multiple of 16 but never beyond the tunnel MTU
    (``calculate_skb_padding`` in the kernel's send.c, ``calculatePaddingSize`` in
    wireguard-go). ESP pads the encrypted payload so that payload + 2 trailer bytes is a
    multiple of 4; in transport mode the payload is the L4 segment only.
    """
    if encapsulation is Encapsulation.WIREGUARD:
        padded = min(_round_up(inner_packet, WIREGUARD_PADDING), tunnel_mtu)
        return max(padded - inner_packet, 0)
    if encapsulation in ESP:
        payload = inner_packet
        if encapsulation is Encapsulation.ESP_TRANSPORT:
            payload -= IP_HEADER[inner_family]
        return _round_up(payload + ESP_TRAILER, ESP_ALIGN) - (payload + ESP_TRAILER)
    return 0


def layout(
    encapsulation: Encapsulation,
    inner_packet: int,
    *,
    inner_family: int,
    outer_family: int,
    tunnel_mtu: int,
    options: EncapOptions = DEFAULT_OPTIONS,
    protection: Encapsulation | None = None,
) -> Layout:
    """One inner packet of ``inner_packet`` bytes encapsulated; with ``protection``
    (esp-tunnel or esp-transport), that packet then in ESP (see :func:`protect`)."""
    pad = padding(encapsulation, inner_packet, inner_family=inner_family, tunnel_mtu=tunnel_mtu)
    carried = Layout(inner_packet, fields(encapsulation, outer_family, options), pad)
    if protection is None:
        return carried
    return protect(carried, protection, outer_family=outer_family, options=options)


def protect(
    carried: Layout,
    protection: Encapsulation,
    *,
    outer_family: int,
    options: EncapOptions = DEFAULT_OPTIONS,
) -> Layout:
    """ESP around an encapsulated packet (VXLAN or GRE inside IPsec), in wire order.

    Tunnel mode puts the whole packet (its outer IP header included) inside ESP behind
    a new outer header: [ESP's IP][UDP if NAT-T][ESP][IV] [carried packet] [trailer][ICV].
    Transport mode keeps the carried packet's outer IP header in front and encrypts what
    follows it: [carried IP][UDP if NAT-T][ESP][IV] [rest of the carried packet] [trailer]
    [ICV]. ESP pads what it encrypts to a multiple of 4 (:func:`padding`), counted with
    the carried encapsulation's own padding.
    """
    if protection not in ESP:
        raise ValueError(f"{protection.value} is not ESP")
    esp = fields(protection, outer_family, options)
    head = [f for f in esp if f[0] not in ESP_TRAILERS]
    tail = [f for f in esp if f[0] in ESP_TRAILERS]
    inner = list(carried.fields)
    if protection is Encapsulation.ESP_TUNNEL:
        head = [(f"ESP tunnel IPv{outer_family}", IP_HEADER[outer_family]), *head[1:]]
    elif inner and inner[0][0].startswith("outer IPv"):
        head = [inner.pop(0), *head]  # the carried packet's own outer header stays first
    esp_pad = padding(
        protection, carried.outer_packet, inner_family=outer_family, tunnel_mtu=carried.outer_packet
    )
    return Layout(carried.inner_packet, (*head, *inner, *tail), carried.padding + esp_pad)


def default_tunnel_mtu(
    encapsulation: Encapsulation,
    link_mtu: int,
    *,
    inner_family: int,
    outer_family: int,
    options: EncapOptions = DEFAULT_OPTIONS,
    protection: Encapsulation | None = None,
) -> int:
    """The tunnel MTU a user gets without choosing one (``protection``: inside ESP).

    WireGuard: link MTU - 80, as wg-quick and tunnelbench's lab set it (room for an IPv6
    outer header even over IPv4). Every other kind: the largest inner packet whose outer
    packet fits the link unfragmented, as Linux computes it for a tunnel device
    (``dev->mtu = ETH_DATA_LEN - t_hlen``) or for ESP (``esp4_get_mtu``). ``none``: the
    link MTU.
    """
    if encapsulation is Encapsulation.WIREGUARD:
        return link_mtu - WIREGUARD_DEFAULT_OVERHEAD

    def packed(size: int) -> Layout:
        return layout(
            encapsulation,
            size,
            inner_family=inner_family,
            outer_family=outer_family,
            tunnel_mtu=size,
            options=options,
            protection=protection,
        )

    size = link_mtu - packed(link_mtu).overhead + packed(link_mtu).padding
    # Padding is at most 3 bytes (ESP): step down until the padded packet fits.
    while size > 0 and packed(size).outer_packet > link_mtu:
        size -= 1
    return size


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
