"""Parsing real iperf3 3.12 JSON captured from a WireGuard lab (tests/fixtures/iperf3)."""

import json

import pytest

from tests.conftest import FIXTURES
from tunnelbench.errors import LabError
from tunnelbench.kinds import StreamMode
from tunnelbench.traffic import iperf3_json
from tunnelbench.traffic.iperf3 import combine


def load(name: str) -> dict:
    return json.loads((FIXTURES / "iperf3" / f"{name}.json").read_text())


def _window_rate(intervals: list[dict], key: str = "sum") -> float:
    """Bits per second of the measured intervals whose report starts within 2 s."""
    kept, at = [], 0.0
    for interval in intervals:
        if interval[key]["omitted"]:
            continue
        if at + interval[key]["seconds"] / 2 < 2:
            kept.append(interval[key])
        at += interval[key]["seconds"]
    return 8 * sum(i["bytes"] for i in kept) / sum(i["seconds"] for i in kept)


def test_upload_goodput_is_the_receivers_count_over_the_window():
    doc = load("wireguard-upload-1stream")
    m = iperf3_json.parse(doc, duration=2)
    server = doc["server_output_json"]["intervals"]
    assert m.upload_bps == pytest.approx(_window_rate(server))
    # On the host the end summary's time is the intervals' to a few ms.
    assert m.upload_bps == pytest.approx(doc["end"]["sum_received"]["bits_per_second"], rel=0.01)
    assert m.download_bps is None
    assert m.retransmits == 0
    # Receiver intervals come from the server's report: the omitted warm-up interval and
    # the server's trailing partial interval are both dropped.
    assert m.intervals_bps == pytest.approx(
        [server[1]["sum"]["bits_per_second"], server[2]["sum"]["bits_per_second"]]
    )


@pytest.mark.parametrize(
    ("name", "summary_mbps", "window_mbps"),
    [
        # The server idled 0.13 s after the sender stopped; the summary counts that time.
        ("tcg-upload-idle-tail", 2.599, 2.729),
        # The summary's 1.93 s are shorter than the 2.00 s of intervals holding its bytes.
        ("tcg-upload-short-summary", 2.770, 2.668),
    ],
)
def test_a_guests_end_summary_is_not_the_window(name, summary_mbps, window_mbps):
    doc = load(name)
    assert doc["end"]["sum_received"]["bits_per_second"] / 1e6 == pytest.approx(
        summary_mbps, abs=0.001
    )
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps is not None
    assert m.upload_bps / 1e6 == pytest.approx(window_mbps, abs=0.001)
    assert sum(m.intervals_bps) / 2 == pytest.approx(m.upload_bps, rel=0.01)


def test_four_streams_in_one_process_sum_to_the_window():
    doc = load("wireguard-upload-4streams")
    m = iperf3_json.parse(doc, duration=2)
    assert len(doc["end"]["streams"]) == 4
    assert m.upload_bps == pytest.approx(_window_rate(doc["server_output_json"]["intervals"]))
    assert m.upload_bps == pytest.approx(2197327423.1966567, rel=0.01)
    assert len(m.intervals_bps) == 2


def test_download_takes_the_clients_receive_side():
    doc = load("wireguard-download-1stream")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps is None
    client = doc["intervals"]
    assert m.download_bps == pytest.approx(_window_rate(client))
    assert m.intervals_bps == pytest.approx(
        [client[1]["sum"]["bits_per_second"], client[2]["sum"]["bits_per_second"]]
    )


def test_bidirectional_reports_both_directions_and_sums_intervals():
    doc = load("wireguard-bidir-1stream")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps == pytest.approx(_window_rate(doc["server_output_json"]["intervals"]))
    assert m.download_bps == pytest.approx(_window_rate(doc["intervals"], "sum_bidir_reverse"))
    assert m.upload_bps == pytest.approx(1149643840.9022412, rel=0.01)
    assert m.download_bps == pytest.approx(1301531172.73044, rel=0.01)
    server_rx = doc["server_output_json"]["intervals"][1]["sum"]["bits_per_second"]
    client_rx = doc["intervals"][1]["sum_bidir_reverse"]["bits_per_second"]
    assert m.intervals_bps[0] == pytest.approx(server_rx + client_rx)


def test_connection_refused_is_an_error_naming_the_cause():
    with pytest.raises(LabError, match="Connection refused"):
        iperf3_json.parse(load("connection-refused"), duration=2)


def test_combining_processes_sums_goodput_and_intervals():
    docs = [load("wireguard-upload-1stream"), load("wireguard-upload-4streams")]
    measured = [iperf3_json.parse(d, 2) for d in docs]
    result = combine(StreamMode.PROCESSES, measured, docs)
    assert result.processes == 2
    assert result.goodput_bps == pytest.approx(
        (measured[0].upload_bps or 0) + (measured[1].upload_bps or 0)
    )
    assert result.goodput_bps == pytest.approx(2483541356.1303887 + 2197327423.1966567, rel=0.01)
    assert result.intervals_bps[0] == pytest.approx(
        measured[0].intervals_bps[0] + measured[1].intervals_bps[0]
    )
    assert result.retransmits == 0


def test_an_interval_that_took_in_an_omitted_second_is_as_long_as_its_place_on_the_clock():
    """iperf3 3.12 with -O 2 on a real-hosts run at 20 Mbit/s: the first measured interval
    reports 2.002 s for one second's bytes (it took in the last omitted second; its end,
    1.000 s, is on the restarted clock). Read as 2 s, the window held half the link."""
    doc = load("omit2-first-interval-seconds-wrong")
    first = next(
        i["sum"] for i in doc["server_output_json"]["intervals"] if not i["sum"]["omitted"]
    )
    assert first["seconds"] == pytest.approx(2.0019, abs=1e-4)
    assert first["end"] == pytest.approx(1.0001, abs=1e-4)
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps is not None
    assert m.upload_bps / 1e6 == pytest.approx(19.10, abs=0.01)  # 20 Mbit/s: ceiling 19.13
    assert m.window_s == pytest.approx(2.0001, abs=1e-3)
    assert [round(r / 1e6, 1) for r in m.intervals_bps] == [19.1, 19.1]
