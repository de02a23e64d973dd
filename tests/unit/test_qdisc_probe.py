"""Root qdisc statistics from real `tc -s -j qdisc show` output (tests/fixtures/probes)."""

from dataclasses import replace

import pytest

from tests.unit.probe_fixtures import lab_like, text
from tunnelbench.errors import LabError
from tunnelbench.kinds import Topology
from tunnelbench.model.plan import LabSettings
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.qdisc import parse_qdiscs, qdisc_metrics

TBF_TUNNELS = {"client": "tbpxtbf-wgct", "gw": "tbpxtbf-wggw"}
HTB_TUNNELS = {"client": "tbpxhtb-wgct", "gw": "tbpxhtb-wggw"}


def metrics(lab: str, tunnels: dict[str, str], role: str, after: str = "after"):
    names = DeviceNames.of(lab_like(f"px{lab}"), tunnels)
    return qdisc_metrics(
        role,
        names,
        parse_qdiscs(text(f"qdisc-{lab}-{role}-before.json")),
        parse_qdiscs(text(f"qdisc-{lab}-{role}-{after}.json")),
    )


def test_noqueue_roots_are_left_out():
    roots = parse_qdiscs(text("qdisc-tbf-client-after.json"))
    # lo is noqueue; the WAN veth has the tbf shaper, wireguard-go's TUN device pfifo_fast.
    assert {d: r.kind for d, r in roots.items()} == {
        "tbpxtbf-gw": "tbf",
        "tbpxtbf-wgct": "pfifo_fast",
    }
    assert parse_qdiscs(text("qdisc-tbf-server-after.json")) == {}


def test_tbf_with_a_five_packet_fifo_drops_and_counts_the_leafs_drops_at_the_root():
    m = metrics("tbf", TBF_TUNNELS, "client")
    # tbf root before: 2232 bytes, 14 packets; after: 20664990 bytes, 13895 packets,
    # 9551 drops, 6571 overlimits, nothing queued. Its pfifo leaf: 0 -> 9551 drops.
    assert m["qdisc.client.wan.sent_bytes"] == 20664990 - 2232 == 20662758
    assert m["qdisc.client.wan.sent_packets"] == 13895 - 14 == 13881
    assert m["qdisc.client.wan.drops"] == 9551
    assert m["qdisc.client.wan.leaf_drops"] == 9551  # root counts what its leaf drops
    assert m["qdisc.client.wan.overlimits"] == 6571
    assert m["qdisc.client.wan.requeues"] == 0
    assert m["qdisc.client.wan.backlog_bytes"] == 0
    assert m["qdisc.client.wan.backlog_packets"] == 0
    # wireguard-go's TUN device: pfifo_fast, no child, so no leaf_drops.
    assert m["qdisc.client.tunnel.sent_bytes"] == 34259557 - 988 == 34258569
    assert m["qdisc.client.tunnel.sent_packets"] == 24192 - 11 == 24181
    assert "qdisc.client.tunnel.leaf_drops" not in m
    assert sorted({k.rsplit(".", 1)[0] for k in m}) == ["qdisc.client.tunnel", "qdisc.client.wan"]


def test_htb_counts_the_leafs_drops_at_the_root_too():
    m = metrics("htb", HTB_TUNNELS, "client")
    assert m["qdisc.client.wan.drops"] == m["qdisc.client.wan.leaf_drops"] == 230
    assert m["qdisc.client.wan.overlimits"] == 1025
    assert m["qdisc.client.wan.sent_bytes"] == 25229466 - 220 == 25229246


def test_backlog_is_the_value_read_after_not_a_delta():
    # Read 1 s into the traffic: the htb root holds 5 packets, 129978 bytes.
    m = metrics("htb", HTB_TUNNELS, "client", after="during")
    assert m["qdisc.client.wan.backlog_bytes"] == 129978
    assert m["qdisc.client.wan.backlog_packets"] == 5


def test_the_gateway_end_of_the_wan_link_is_named_by_its_role():
    m = metrics("tbf", TBF_TUNNELS, "gw")
    # Upload: only acknowledgements leave the gateway over the WAN.
    assert m["qdisc.gw.wan.sent_packets"] == 4037 - 15 == 4022
    assert m["qdisc.gw.wan.drops"] == 0
    assert "qdisc.gw.lan.drops" not in m  # the LAN veth is noqueue


def test_an_unshaped_site_to_site_lab_has_no_qdisc_metrics():
    lab = lab_like("pxsts", LabSettings(topology=Topology.SITE_TO_SITE))
    names = DeviceNames.of(lab, {"gwa": "tbpxsts-vxga", "gwb": "tbpxsts-vxgb"})
    roots = parse_qdiscs(text("qdisc-s2s-gwa.json"))
    assert qdisc_metrics("gwa", names, roots, roots) == {}


def test_a_root_replaced_during_the_trial_is_a_lab_error():
    names = DeviceNames.of(lab_like("pxtbf"), TBF_TUNNELS)
    before = parse_qdiscs(text("qdisc-tbf-client-before.json"))
    after = dict(before)
    after["tbpxtbf-gw"] = replace(after["tbpxtbf-gw"], kind="htb")
    with pytest.raises(LabError, match=r"qdisc of tbpxtbf-gw in client changed.*tbf 1:.*htb 1:"):
        qdisc_metrics("client", names, before, after)
