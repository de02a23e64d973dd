"""UDP: command lines, and parsing real iperf3 3.12 UDP JSON (tests/fixtures/iperf3/udp-*).

The fixtures were captured in a road-warrior lab with userspace WireGuard and the WAN
shaped to 100 Mbit/s (tbf), so UDP sent at 150 Mbit/s per stream loses about 38% of its
packets at the shaper; two streams of 40 Mbit/s lose none. Each ran 2 s after 1 s of
omitted warm-up.
"""

import json

import pytest

from tests.conftest import FIXTURES
from tunnelbench.errors import LabError
from tunnelbench.kinds import Direction, Protocol, StreamMode
from tunnelbench.model.plan import TrafficSettings
from tunnelbench.traffic import iperf3_json
from tunnelbench.traffic.iperf3 import client_argv, combine


def load(name: str) -> dict:
    return json.loads((FIXTURES / "iperf3" / f"{name}.json").read_text())


def test_udp_client_sends_at_the_rate_per_stream():
    settings = TrafficSettings(
        protocol=Protocol.UDP, udp_rate=150_000_000, streams=2, duration=2, warmup=1
    )
    argv = client_argv("iperf3", "198.18.1.2", 5201, settings, streams=2)
    assert argv[-3:] == ["-u", "-b", "150000000"]
    assert argv[argv.index("-P") + 1] == "2"


def test_tcp_client_has_no_udp_flags():
    argv = client_argv("iperf3", "198.18.1.2", 5201, TrafficSettings(), streams=1)
    assert "-u" not in argv and "-b" not in argv


def test_udp_without_a_rate_is_a_programming_error():
    with pytest.raises(ValueError, match="udp_rate"):
        client_argv("iperf3", "x", 5201, TrafficSettings(protocol=Protocol.UDP), streams=1)


def test_upload_goodput_loss_and_jitter_are_the_servers():
    doc = load("udp-upload-1stream")
    m = iperf3_json.parse(doc, duration=2)
    # sum_received is marked "sender": false for UDP even though the client sent it.
    assert doc["end"]["sum_received"]["sender"] is False
    assert m.upload_bps == pytest.approx(92312724.90602878, rel=0.01)
    assert m.download_bps is None
    assert m.retransmits is None
    server = doc["server_output_json"]["end"]["sum_received"]
    assert m.udp == [iperf3_json.UdpReceived(11172, 29057, server["jitter_ms"])]
    # The client's own upload summary counts the warm-up's loss too: not used.
    assert doc["end"]["sum_received"]["lost_packets"] == 14780
    assert iperf3_json.lost_percent(m.udp) == pytest.approx(38.4486, abs=1e-3)


def test_upload_loss_is_the_servers_measured_intervals():
    """The server's summary equals the sum of its non-omitted intervals."""
    doc = load("udp-upload-1stream")
    intervals = [
        i["sum"] for i in doc["server_output_json"]["intervals"] if not i["sum"]["omitted"]
    ]
    m = iperf3_json.parse(doc, duration=2)
    assert m.udp[0].lost_packets == sum(i["lost_packets"] for i in intervals)
    assert m.udp[0].packets == sum(i["packets"] for i in intervals)
    assert m.intervals_bps == pytest.approx(
        [intervals[0]["bits_per_second"], intervals[1]["bits_per_second"]]
    )


def test_download_is_received_by_the_client():
    doc = load("udp-download-1stream")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps is None
    assert m.download_bps == pytest.approx(92297219.58485015, rel=0.01)
    received = doc["end"]["sum_received"]
    assert m.udp == [iperf3_json.UdpReceived(10545, 27413, received["jitter_ms"])]
    # 3.12's own lost_percent divides by another packet count (36.26%); ours is lost/expected.
    assert received["lost_percent"] == pytest.approx(36.2595, abs=1e-3)
    assert iperf3_json.lost_percent(m.udp) == pytest.approx(38.4671, abs=1e-3)
    client = [i["sum"] for i in doc["intervals"] if not i["sum"]["omitted"]]
    assert m.intervals_bps == pytest.approx(
        [client[0]["bits_per_second"], client[1]["bits_per_second"]]
    )


def test_bidirectional_has_one_receiver_per_direction():
    doc = load("udp-bidir-1stream")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps == pytest.approx(89919793.2826285, rel=0.01)
    # The client received 22,777,200 bytes in its two measured seconds; its end summary
    # divides them by 2.12 s, the test's end exchange included (85.9 Mbit/s).
    assert doc["end"]["sum_received_bidir_reverse"]["seconds"] == pytest.approx(2.12077)
    assert m.download_bps == pytest.approx(8 * 22777200 / 2.0, rel=1e-4)
    server = doc["server_output_json"]["end"]["sum_received"]
    reverse = doc["end"]["sum_received_bidir_reverse"]
    assert m.udp == [
        iperf3_json.UdpReceived(11648, 29073, server["jitter_ms"]),
        iperf3_json.UdpReceived(10766, 27416, reverse["jitter_ms"]),
    ]
    server_rx = doc["server_output_json"]["intervals"][1]["sum"]["bits_per_second"]
    client_rx = doc["intervals"][1]["sum_bidir_reverse"]["bits_per_second"]
    assert m.intervals_bps[0] == pytest.approx(server_rx + client_rx)


def test_two_streams_in_one_process_lose_nothing_under_the_link_rate():
    doc = load("udp-upload-2streams")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps == pytest.approx(79758572.7317591, rel=0.01)
    jitter = doc["server_output_json"]["end"]["sum_received"]["jitter_ms"]
    assert m.udp == [iperf3_json.UdpReceived(0, 14620, jitter)]
    assert iperf3_json.lost_percent(m.udp) == 0.0


def test_upload_without_the_servers_report_is_an_error():
    doc = load("udp-upload-1stream")
    del doc["server_output_json"]
    with pytest.raises(LabError, match=r"server's intervals.*--get-server-output"):
        iperf3_json.parse(doc, duration=2)


def test_combined_udp_result_sums_loss_and_averages_jitter():
    names = ["udp-upload-1stream", "udp-bidir-1stream"]
    docs = [load(n) for n in names]
    measured = [iperf3_json.parse(d, 2) for d in docs]
    result = combine(StreamMode.PROCESSES, measured, docs)
    assert result.retransmits is None
    assert result.congestion is None
    assert result.lost_packets == 11172 + 11648 + 10766
    assert result.lost_pct == pytest.approx(100 * (11172 + 11648 + 10766) / (29057 + 29073 + 27416))
    jitters = [r.jitter_ms for m in measured for r in m.udp]
    assert result.jitter_ms == pytest.approx(sum(jitters) / 3)
    assert result.upload_bps == pytest.approx(92312724.90602878 + 89919793.2826285, rel=0.01)


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("wireguard-upload-1stream", Direction.UPLOAD),
        ("wireguard-download-1stream", Direction.DOWNLOAD),
        ("wireguard-bidir-1stream", Direction.BIDIR),
    ],
)
def test_tcp_results_carry_no_udp_figures_and_the_senders_congestion_control(name, direction):
    doc = load(name)
    result = combine(StreamMode.SINGLE, [iperf3_json.parse(doc, 2)], [doc])
    assert (result.lost_packets, result.lost_pct, result.jitter_ms) == (None, None, None)
    assert result.retransmits is not None
    assert result.congestion == doc["end"]["sender_tcp_congestion"] == "bbr"
    assert (result.upload_bps is not None) == (direction is not Direction.DOWNLOAD)
    assert (result.download_bps is not None) == (direction is not Direction.UPLOAD)
