"""The enumerations shared by the plan schema, the parsers and the registries."""

from enum import StrEnum


class TunnelKind(StrEnum):
    NONE = "none"
    WIREGUARD = "wireguard"
    VXLAN = "vxlan"
    GRE = "gre"
    GRETAP = "gretap"
    IPIP = "ipip"
    SIT = "sit"
    GENEVE = "geneve"
    OPENVPN = "openvpn"
    IPSEC = "ipsec"


class Cipher(StrEnum):
    """The AEAD protecting tunnel traffic, by one name across tunnel kinds.

    ``auto`` is each kind's own default; each kind maps the others to its own spelling
    (ESP's ``aes256gcm16``, OpenVPN's ``AES-256-GCM``).
    """

    AUTO = "auto"
    AES_256_GCM = "aes-256-gcm"
    CHACHA20_POLY1305 = "chacha20-poly1305"


class EspMode(StrEnum):
    """IPsec's encapsulation: a new outer IP header, or ESP behind the original one."""

    TUNNEL = "tunnel"
    TRANSPORT = "transport"


class Protection(StrEnum):
    """Encryption wrapped around an unencrypted tunnel (VXLAN or GRE inside ESP)."""

    NONE = "none"
    IPSEC = "ipsec"


class TunnelMode(StrEnum):
    """How a hosts file's tunnel comes to be: the user's, already up; built by
    tunnelbench between two hosts (and removed after); or none at all."""

    EXISTING = "existing"
    BUILD = "build"
    NONE = "none"


class Topology(StrEnum):
    ROAD_WARRIOR = "road-warrior"
    SITE_TO_SITE = "site-to-site"


class Placement(StrEnum):
    """Where a lab's processes and receive work run.

    ``free``: wherever the scheduler puts them. ``pinned``: each role's processes on the
    cores of a fixed layout (:mod:`tunnelbench.lab.placement`), its links' receive
    processing steered there.
    """

    FREE = "free"
    PINNED = "pinned"


class Direction(StrEnum):
    UPLOAD = "upload"
    DOWNLOAD = "download"
    BIDIR = "bidir"


class StreamMode(StrEnum):
    """How several streams are generated.

    ``single``: one iperf3 process with ``-P N``. ``processes``: one client/server pair
    per stream on its own port, so a single-threaded iperf3 is not the bottleneck.
    ``auto``: ``processes`` when the installed iperf3 is single-threaded and N > 1.
    """

    AUTO = "auto"
    SINGLE = "single"
    PROCESSES = "processes"


class Shaper(StrEnum):
    TBF = "tbf"
    HTB = "htb"


class WanEncapsulation(StrEnum):
    """What the WAN link carries IP in: plain Ethernet, or a PPPoE session (RFC 2516)
    between the router and its WAN peer, as a DSL or fibre line's ISP runs it."""

    NONE = "none"
    PPPOE = "pppoe"


class Queue(StrEnum):
    """The queue discipline holding packets at the WAN link's egress.

    Under a shaper it is the shaper's leaf; without one it replaces the device's root
    qdisc (a veth has none by default).
    """

    PFIFO = "pfifo"
    #: A drop-tail FIFO limited in bytes (``lab.wan.queue_bytes``, or ``queue_limit`` full
    #: frames' worth): it holds the same bytes whether it is handed wire packets or
    #: GSO/GRO aggregates, which a packet-limited FIFO does not.
    BFIFO = "bfifo"
    PFIFO_FAST = "pfifo_fast"
    FQ_CODEL = "fq_codel"
    CAKE = "cake"
    FQ = "fq"


class Generator(StrEnum):
    IPERF3 = "iperf3"
    IPERF2 = "iperf2"


class Protocol(StrEnum):
    TCP = "tcp"
    UDP = "udp"


class Order(StrEnum):
    """Run order of a plan's trials within each repetition round."""

    INTERLEAVED = "interleaved"
    SHUFFLED = "shuffled"


def choices(enum: type[StrEnum]) -> str:
    """The allowed values of an enumeration, for error messages."""
    return ", ".join(member.value for member in enum)
