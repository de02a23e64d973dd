"""trafgen, the packet generator of rate searches, on a real lab: what it says it wrote
against the kernel's own counters at both ends, and its frames held by the lab's shaper
(they take the device's queue discipline, which trafgen bypasses unless told)."""

import json
import time
from collections.abc import Iterator

import pytest

from tunnelbench.lab import netns
from tunnelbench.model import frames
from tunnelbench.model.plan import LabSettings, LinkSettings
from tunnelbench.system import programs
from tunnelbench.traffic import trafgen


def _lab(wan: LinkSettings) -> Iterator[netns.Lab]:
    if programs.find(trafgen.PROGRAM) is None:
        pytest.skip(
            "trafgen is not installed (Debian package netsniff-ng; `make test` installs it)"
        )
    lab = netns.build(LabSettings(wan=wan))
    try:
        yield lab
    finally:
        lab.teardown()


@pytest.fixture
def plain() -> Iterator[netns.Lab]:
    yield from _lab(LinkSettings())


@pytest.fixture
def shaped() -> Iterator[netns.Lab]:
    # 10 Mbit/s with a 20-packet FIFO.
    yield from _lab(LinkSettings(rate=10_000_000, queue_limit=20))


def _counters(lab: netns.Lab, role: str, device: str) -> dict[str, int]:
    shown = json.loads(lab.exec(role, ["ip", "-j", "-s", "link", "show", "dev", device]).stdout)
    stats = shown[0]["stats64"]
    return {
        f"{way}_{unit}": stats[way][unit] for way in ("rx", "tx") for unit in ("packets", "bytes")
    }


def _send(lab: netns.Lab, frame: int, count: int, rate_pps: int):
    client, server = lab.host("client"), lab.host("server")
    destination = lab.server_address(4)
    hop = trafgen.next_hop(client, destination, 4)
    assert hop.device == lab.wan_device("client")
    arriving = trafgen.next_hop(server, hop.source, 4).device
    config = lab.files("client") / "frames.cfg"
    client.write(config, trafgen.packet(hop, destination, 4, frame) + "\n")
    before = _counters(lab, "client", hop.device), _counters(lab, "server", arriving)
    sent = trafgen.send(client, trafgen.PROGRAM, hop, config, count, rate_pps)
    time.sleep(0.2)  # what the queue still held (20 frames at 826 a second: 25 ms)
    after = _counters(lab, "client", hop.device), _counters(lab, "server", arriving)
    left = {k: after[0][k] - before[0][k] for k in after[0]}
    came = {k: after[1][k] - before[1][k] for k in after[1]}
    return sent, left, came


def test_every_frame_trafgen_says_it_wrote_left_the_client_and_reached_the_server(plain):
    sent, left, came = _send(plain, 64, 20_000, 20_000)
    assert (sent.packets, sent.bytes) == (20_000, 20_000 * frames.written_bytes(64))
    # The kernel's counters hold at least what the generator reports (a ping or a
    # neighbour probe of the lab's own may add a few), and 1 s at 20 kpps loses nothing.
    assert 20_000 <= left["tx_packets"] <= 20_010
    assert 20_000 <= came["rx_packets"] <= 20_010
    assert 20_000 * 60 <= came["rx_bytes"] <= 20_000 * 60 + 10 * 100


def test_the_shaper_holds_trafgen_to_the_links_rate_and_it_loses_nothing_at_its_queue(shaped):
    # 2,000 frames of 1518 bytes asked at 2,000 a second (24.2 Mbit/s) into 10 Mbit/s,
    # which passes 10e6 / (1514 x 8) = 826 of them a second: the frames take the device's
    # queue (trafgen bypasses it unless told), whose refusals trafgen writes again, so
    # all of them arrive, over about 2.4 s instead of 1.
    sent, left, came = _send(shaped, 1518, 2_000, 2_000)
    shaper_pps = frames.shaped_pps(10e6, 1518)
    assert sent.packets == 2_000 and sent.seconds > 2_000 / 2_000
    # The bucket (15,140 bytes: 10 frames) and the queue (20) pass ahead of the rate.
    assert shaper_pps * 0.95 < sent.pps <= 2_000 / ((2_000 - 30) / shaper_pps), sent
    assert 2_000 <= came["rx_packets"] <= 2_010 and left["tx_packets"] >= 2_000
    device = shaped.wan_device("client")
    qdiscs = [q for q in json.loads(shaped.host("client").qdiscs()) if q.get("dev") == device]
    assert sum(int(q.get("drops", 0)) for q in qdiscs) > 0, qdiscs  # the refusals
