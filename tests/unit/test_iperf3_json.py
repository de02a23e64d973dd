"""Parsing real iperf3 3.12 JSON captured from a WireGuard lab (tests/fixtures/iperf3)."""

import json

import pytest

from tests.conftest import FIXTURES
from tunnelbench.errors import LabError
from tunnelbench.kinds import StreamMode
from tunnelbench.traffic import iperf3_json
from tunnelbench.traffic.iperf3 import _combine


def load(name: str) -> dict:
    return json.loads((FIXTURES / "iperf3" / f"{name}.json").read_text())


def test_upload_goodput_is_the_receivers_figure():
    doc = load("wireguard-upload-1stream")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps == doc["end"]["sum_received"]["bits_per_second"]
    assert m.download_bps is None
    assert m.retransmits == 0
    # Receiver intervals come from the server's report: the omitted warm-up interval and
    # the server's trailing partial interval are both dropped.
    server = doc["server_output_json"]["intervals"]
    assert m.intervals_bps == [
        server[1]["sum"]["bits_per_second"],
        server[2]["sum"]["bits_per_second"],
    ]


def test_four_streams_in_one_process_sum_to_the_end_summary():
    doc = load("wireguard-upload-4streams")
    m = iperf3_json.parse(doc, duration=2)
    assert len(doc["end"]["streams"]) == 4
    assert m.upload_bps == pytest.approx(2197327423.1966567)
    assert len(m.intervals_bps) == 2


def test_download_takes_the_clients_receive_side():
    doc = load("wireguard-download-1stream")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps is None
    assert m.download_bps == doc["end"]["sum_received"]["bits_per_second"]
    client = doc["intervals"]
    assert m.intervals_bps == [
        client[1]["sum"]["bits_per_second"],
        client[2]["sum"]["bits_per_second"],
    ]


def test_bidirectional_reports_both_directions_and_sums_intervals():
    doc = load("wireguard-bidir-1stream")
    m = iperf3_json.parse(doc, duration=2)
    assert m.upload_bps == pytest.approx(1149643840.9022412)
    assert m.download_bps == pytest.approx(1301531172.73044)
    server_rx = doc["server_output_json"]["intervals"][1]["sum"]["bits_per_second"]
    client_rx = doc["intervals"][1]["sum_bidir_reverse"]["bits_per_second"]
    assert m.intervals_bps[0] == pytest.approx(server_rx + client_rx)


def test_connection_refused_is_an_error_naming_the_cause():
    with pytest.raises(LabError, match="Connection refused"):
        iperf3_json.parse(load("connection-refused"), duration=2)


def test_combining_processes_sums_goodput_and_intervals():
    docs = [load("wireguard-upload-1stream"), load("wireguard-upload-4streams")]
    measured = [iperf3_json.parse(d, 2) for d in docs]
    result = _combine(StreamMode.PROCESSES, measured, docs)
    assert result.processes == 2
    assert result.goodput_bps == pytest.approx(2483541356.1303887 + 2197327423.1966567)
    assert result.intervals_bps[0] == pytest.approx(
        measured[0].intervals_bps[0] + measured[1].intervals_bps[0]
    )
    assert result.retransmits == 0
