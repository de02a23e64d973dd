"""The ceiling model against figures computed by hand (arithmetic in the comments).

Sizes are bytes per full-sized TCP segment. "shaper" counts L3 + 14; "ethernet" counts
L3 + 38 (14 header + 4 FCS + 8 preamble/SFD + 12 gap) with frames of at least 64 bytes.
Payload = inner MTU - inner IP header (20 / 40) - TCP 20 - timestamps 12.
"""

import statistics

import pytest

from tests.report_fixtures import recorded, resolved_for
from tunnelbench.analysis.ceiling import (
    CeilingInputError,
    Framing,
    ceiling,
    counted_bytes,
    for_config,
    fragment_sizes,
)
from tunnelbench.kinds import Direction, EspMode, Protection, Protocol, TunnelKind
from tunnelbench.model.encapsulation import (
    Cipher,
    EncapOptions,
    Encapsulation,
    default_tunnel_mtu,
    padding,
)
from tunnelbench.model.plan import (
    LabSettings,
    LinkSettings,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
)

E = Encapsulation
G = 10**9


def mbit(result) -> float:
    return round(result.goodput_bps / 1e6, 1)


# --- the sanity figures -----------------------------------------------------------------


def test_plain_gigabit_ethernet_on_the_wire():
    # 1500 - 20 - 20 - 12 = 1448 payload; 1500 + 38 = 1538 on the wire
    # 1448 / 1538 * 1e9 = 941.48 Mbit/s
    result = ceiling(G, link_mtu=1500, encapsulation=E.NONE, framing=Framing.ETHERNET)
    assert (result.tcp_payload, result.counted_bytes_per_packet) == (1448, 1538)
    assert result.goodput_bps == pytest.approx(1448 / 1538 * 1e9)
    assert mbit(result) == 941.5
    assert result.efficiency == pytest.approx(1448 / 1538)
    assert result.tunnel_mtu is None
    assert not result.fragmented


def test_plain_gigabit_under_a_shaper():
    # tbf/htb count 1500 + 14 = 1514: 1448 / 1514 * 1e9 = 956.41 Mbit/s (measured here
    # with a 1 Gbit tbf and no tunnel: 956-957 Mbit/s)
    result = ceiling(G, link_mtu=1500, encapsulation=E.NONE)
    assert result.framing is Framing.SHAPER
    assert (result.inner_packet, result.outer_packet, result.counted_bytes_per_packet) == (
        1500,
        1500,
        1514,
    )
    assert mbit(result) == 956.4


def test_wireguard_1420_on_a_1500_link_under_a_shaper():
    # payload 1420 - 52 = 1368; outer 1420 + 20 + 8 + 16 + 16 = 1480; counted 1494
    # 1368 / 1494 * 1e9 = 915.66 Mbit/s (measured here: about 916)
    result = ceiling(G, link_mtu=1500, encapsulation=E.WIREGUARD, tunnel_mtu=1420)
    assert (result.tcp_payload, result.outer_packet, result.padding) == (1368, 1480, 0)
    assert result.counted_bytes_per_packet == 1494
    assert mbit(result) == 915.7
    assert result.explain().splitlines()[-1] == (
        "1368 B payload / 1494 B counted per packet \N{MULTIPLICATION SIGN} 1 Gbit/s = 915.7 Mbit/s"
    )


def test_wireguard_default_mtu_is_wg_quicks():
    # wg-quick and the lab: link - 80, so 1500 gives 1420 even over IPv4
    assert ceiling(G, link_mtu=1500, encapsulation=E.WIREGUARD).tunnel_mtu == 1420


# --- every encapsulation at its default tunnel MTU (1 Gbit/s, 1500, shaper) -------------


