"""Interface counters from real `ip -j -s link show` output, and stable device names."""

import pytest

from tests.conftest import FIXTURES
from tests.unit.probe_fixtures import lab_like, text
from tunnelbench.errors import LabError
from tunnelbench.kinds import Topology
from tunnelbench.model.plan import LabSettings
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.links import (
    LINK_FIELDS,
    Counters,
    link_metrics,
    parse_links,
    tunnel_metrics,
)

TUNNELS = {"client": "tbpxtbf-wgct", "gw": "tbpxtbf-wggw"}


def gw_readings() -> tuple[dict[str, Counters], dict[str, Counters]]:
    return parse_links(text("link-tbf-gw-before.json")), parse_links(text("link-tbf-gw-after.json"))


def test_parse_reads_every_device_of_the_namespace():
    links = parse_links(text("link-tbf-gw-after.json"))
    assert sorted(links) == ["lo", "tbpxtbf-client", "tbpxtbf-server", "tbpxtbf-wggw"]
    assert links["tbpxtbf-wggw"]["rx_bytes"] == 19153905
    assert links["tbpxtbf-client"]["rx_packets"] == 5509


def test_parse_reads_the_older_single_device_capture():
    (stats,) = parse_links((FIXTURES / "proc" / "ip-link-stats.json").read_text()).values()
    assert stats["rx_bytes"] == 3193
    assert stats["tx_packets"] == 29


def test_link_metrics_name_veths_by_link_and_the_tunnel_device_tunnel():
    before, after = gw_readings()
    m = link_metrics("gw", DeviceNames.of(lab_like("pxtbf"), TUNNELS), before, after)
    assert sorted(m) == sorted(
        f"link.gw.{link}.{f}" for link in ("wan", "lan", "tunnel") for f in LINK_FIELDS
    )
    # WAN end (tbpxtbf-client): rx 17 -> 5509 packets, tx 16 -> 4039.
    assert m["link.gw.wan.rx_packets"] == 5509 - 17 == 5492
    assert m["link.gw.wan.tx_packets"] == 4039 - 16 == 4023
    # LAN end (tbpxtbf-server): tx 17 -> 4601.
    assert m["link.gw.lan.tx_packets"] == 4601 - 17 == 4584
    # Every packet the tunnel decapsulated (rx 10 -> 4594) went on to the server.
    assert m["link.gw.tunnel.rx_packets"] == 4594 - 10 == m["link.gw.lan.tx_packets"]
    assert m["link.gw.wan.rx_dropped"] == m["link.gw.wan.tx_errors"] == 0


def test_tunnel_metrics_keep_their_names():
    before, after = gw_readings()
    m = tunnel_metrics("gw", "tbpxtbf-wggw", before, after)
    assert m == {
        "tunnel.gw.rx_bytes": 19153905 - 940,
        "tunnel.gw.rx_packets": 4594 - 10,
        "tunnel.gw.rx_dropped": 0,
        "tunnel.gw.tx_bytes": 243141 - 1092,
        "tunnel.gw.tx_packets": 4035 - 12,
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
    reading = parse_links(text("link-s2s-gwa.json"))
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
