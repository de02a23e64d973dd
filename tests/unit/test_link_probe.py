"""Interface counters from real ``/proc/net/dev`` text, and stable device names."""

import pytest

from tests.unit.probe_fixtures import lab_like, text
from tunnelbench.errors import LabError
from tunnelbench.kinds import Topology
from tunnelbench.model.plan import LabSettings
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.links import (
    LINK_FIELDS,
    Counters,
    busiest,
    check_forwarded,
    link_metrics,
    parse_links,
    tunnel_metrics,
)

TUNNELS = {"client": "tbpxtbf-wgct", "gw": "tbpxtbf-wggw"}


def gw_readings() -> tuple[dict[str, Counters], dict[str, Counters]]:
    return parse_links(text("netdev-tbf-gw-before.txt")), parse_links(
        text("netdev-tbf-gw-after.txt")
    )


def test_parse_reads_every_device_of_the_namespace():
    links = parse_links(text("netdev-tbf-gw-after.txt"))
    assert sorted(links) == ["lo", "tbpxtbf-client", "tbpxtbf-server", "tbpxtbf-wggw"]
    # a name as wide as its column runs into the colon: "tbpxtbf-client: 20636998"
    assert links["tbpxtbf-client"]["rx_bytes"] == 20636998
    assert links["tbpxtbf-wggw"]["rx_bytes"] == 19460209
    assert links["tbpxtbf-client"]["rx_packets"] == 5759
    assert links["tbpxtbf-server"]["tx_bytes"] == 19528657


def test_a_line_that_is_not_sixteen_counters_is_a_lab_error():
    broken = text("netdev-tbf-gw-after.txt").replace(" 19460209", " 19460209 7")
    with pytest.raises(LabError, match="cannot read the line 'tbpxtbf-wggw: 19460209 7"):
        parse_links(broken)


def test_link_metrics_name_veths_by_link_and_the_tunnel_device_tunnel():
    before, after = gw_readings()
    m = link_metrics("gw", DeviceNames.of(lab_like("pxtbf"), TUNNELS), before, after)
    assert sorted(m) == sorted(
        f"link.gw.{link}.{f}" for link in ("wan", "lan", "tunnel") for f in LINK_FIELDS
    )
    # WAN end (tbpxtbf-client): rx 16 -> 5759 packets, tx 14 -> 4220.
    assert m["link.gw.wan.rx_packets"] == 5759 - 16 == 5743
    assert m["link.gw.wan.tx_packets"] == 4220 - 14 == 4206
    # LAN end (tbpxtbf-server): tx 16 -> 4838.
    assert m["link.gw.lan.tx_packets"] == 4838 - 16 == 4822
    # Every packet the tunnel decapsulated (rx 10 -> 4831) went on to the server ...
    assert m["link.gw.tunnel.rx_packets"] == 4831 - 10 == 4821
    assert m["link.gw.lan.tx_packets"] >= m["link.gw.tunnel.rx_packets"]
    # ... and each packet the WAN end received carried at least WireGuard's 32 bytes,
    # UDP's 8 and IPv4's 20 around what the tunnel gave out
    inner = m["link.gw.tunnel.rx_bytes"]
    assert m["link.gw.wan.rx_bytes"] >= inner + 60 * m["link.gw.wan.rx_packets"]
    assert m["link.gw.wan.rx_dropped"] == m["link.gw.wan.tx_errors"] == 0


def test_tunnel_metrics_keep_their_names():
    before, after = gw_readings()
    m = tunnel_metrics("gw", "tbpxtbf-wggw", before, after)
    assert m == {
        "tunnel.gw.rx_bytes": 19460209 - 940,
        "tunnel.gw.rx_packets": 4831 - 10,
        "tunnel.gw.rx_dropped": 0,
        "tunnel.gw.tx_bytes": 253476 - 1092,
        "tunnel.gw.tx_packets": 4218 - 12,
        "tunnel.gw.tx_dropped": 0,
    }