@pytest.mark.parametrize(
    ("encapsulation", "options", "tunnel_mtu", "payload", "expected_mbit"),
    [
        # ipip: 1500 - 20 = 1480; 1480 - 52 = 1428; 1428 / 1514 = 943.2
        (E.IPIP, EncapOptions(), 1480, 1428, 943.2),
        # gre: 1500 - 20 - 4 = 1476; 1424 / 1514 = 940.6
        (E.GRE, EncapOptions(), 1476, 1424, 940.6),
        # gre key + csum: 1500 - 20 - 4 - 4 - 4 = 1468; 1416 / 1514 = 935.3
        (E.GRE, EncapOptions(gre_key=True, gre_csum=True), 1468, 1416, 935.3),
        # gre key + csum + seq: 1464; 1412 / 1514 = 932.6
        (E.GRE, EncapOptions(gre_key=True, gre_csum=True, gre_seq=True), 1464, 1412, 932.6),
        # gretap: 1500 - 20 - 4 - 14 = 1462; 1410 / 1514 = 931.3
        (E.GRETAP, EncapOptions(), 1462, 1410, 931.3),
        # gretap key: 1458; 1406 / 1514 = 928.7
        (E.GRETAP, EncapOptions(gre_key=True), 1458, 1406, 928.7),
        # vxlan: 1500 - 20 - 8 - 8 - 14 = 1450; 1398 / 1514 = 923.4
        (E.VXLAN, EncapOptions(), 1450, 1398, 923.4),
        # geneve: 1450 like vxlan; 8 option bytes: 1442; 1390 / 1514 = 918.1
        (E.GENEVE, EncapOptions(), 1450, 1398, 923.4),
        (E.GENEVE, EncapOptions(geneve_options=8), 1442, 1390, 918.1),
        # openvpn: 1500 - 20 - 8 - 4 - 4 - 16 = 1448; 1396 / 1514 = 922.1
        (E.OPENVPN, EncapOptions(), 1448, 1396, 922.1),
        # esp tunnel: (1500 - 20 - 8 - 8 - 16) & ~3 = 1448, - 2 = 1446 (esp4_get_mtu);
        # 1394 / 1514 = 920.7
        (E.ESP_TUNNEL, EncapOptions(), 1446, 1394, 920.7),
        (E.ESP_TUNNEL, EncapOptions(cipher=Cipher.CHACHA20_POLY1305), 1446, 1394, 920.7),
        # NAT-T adds UDP 8: (1500 - 20 - 8 - 8 - 8 - 16) & ~3 - 2 = 1438; 1386 / 1514 = 915.5
        (E.ESP_TUNNEL, EncapOptions(nat_t=True), 1438, 1386, 915.5),
        # esp transport: original header kept; ((1500 - 16 - 16 - 20) & ~3) + 20 - 2 = 1466;
        # 1414 / 1514 = 933.9
        (E.ESP_TRANSPORT, EncapOptions(), 1466, 1414, 933.9),
        # transport + NAT-T: 1458; 1406 / 1514 = 928.7
        (E.ESP_TRANSPORT, EncapOptions(nat_t=True), 1458, 1406, 928.7),
    ],
)
def test_every_encapsulation_over_ipv4(encapsulation, options, tunnel_mtu, payload, expected_mbit):
    result = ceiling(G, link_mtu=1500, encapsulation=encapsulation, options=options)
    assert result.tunnel_mtu == tunnel_mtu
    assert result.tcp_payload == payload
    assert result.outer_packet == 1500  # the default fills the link exactly
    assert result.counted_bytes_per_packet == 1514
    assert mbit(result) == expected_mbit


@pytest.mark.parametrize(
    ("encapsulation", "options", "tunnel_mtu", "expected_mbit"),
    [
        # IPv6 in IPv6, payload = tunnel MTU - 40 - 32
        # ipip (ip6tnl) with Linux's default encapsulation limit option: 1500 - 40 - 8 = 1452;
        # 1380 / 1514 = 911.5
        (E.IPIP, EncapOptions(), 1452, 911.5),
        # `encaplimit none`: 1460; 1388 / 1514 = 916.8
        (E.IPIP, EncapOptions(encap_limit=False), 1460, 916.8),
        # ip6gre: 1500 - 40 - 8 - 4 = 1448; 1376 / 1514 = 908.9
        (E.GRE, EncapOptions(), 1448, 908.9),
        # ip6gretap: 1500 - 40 - 8 - 4 - 14 = 1434; 1362 / 1514 = 899.6
        (E.GRETAP, EncapOptions(), 1434, 899.6),
        # vxlan: 1500 - 70 = 1430; 1358 / 1514 = 897.0
        (E.VXLAN, EncapOptions(), 1430, 897.0),
        # openvpn: 1500 - 72 = 1428; 1356 / 1514 = 895.6
        (E.OPENVPN, EncapOptions(), 1428, 895.6),
        # esp tunnel: (1500 - 40 - 8 - 8 - 16) & ~3 - 2 = 1426; 1354 / 1514 = 894.3
        (E.ESP_TUNNEL, EncapOptions(), 1426, 894.3),
    ],
)
def test_ipv6_in_ipv6(encapsulation, options, tunnel_mtu, expected_mbit):
    result = ceiling(
        G,
        link_mtu=1500,
        encapsulation=encapsulation,
        inner_family=6,
        outer_family=6,
        options=options,
    )
    assert result.tunnel_mtu == tunnel_mtu
    assert result.tcp_payload == tunnel_mtu - 40 - 20 - 12
    assert not result.fragmented
    assert mbit(result) == expected_mbit


def test_plain_ipv6():
    # 1500 - 40 - 20 - 12 = 1428; 1428 / 1514 = 943.2
    result = ceiling(G, link_mtu=1500, encapsulation=E.NONE, inner_family=6, outer_family=6)
    assert result.tcp_payload == 1428
    assert mbit(result) == 943.2


