"""Ethernet frames as RFC 2544 counts them, and the packet rates a link can carry.

RFC 2544 names a frame by its size on the wire from the destination MAC address to the
FCS: a 64-byte frame is 14 bytes of Ethernet header, 46 of IP packet and 4 of FCS. On
the wire each frame also costs 8 bytes of preamble and start delimiter and 12 of
inter-frame gap, so a 1 Gbit/s port carries at most 1e9 / (84 x 8) = 1,488,095 frames of
64 bytes a second. A Linux shaper (tbf, htb) counts neither: it charges each packet its
length as the kernel holds it, the frame without its FCS (60 bytes for a 64-byte frame),
so a link shaped to a rate carries rate / (60 x 8) of them. Each rate search names which
of the two ceilings it is held to.
"""

from tunnelbench.errors import UserError
from tunnelbench.model.encapsulation import ETHERNET_HEADER, IP_HEADER, UDP_HEADER

#: The frame check sequence: counted in a frame's size, never written by a sender.
FCS = 4
#: Preamble and start-of-frame delimiter (8) plus the inter-frame gap (12).
WIRE_OVERHEAD = 20
#: RFC 2544's frame sizes for Ethernet (section 9.1).
RFC2544_SIZES = (64, 128, 256, 512, 1024, 1280, 1518)
#: The smallest and largest frames a rate search sends: the Ethernet minimum, and a
#: 9000-byte jumbo packet's frame.
FRAME_MIN = 64
FRAME_MAX = 9000 + ETHERNET_HEADER + FCS


def udp_payload(frame: int, family: int) -> int:
    """Bytes of UDP payload in an untagged ``frame``-byte frame of an IPv``family``
    packet; a frame too small to hold the headers is refused."""
    check_frame(frame)
    payload = frame - FCS - ETHERNET_HEADER - IP_HEADER[family] - UDP_HEADER
    if payload < 0:
        least = frame - payload
        raise UserError(
            f"frame size {frame}: an IPv{family} UDP packet needs a frame of at least"
            f" {least} bytes (Ethernet 14 + IP {IP_HEADER[family]} + UDP 8 + FCS 4)"
        )
    return payload


def check_frame(frame: int) -> None:
    if not FRAME_MIN <= frame <= FRAME_MAX:
        raise UserError(
            f"frame size {frame}: must be {FRAME_MIN}-{FRAME_MAX} bytes (from the"
            " destination MAC address to the FCS)"
        )


def written_bytes(frame: int) -> int:
    """What a sender writes to its device per frame, and a shaper charges for it: the
    frame without its FCS (the device adds it)."""
    return frame - FCS


def wire_pps(rate_bps: float, frame: int) -> float:
    """Frames a second an Ethernet port of ``rate_bps`` carries at most."""
    return rate_bps / ((frame + WIRE_OVERHEAD) * 8)


def shaped_pps(rate_bps: float, frame: int) -> float:
    """Frames a second a Linux shaper set to ``rate_bps`` lets through at most."""
    return rate_bps / (written_bytes(frame) * 8)