def test_a_missing_tunnel_device_is_a_lab_error():
    before, after = gw_readings()
    del after["tbpxtbf-wggw"]
    with pytest.raises(LabError, match="tunnel device tbpxtbf-wggw in gw vanished"):
        tunnel_metrics("gw", "tbpxtbf-wggw", before, after)


def test_site_to_site_names_lan_a_wan_and_tunnel():
    lab = lab_like("pxsts", LabSettings(topology=Topology.SITE_TO_SITE))
    names = DeviceNames.of(lab, {"gwa": "tbpxsts-vxga", "gwb": "tbpxsts-vxgb"})
    reading = parse_links(text("netdev-s2s-gwa.txt"))
    named = {device: names.name("gwa", device) for device in reading}
    assert named == {
        "lo": None,  # not created by the lab: skipped
        "tbpxsts-client": "lan-a",
        "tbpxsts-gwb": "wan",
        "tbpxsts-vxga": "tunnel",
    }
    assert names.name("gwb", "tbpxsts-server") == "lan-b"


def test_other_lab_devices_are_named_by_their_suffix():
    names = DeviceNames.of(lab_like("pxtbf"), TUNNELS)
    assert names.name("gw", "tbpxtbf-ifb0") == "ifb0"
    assert names.name("gw", "ifb0") is None


def forwarded(**sent: float) -> dict[str, float]:
    """A trial's metrics: 80 Mbit/s over 2 s (20 MB) arrived, and what each router's
    interfaces sent (``gw_lan=...``)."""
    metrics = {"goodput_bps": 80e6, "upload_bps": 80e6}
    for where, value in sent.items():
        role, link = where.split("_")
        metrics[f"link.{role}.{link}.tx_bytes"] = value
        metrics[f"link.{role}.{link}.rx_bytes"] = 2 * value  # never read for forwarding
    return metrics


def test_every_router_must_have_sent_what_arrived():
    check_forwarded(forwarded(gw_lan=20_100_000, gw_wan=400_000), ["gw"], 2)
    with pytest.raises(LabError, match=r"gw sent 19,900,000 bytes .* fewer than the 20,000,000"):
        check_forwarded(forwarded(gw_lan=19_900_000, gw_wan=400_000), ["gw"], 2)
    # site to site: the second router is held too, and one never counted is an error
    with pytest.raises(LabError, match="gwb sent 0 bytes"):
        check_forwarded(forwarded(gwa_wan=21_000_000), ["gwa", "gwb"], 2)


def test_what_arrived_is_counted_over_the_intervals_the_generator_counted():
    # Seen in CI: a 1 s bidirectional trial at 10.6 Gbit/s, whose receivers' intervals
    # in the window spanned 2 ms less than it; 10.6 Gbit/s x 1 s is 0.15 % more than
    # the router sent, and more than arrived.
    metrics = forwarded(gw_lan=1_321_660_339) | {
        "goodput_bps": 15.9e9,
        "upload_bps": 10_589_402_240.0,
        "download_bps": 5.3e9,
    }
    with pytest.raises(LabError, match="fewer than the 1,323,675,280"):
        check_forwarded(metrics, ["gw"], 1)
    check_forwarded(metrics | {"goodput.window_s": 0.998}, ["gw"], 1)
    # ... and a router 0.5 % short of what those intervals received is still refused
    with pytest.raises(LabError, match="gw sent"):
        check_forwarded(metrics | {"goodput.window_s": 1.004}, ["gw"], 1)


def test_a_bidirectional_test_is_held_to_its_busier_direction():
    # 80 up and 40 down leave the router by two interfaces: neither carries 120 Mbit/s
    metrics = forwarded(gw_lan=20_500_000, gw_wan=10_500_000) | {
        "goodput_bps": 120e6,
        "download_bps": 40e6,
    }
    check_forwarded(metrics, ["gw"], 2)
    assert busiest(metrics, "gw", "tx_bytes") == 20_500_000
    assert busiest(metrics, "client", "tx_bytes") is None