def test_wireguard_ipv6_inner_over_ipv4_outer():
    # as the lab runs IPv6 traffic: payload 1420 - 40 - 32 = 1348; outer 1420 + 60 = 1480;
    # 1348 / 1494 = 902.3
    result = ceiling(G, link_mtu=1500, encapsulation=E.WIREGUARD, inner_family=6)
    assert (result.tcp_payload, result.outer_packet) == (1348, 1480)
    assert mbit(result) == 902.3


def test_wireguard_ipv6_over_ipv6_fills_the_link():
    # 1420 + 40 + 8 + 16 + 16 = 1500; payload 1348; 1348 / 1514 = 890.4
    result = ceiling(G, link_mtu=1500, encapsulation=E.WIREGUARD, inner_family=6, outer_family=6)
    assert result.outer_packet == 1500
    assert mbit(result) == 890.4


# --- padding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inner", "tunnel_mtu", "pad"),
    [
        (1420, 1420, 0),  # round_up(1420, 16) = 1424 > MTU: capped at 1420, no padding
        (1418, 1420, 2),  # 1424 capped at 1420: 2
        (1412, 1420, 8),  # 1424 capped at 1420: 8
        (1400, 1420, 8),  # 1408 <= 1420: 8
        (1408, 1420, 0),  # already a multiple of 16
        (1280, 1280, 0),
        (1401, 1420, 7),  # 1408 - 1401
    ],
)
def test_wireguard_pads_to_16_but_never_beyond_the_mtu(inner, tunnel_mtu, pad):
    assert padding(E.WIREGUARD, inner, inner_family=4, tunnel_mtu=tunnel_mtu) == pad


def test_wireguard_padding_when_the_lan_is_smaller_than_the_tunnel():
    # inner 1400 in a 1420 tunnel: padded to 1408; outer 1408 + 60 = 1468; counted 1482;
    # payload 1348; 1348 / 1482 = 909.6
    result = ceiling(G, link_mtu=1500, encapsulation=E.WIREGUARD, tunnel_mtu=1420, inner_mtu=1400)
    assert (result.padding, result.outer_packet, result.counted_bytes_per_packet) == (
        8,
        1468,
        1482,
    )
    assert mbit(result) == 909.6


@pytest.mark.parametrize(
    ("inner", "pad", "outer"),
    [
        # tunnel mode: pad so that inner + 2 is a multiple of 4; fixed part 20+8+8+2+16 = 54
        (1446, 0, 1500),  # 1448 % 4 == 0
        (1445, 1, 1500),  # 1447 -> 1448
        (1444, 2, 1500),  # 1446 -> 1448
        (1443, 3, 1500),  # 1445 -> 1448: the 57-byte worst case
        (1442, 0, 1496),  # 1444 % 4 == 0: the 54-byte best case
    ],
)
def test_esp_tunnel_padding_boundaries(inner, pad, outer):
    result = ceiling(G, link_mtu=1500, encapsulation=E.ESP_TUNNEL, tunnel_mtu=inner)
    assert (result.padding, result.outer_packet) == (pad, outer)
    assert 54 <= result.outer_packet - result.inner_packet <= 57


@pytest.mark.parametrize(
    ("inner", "pad"),
    [
        # transport mode pads the TCP segment only: (inner - 20) + 2 to a multiple of 4
        (1466, 0),  # 1446 + 2 = 1448
        (1465, 1),  # 1445 + 2 = 1447 -> 1448
        (1463, 3),  # 1443 + 2 = 1445 -> 1448
    ],
)
def test_esp_transport_pads_the_segment_not_the_ip_header(inner, pad):
    assert padding(E.ESP_TRANSPORT, inner, inner_family=4, tunnel_mtu=inner) == pad
    result = ceiling(G, link_mtu=1500, encapsulation=E.ESP_TRANSPORT, tunnel_mtu=inner)
    # outer = inner + 8 ESP + 8 IV + pad + 2 + 16 ICV (no new IP header)
    assert result.outer_packet == inner + 34 + pad


# --- timestamps, jumbo frames ------------------------------------------------------------


def test_no_timestamps():
    # 1500 - 40 = 1460; shaper 1460 / 1514 = 964.3; ethernet 1460 / 1538 = 949.3
    shaper = ceiling(G, link_mtu=1500, encapsulation=E.NONE, timestamps=False)
    wire = ceiling(
        G, link_mtu=1500, encapsulation=E.NONE, timestamps=False, framing=Framing.ETHERNET
    )
    assert shaper.tcp_payload == 1460
    assert (mbit(shaper), mbit(wire)) == (964.3, 949.3)


