"""Lab link settings as commands: the WAN's queue discipline (the shaper's leaf, or the
root when unshaped) and the offloads of the lab's links."""

from typing import Any

import pytest

from tunnelbench.errors import LabError
from tunnelbench.kinds import Queue, Shaper, Topology
from tunnelbench.lab.host import ethtool_words
from tunnelbench.lab.netns import offload_roles, role_offloads
from tunnelbench.lab.shaping import (
    device_commands,
    queue_commands,
    queue_qdisc,
    shaping_commands,
)
from tunnelbench.lab.topology import CHAINS
from tunnelbench.model.plan import LabSettings, LinkSettings, Offloads

TBF_ROOT = ["qdisc", "replace", "dev", "x", "root", "handle", "1:", "tbf",
            "rate", "100mbit", "burst", "15140", "limit", "75700"]  # fmt: skip
HTB = [
    ["qdisc", "replace", "dev", "x", "root", "handle", "1:", "htb", "default", "1"],
    ["class", "add", "dev", "x", "parent", "1:", "classid", "1:1", "htb",
     "rate", "100mbit", "ceil", "100mbit", "burst", "15140", "cburst", "15140"],
]  # fmt: skip
LEAF = ["qdisc", "add", "dev", "x", "parent", "1:1", "handle", "10:"]

QDISCS = [
    (None, ["pfifo", "limit", "50"]),
    (Queue.PFIFO, ["pfifo", "limit", "50"]),
    (Queue.PFIFO_FAST, ["pfifo_fast"]),
    (Queue.FQ_CODEL, ["fq_codel", "limit", "50"]),
    (Queue.FQ, ["fq", "limit", "50"]),
    # cake does not shape: the tbf/htb shaper does, for every queue alike.
    (Queue.CAKE, ["cake", "unlimited"]),
    # A byte limit: 50 full 1514-byte frames, whatever the queue is handed.
    (Queue.BFIFO, ["bfifo", "limit", "75700"]),
]


def _wan(queue: Queue | None, **more: Any) -> LinkSettings:
    return LinkSettings(rate=10**8, queue=queue, queue_limit=50, **more)


@pytest.mark.parametrize(("queue", "qdisc"), QDISCS)
def test_queue_qdisc(queue, qdisc):
    assert queue_qdisc(_wan(queue)) == qdisc


@pytest.mark.parametrize(("queue", "qdisc"), QDISCS)
def test_tbf_has_the_queue_as_its_child(queue, qdisc):
    assert shaping_commands("x", _wan(queue)) == [TBF_ROOT, LEAF + qdisc]


@pytest.mark.parametrize(("queue", "qdisc"), QDISCS)
def test_htb_has_the_queue_as_the_leaf_of_its_class(queue, qdisc):
    assert shaping_commands("x", _wan(queue, shaper=Shaper.HTB)) == HTB + [LEAF + qdisc]


@pytest.mark.parametrize(("queue", "qdisc"), [q for q in QDISCS if q[0] is not None])
def test_unshaped_link_gets_the_queue_as_its_root(queue, qdisc):
    root = ["qdisc", "replace", "dev", "x", "root", "handle", "1:"]
    assert queue_commands("x", LinkSettings(queue=queue, queue_limit=50)) == [root + qdisc]


def test_unshaped_link_without_a_queue_keeps_the_devices_default():
    assert queue_commands("x", LinkSettings(queue_limit=50)) == []


def test_pfifo_fast_length_is_the_devices_txqueuelen():
    assert device_commands("x", Queue.PFIFO_FAST, 50) == [
        ["link", "set", "dev", "x", "txqueuelen", "50"]
    ]
    for queue in [None, *(q for q in Queue if q is not Queue.PFIFO_FAST)]:
        assert device_commands("x", queue, 50) == []


# --- offloads: which links, and the ethtool arguments ---


def test_offload_arguments_name_only_the_features_set():
    assert ethtool_words(Offloads(gro=True, tso=False).changes()) == ["gro", "on", "tso", "off"]
    assert ethtool_words(Offloads().changes()) == []


def test_a_byte_limit_replaces_the_frames_worth_and_sizes_tbfs_own_limit():
    wan = _wan(Queue.BFIFO, queue_bytes=96_000)
    assert queue_qdisc(wan) == ["bfifo", "limit", "96000"]
    assert shaping_commands("x", wan)[0][-2:] == ["limit", "96000"]


def test_every_lab_link_does_gro_as_a_nics_default_unless_the_plan_says():
    """Offloads as real hardware has them: receivers aggregate (GRO), senders keep the
    kernel's TSO/GSO; nothing is turned off, shaped or not."""
    chain = CHAINS[Topology.ROAD_WARRIOR]
    hardware = {r: {"gro": True} for r in chain.roles}
    assert role_offloads(LabSettings(), chain) == hardware
    assert role_offloads(LabSettings(wan=LinkSettings(rate=10**9)), chain) == hardware
    asked = LabSettings(offloads=Offloads(gro=False, tso=False, roles=("gw",)))
    assert role_offloads(asked, chain) == hardware | {"gw": {"gro": False, "tso": False}}


def test_a_shaped_lab_keeps_the_plans_offload_settings_for_its_roles():
    chain = CHAINS[Topology.SITE_TO_SITE]
    asked = LabSettings(
        wan=LinkSettings(rate=1_000_000_000), offloads=Offloads(tso=False, roles=("client",))
    )
    found = role_offloads(asked, chain)
    assert found["client"] == {"tso": False, "gro": True}
    assert found["server"] == {"gro": True}


def test_offloads_apply_to_every_role_unless_listed():
    chain = CHAINS[Topology.SITE_TO_SITE]
    assert offload_roles(Offloads(gro=True), chain) == ("client", "gwa", "gwb", "server")
    assert offload_roles(Offloads(gro=True, roles=("gwa",)), chain) == ("gwa",)


def test_a_role_the_topology_lacks_is_refused_naming_its_roles():
    with pytest.raises(LabError) as caught:
        offload_roles(Offloads(gro=True, roles=("gw",)), CHAINS[Topology.SITE_TO_SITE])
    assert str(caught.value) == (
        "offloads.roles: 'gw' is not a role of this topology; roles: client, gwa, gwb, server"
    )