def test_jumbo_frames_at_10_gbit():
    # none: 9000 - 52 = 8948; 8948 / 9014 * 10e9 = 9926.8 Mbit/s
    plain = ceiling(10 * G, link_mtu=9000, encapsulation=E.NONE)
    assert mbit(plain) == 9926.8
    # wireguard: 9000 - 80 = 8920; payload 8868; outer 8980; counted 8994;
    # 8868 / 8994 * 10e9 = 9859.9
    wg = ceiling(10 * G, link_mtu=9000, encapsulation=E.WIREGUARD)
    assert (wg.tunnel_mtu, wg.outer_packet, wg.counted_bytes_per_packet) == (8920, 8980, 8994)
    assert mbit(wg) == 9859.9
    # ethernet framing: 8948 / 9038 * 10e9 = 9900.4
    assert mbit(ceiling(10 * G, link_mtu=9000, encapsulation=E.NONE, framing=Framing.ETHERNET)) == (
        9900.4
    )


# --- fragmentation and the minimum frame -------------------------------------------------


def test_fragment_sizes_ipv4():
    # 1560 on a 1500 link: 1480 data per fragment (multiple of 8); 1540 data in all:
    # 20 + 1480 = 1500, then 20 + 60 = 80
    assert fragment_sizes(1560, 1500, 4) == (1500, 80)
    assert fragment_sizes(1500, 1500, 4) == (1500,)
    # 3000 on 1500: data 2980 = 1480 + 1480 + 20
    assert fragment_sizes(3000, 1500, 4) == (1500, 1500, 40)


def test_fragment_sizes_ipv6():
    # 1520 on a 1500 link: 40 + 8 fragment header, (1500 - 48) // 8 * 8 = 1448 data;
    # 1480 data in all: 48 + 1448 = 1496, then 48 + 32 = 80
    assert fragment_sizes(1520, 1500, 6) == (1496, 80)


def test_wireguard_at_mtu_1500_on_a_1500_link_fragments():
    # outer 1500 + 60 = 1560 -> 1500 + 80; counted 1514 + 94 = 1608;
    # 1448 / 1608 = 900.5 (shaper); ethernet 1538 + (80 + 38) = 1656: 1448 / 1656 = 874.4
    result = ceiling(G, link_mtu=1500, encapsulation=E.WIREGUARD, tunnel_mtu=1500)
    assert result.fragmented
    assert (result.fragments, result.fragment_sizes) == (2, (1500, 80))
    assert result.counted_bytes_per_packet == 1608
    assert mbit(result) == 900.5
    assert "FRAGMENTED into 2 packets of 1500 + 80 B" in result.explain()
    wire = ceiling(
        G, link_mtu=1500, encapsulation=E.WIREGUARD, tunnel_mtu=1500, framing=Framing.ETHERNET
    )
    assert (wire.counted_bytes_per_packet, mbit(wire)) == (1656, 874.4)


def test_vxlan_over_ipv6_with_the_ipv4_default_mtu_fragments():
    # 1450 + 70 = 1520 > 1500: fragments 1496 + 80; counted 1510 + 94 = 1604;
    # payload 1398; 1398 / 1604 = 871.6
    result = ceiling(G, link_mtu=1500, encapsulation=E.VXLAN, tunnel_mtu=1450, outer_family=6)
    assert result.fragment_sizes == (1496, 80)
    assert result.counted_bytes_per_packet == 1604
    assert mbit(result) == 871.6


def test_a_tiny_last_fragment_is_padded_to_the_64_byte_minimum_frame():
    # ipip with tunnel MTU 1481: outer 1501 -> 1500 + 21 (20 header + 1 data byte)
    # ethernet: 1538 + (max(21 + 18, 64) + 20 = 84) = 1622; payload 1429; 1429 / 1622 = 881.0
    # shaper: 1514 + 35 = 1549; 1429 / 1549 = 922.5 (no minimum: a veth skb is not padded)
    wire = ceiling(
        G, link_mtu=1500, encapsulation=E.IPIP, tunnel_mtu=1481, framing=Framing.ETHERNET
    )
    assert wire.fragment_sizes == (1500, 21)
    assert wire.counted_bytes_per_packet == 1622
    assert mbit(wire) == 881.0
    shaper = ceiling(G, link_mtu=1500, encapsulation=E.IPIP, tunnel_mtu=1481)
    assert (shaper.counted_bytes_per_packet, mbit(shaper)) == (1549, 922.5)


@pytest.mark.parametrize(
    ("l3", "framing", "counted"),
    [
        (1500, Framing.SHAPER, 1514),
        (1500, Framing.ETHERNET, 1538),
        (46, Framing.ETHERNET, 84),  # 46 + 18 = 64: exactly the minimum frame, + 20
        (45, Framing.ETHERNET, 84),  # padded to 64
        (20, Framing.ETHERNET, 84),
        (20, Framing.SHAPER, 34),
    ],
)
def test_counted_bytes(l3, framing, counted):
    assert counted_bytes(l3, framing) == counted


def test_bidirectional_doubles_the_summed_ceiling():
    # both directions at the full rate: 2 * 915.66 = 1831.3
    result = ceiling(G, link_mtu=1500, encapsulation=E.WIREGUARD, directions=2)
    assert mbit(result) == 1831.3
    assert "2 directions = 1831.3 Mbit/s" in result.explain()


def test_default_tunnel_mtu_never_fragments():
    for encapsulation in Encapsulation:
        for family in (4, 6):
            outer = family
            mtu = default_tunnel_mtu(encapsulation, 1500, inner_family=family, outer_family=outer)
            result = ceiling(
                G,
                link_mtu=1500,
                encapsulation=encapsulation,
                inner_family=family,
                outer_family=outer,
            )
            assert not result.fragmented, (encapsulation, family)
            assert result.inner_packet == (1500 if encapsulation is E.NONE else mtu)


# --- impossible input --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "key", "message"),
    [
        ({"rate_bps": 0}, "rate_bps", "rate_bps: 0 is not a positive rate"),
        (
            {"inner_family": 6, "outer_family": 6, "link_mtu": 1000},
            "link_mtu",
            "link_mtu: 1000 is out of range; allowed 1280..65535",
        ),
        (
            {"encapsulation": E.VXLAN, "link_mtu": 100},
            "link_mtu",
            "link_mtu: 100 leaves a vxlan tunnel MTU of 50, below IPv4's minimum of 68",
        ),
        (
            {"encapsulation": E.WIREGUARD, "inner_family": 6, "link_mtu": 1300},
            "link_mtu",
            "link_mtu: 1300 leaves a wireguard tunnel MTU of 1220, below IPv6's minimum of 1280",
        ),
        (
            {"encapsulation": E.WIREGUARD, "inner_family": 6, "tunnel_mtu": 1200},
            "tunnel_mtu",
            "tunnel_mtu: 1200 is out of range for IPv6; allowed 1280..65535",
        ),
        (
            {"encapsulation": E.WIREGUARD, "tunnel_mtu": 1420, "inner_mtu": 1440},
            "inner_mtu",
            "inner_mtu: 1440 exceeds the tunnel/link MTU 1420",
        ),
        (
            {"encapsulation": E.WIREGUARD, "tunnel_mtu": 65535},
            "tunnel_mtu",
            "tunnel_mtu: 65535: the encapsulated packet would be 65595 bytes, above IP's "
            "limit of 65535",
        ),
        (
            {"encapsulation": E.NONE, "tunnel_mtu": 1400},
            "tunnel_mtu",
            "tunnel_mtu: 1400: none has no tunnel; its packets follow the link MTU",
        ),
        (
            {"encapsulation": E.ESP_TRANSPORT, "inner_family": 6},
            "outer_family",
            "outer_family: 4: esp-transport keeps the inner packet's IP header, so the outer "
            "family must be the inner one (6)",
        ),
        (
            {"encapsulation": E.WIREGUARD, "options": EncapOptions(nat_t=True)},
            "nat_t",
            "nat_t: applies to esp-tunnel and esp-transport only, not to wireguard over IPv4",
        ),
        (
            {"encapsulation": E.VXLAN, "options": EncapOptions(gre_key=True)},
            "gre_key",
            "gre_key: applies to gre and gretap only, not to vxlan over IPv4",
        ),
        (
            {"encapsulation": E.GRE, "options": EncapOptions(encap_limit=False)},
            "encap_limit",
            "encap_limit: applies to ipip, gre and gretap over IPv6 only, not to gre over IPv4",
        ),
        (
            {"encapsulation": E.GENEVE, "options": EncapOptions(geneve_options=6)},
            "geneve_options",
            "geneve_options: 6 is not a multiple of 4 between 0 and 252",
        ),
        (
            {"inner_family": 5},
            "inner_family",
            "inner_family: 5 is not an IP version; allowed: 4, 6",
        ),
    ],
)
def test_impossible_input_names_the_parameter(kwargs, key, message):
    arguments = {"rate_bps": G, "link_mtu": 1500, "encapsulation": E.NONE} | kwargs
    rate = arguments.pop("rate_bps")
    with pytest.raises(CeilingInputError) as caught:
        ceiling(rate, **arguments)
    assert caught.value.key == key
    assert str(caught.value) == message


# --- the tool's own trials ---------------------------------------------------------------


def lab_config(
    kind: str = "none",
    rate: int | None = G,
    wan_mtu: int = 1500,
    lan_mtu: int = 1500,
    family: int = 4,
    protocol: str = "tcp",
    direction: str = "upload",
) -> TrialConfig:
    return TrialConfig(
        lab=LabSettings(wan=LinkSettings(mtu=wan_mtu, rate=rate), lan_mtu=lan_mtu),
        tunnel=TunnelSettings(kind=TunnelKind(kind)),
        traffic=TrafficSettings(
            family=family, protocol=Protocol(protocol), direction=Direction(direction)
        ),
    )


def test_for_config_needs_a_shaped_wan_and_tcp():
    for config in (lab_config(rate=None), lab_config(protocol="udp")):
        assert for_config(config, resolved_for(config, {"tunnel_mtu": None})) is None


def test_for_config_covers_every_lab_tunnel_kind():
    # Every kind declares its wire model, so every shaped TCP trial has a ceiling.
    for kind in TunnelKind:
        config = lab_config(kind.value)
        assert for_config(config, resolved_for(config, {"tunnel_mtu": 1400})) is not None, kind


@pytest.mark.parametrize(
    ("config", "resolved", "expected_mbit", "inner_packet"),
    [
        # no tunnel: min(WAN 1500, LAN 1500); 1448 / 1514 = 956.4
        (lab_config(), {"tunnel_mtu": None}, 956.4, 1500),
        # no tunnel, LAN 1400: 1348 / 1414 (a 1400-byte packet on the WAN) = 953.3
        (lab_config(lan_mtu=1400), {"tunnel_mtu": None}, 953.3, 1400),
        # wireguard 1420: 1368 / 1494 = 915.7
        (lab_config("wireguard"), {"tunnel_mtu": 1420}, 915.7, 1420),
        # vxlan 1450: 1398 / 1514 = 923.4
        (lab_config("vxlan"), {"tunnel_mtu": 1450}, 923.4, 1450),
        # the kernel's IP tunnels at their default MTUs, each filling a 1500-byte packet:
        # gre 1476: 1424 / 1514 = 940.6; gretap 1462: 1410 / 1514 = 931.3;
        # ipip 1480: 1428 / 1514 = 943.2; geneve 1450 as vxlan: 1398 / 1514 = 923.4
        (lab_config("gre"), {"tunnel_mtu": 1476}, 940.6, 1476),
        (lab_config("gretap"), {"tunnel_mtu": 1462}, 931.3, 1462),
        (lab_config("ipip"), {"tunnel_mtu": 1480}, 943.2, 1480),
        (lab_config("geneve"), {"tunnel_mtu": 1450}, 923.4, 1450),
        # IPv6 through gre over the lab's IPv4 endpoints: 1404 / 1514 = 927.3
        (lab_config("gre", family=6), {"tunnel_mtu": 1476}, 927.3, 1476),
        # openvpn 1448 (either AEAD): 1396 / (1448 + 52 + 14 = 1514) = 922.1
        (lab_config("openvpn"), {"tunnel_mtu": 1448}, 922.1, 1448),
        # IPv6 traffic through the lab's WireGuard, whose endpoints are IPv4:
        # 1348 / (1420 + 60 + 14 = 1494) = 902.3
        (lab_config("wireguard", family=6), {"tunnel_mtu": 1420}, 902.3, 1420),
        # LAN 1400 below the tunnel's 1420: segments follow the LAN, WireGuard pads 1400
        # to 1408: 1348 / (1408 + 60 + 14 = 1482) = 909.6
        (lab_config("wireguard", lan_mtu=1400), {"tunnel_mtu": 1420}, 909.6, 1400),
        # bidir: both directions shaped at the full rate: 2 * 915.66 = 1831.3
        (lab_config("wireguard", direction="bidir"), {"tunnel_mtu": 1420}, 1831.3, 1420),
        # 100 Mbit/s: 1368 / 1494 * 100 = 91.6
        (lab_config("wireguard", rate=100 * 10**6), {"tunnel_mtu": 1420}, 91.6, 1420),
    ],
)
def test_for_config(config, resolved, expected_mbit, inner_packet):
    result = for_config(config, resolved_for(config, resolved))
    assert result is not None
    assert result.framing is Framing.SHAPER
    assert result.inner_packet == inner_packet
    assert mbit(result) == expected_mbit


def test_recorded_shaped_run_medians_are_within_0_2_percent_of_the_ceiling(tmp_path):
    # The recorded queue-comparison run (1 Gbit tbf, pfifo 50/1000, upload/download, 3 runs):
    # each configuration's median goodput against its ceiling.
    store = recorded("queue-comparison", tmp_path)
    run = store.run("latest")
    by_config: dict[str, list] = {}
    for trial in store.trials(run.id):
        if trial.status == "ok":
            by_config.setdefault(trial.config_key, []).append(trial)
    ceilings = set()
    for trials in by_config.values():
        result = for_config(trials[0].config, trials[0].resolved)
        assert result is not None
        ceilings.add(mbit(result))
        measured = statistics.median(t.metrics["goodput_bps"] for t in trials)
        assert measured / result.goodput_bps == pytest.approx(1, abs=0.002)
    assert ceilings == {956.4, 915.7}
    store.close()


def test_recorded_ipv6_run_confirms_the_lab_tunnels_run_over_ipv4(tmp_path):
    # tests/fixtures/runs/ipv6-shaped.db was recorded on the reference VM with
    #   tunnelbench run --tunnels wireguard,vxlan --family 6 --rate 1gbit --streams 1 \
    #       --runs 2 --duration 3
    # IPv6 traffic, 1 Gbit tbf. No tunnel: 1428 / 1514 = 943.2 (measured 941, 943).
    # VXLAN 1450 carrying IPv6 over the lab's IPv4 endpoints: payload 1450 - 72 = 1378,
    # outer 1500, 1378 / 1514 = 910.2 (measured 909, 910); had the outer header been IPv6,
    # 1520 bytes would fragment into 1496 + 80: 1378 / 1604 = 859.1.
    store = recorded("ipv6-shaped", tmp_path)
    run = store.run("latest")
    by_kind: dict[str, list] = {}
    for trial in store.trials(run.id):
        by_kind.setdefault(trial.config.tunnel.kind, []).append(trial)
    for kind, expected in (("none", 943.2), ("vxlan", 910.2)):
        trials = by_kind[kind]
        result = for_config(trials[0].config, trials[0].resolved)
        assert result is not None
        assert mbit(result) == expected
        measured = statistics.median(t.metrics["goodput_bps"] for t in trials)
        assert measured / result.goodput_bps == pytest.approx(1, abs=0.002)
    # WireGuard (userspace, 3 s trials) stays below its ceiling: 1348 / 1494 = 902.3
    wireguard = by_kind["wireguard"]
    result = for_config(wireguard[0].config, wireguard[0].resolved)
    assert result is not None and mbit(result) == 902.3
    assert max(t.metrics["goodput_bps"] for t in wireguard) <= result.goodput_bps * 1.005
    store.close()


def test_names_are_accepted_for_encapsulation_and_framing():
    # the same figure as the enum members give: 1448 / 1538 = 941.5
    result = ceiling(G, link_mtu=1500, encapsulation="none", framing="ethernet")
    assert (result.framing, mbit(result)) == (Framing.ETHERNET, 941.5)
    with pytest.raises(CeilingInputError) as caught:
        ceiling(G, link_mtu=1500, encapsulation="ipsec")
    assert str(caught.value).startswith("encapsulation: unknown value 'ipsec'; allowed: none,")


# --- ESP around a tunnel (tunnel.protection = "ipsec") and the lab's ipsec ---------------


def test_vxlan_in_esp_tunnel_mode_in_udp_as_libipsec_carries_it():
    # Tunnel MTU 1350 (libipsec: VXLAN's 1400-byte packets fill its TUN device).
    # Payload 1350 - 20 - 20 - 12 = 1298; the VXLAN packet 1350 + 50 = 1400 is encrypted
    # whole, 1400 + 2 trailer padded to 1404 (2 bytes); on the wire 20 IP + 8 UDP + 8 ESP
    # + 8 IV + 1400 + 2 + 2 + 16 ICV = 1464, counted 1478: 1298 / 1478 = 878.2 Mbit/s.
    result = ceiling(
        G, link_mtu=1500, encapsulation="vxlan", tunnel_mtu=1350, protection="esp-tunnel",
        options=EncapOptions(nat_t=True),
    )  # fmt: skip
    assert (result.outer_packet, result.padding, result.counted_bytes_per_packet) == (1464, 2, 1478)
    assert mbit(result) == 878.2
    assert result.overhead_fields == (
        ("ESP tunnel IPv4", 20), ("UDP", 8), ("ESP header", 8), ("IV", 8),
        ("outer IPv4", 20), ("UDP", 8), ("VXLAN", 8), ("inner Ethernet", 14),
        ("ESP trailer", 2), ("ICV", 16),
    )  # fmt: skip
    assert "outer packet 1464 B = 1350 + 114 vxlan in esp-tunnel (incl. 2 padding)" in (
        result.explain()
    )


def test_vxlan_in_esp_transport_mode_keeps_its_own_outer_header_first():
    # Default MTU 1500 - 50 VXLAN - 34 ESP = 1416. Payload 1364; the VXLAN packet is
    # 1466, ESP encrypts the 1446 bytes behind its IP header: 1446 + 2 = 1448, no
    # padding; 1466 + 34 = 1500 on the wire, counted 1514: 1364 / 1514 = 900.9 Mbit/s.
    result = ceiling(G, link_mtu=1500, encapsulation="vxlan", protection="esp-transport")
    assert (result.tunnel_mtu, result.outer_packet, result.padding) == (1416, 1500, 0)
    assert mbit(result) == 900.9
    assert result.overhead_fields[:3] == (("outer IPv4", 20), ("ESP header", 8), ("IV", 8))


@pytest.mark.parametrize(
    ("link_mtu", "protection", "options", "expected"),
    [
        # 1500 - 50 - 62 = 1388: VXLAN 1438, + 2 = 1440, no padding
        (1500, E.ESP_TUNNEL, EncapOptions(nat_t=True), 1388),
        # 1500 - 50 - 54 = 1396: VXLAN 1446, + 2 = 1448, no padding
        (1500, E.ESP_TUNNEL, EncapOptions(), 1396),
        # 1501 - 104 = 1397: VXLAN 1447, + 2 padded to 1452 (3 bytes), 1504 on the wire;
        # 1396 (1500 on the wire) fits
        (1501, E.ESP_TUNNEL, EncapOptions(), 1396),
    ],
)
def test_default_mtu_of_vxlan_in_esp_never_fragments(link_mtu, protection, options, expected):
    mtu = default_tunnel_mtu(
        E.VXLAN, link_mtu, inner_family=4, outer_family=4, options=options, protection=protection
    )
    assert mtu == expected
    result = ceiling(
        G, link_mtu=link_mtu, encapsulation=E.VXLAN, protection=protection, options=options
    )
    assert result.outer_packet <= link_mtu and not result.fragmented


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"encapsulation": E.WIREGUARD, "protection": E.ESP_TUNNEL},
            "protection: wireguard cannot be put in ESP; only ipip, gre, gretap, vxlan, geneve can",
        ),
        (
            {"encapsulation": E.VXLAN, "protection": E.GRE},
            "protection: gre cannot protect; allowed: esp-tunnel, esp-transport",
        ),
        (
            {"encapsulation": E.VXLAN, "options": EncapOptions(nat_t=True)},
            "nat_t: applies to esp-tunnel and esp-transport only, not to vxlan over IPv4",
        ),
    ],
)
def test_impossible_protection(kwargs, message):
    with pytest.raises(CeilingInputError) as caught:
        ceiling(G, link_mtu=1500, **kwargs)
    assert str(caught.value) == message


def protected_config(kind: str, esp_mode: str = "tunnel", protection: str = "none") -> TrialConfig:
    config = lab_config(kind)
    tunnel = TunnelSettings(
        kind=TunnelKind(kind), esp_mode=EspMode(esp_mode), protection=Protection(protection)
    )
    return TrialConfig(lab=config.lab, tunnel=tunnel, traffic=config.traffic)


@pytest.mark.parametrize(
    ("config", "resolved", "expected_mbit"),
    [
        # ipsec by libipsec at 1400, ESP in UDP: payload 1348; 1400 + 2 padded to 1404;
        # 20 + 8 + 8 + 8 + 1404 + 16 = 1464, counted 1478: 1348 / 1478 = 912.0
        (
            protected_config("ipsec"),
            {"tunnel_mtu": 1400, "tunnel_implementation": "libipsec",
             "tunnel_cipher": "aes-256-gcm", "esp_encapsulation": "udp"},
            912.0,
        ),
        # the same from the implementation alone (a trial that failed before set-up)
        (
            protected_config("ipsec"),
            {"tunnel_mtu": 1400, "tunnel_implementation": "libipsec",
             "tunnel_cipher": "chacha20-poly1305"},
            912.0,
        ),
        # kernel ESP at 1446, no UDP: payload 1394; 1446 + 54 = 1500, counted 1514: 920.7
        (
            protected_config("ipsec"),
            {"tunnel_mtu": 1446, "tunnel_implementation": "kernel", "tunnel_cipher": "aes-256-gcm"},
            920.7,
        ),
        # vxlan in libipsec's ESP (see test_vxlan_in_esp_tunnel_mode_in_udp_...): 878.2
        (
            protected_config("vxlan", protection="ipsec"),
            {"tunnel_mtu": 1350, "tunnel_implementation": "kernel",
             "esp_implementation": "libipsec", "tunnel_cipher": "aes-256-gcm"},
            878.2,
        ),
        # vxlan in the kernel's transport-mode ESP at 1416: 900.9
        (
            protected_config("vxlan", esp_mode="transport", protection="ipsec"),
            {"tunnel_mtu": 1416, "tunnel_implementation": "kernel",
             "esp_implementation": "kernel", "tunnel_cipher": "aes-256-gcm"},
            900.9,
        ),
    ],
)  # fmt: skip
def test_for_config_with_esp(config, resolved, expected_mbit):
    result = for_config(config, resolved_for(config, resolved))
    assert result is not None
    assert mbit(result) == expected_mbit
