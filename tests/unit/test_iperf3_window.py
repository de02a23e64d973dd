"""Several iperf3 clients measured over one common window (``stream_mode = processes``).

The fixtures are real: 4 clients through a 100 Mbit/s tbf with a 5-packet queue, where
dropped SYNs started some clients 0.2-1.2 s after others. Summed over each client's own
test, their goodputs overstate what the link carried at any one time (a download trial
summed to 90.0 Mbit/s against 70.2 Mbit/s in the common window).
"""

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tunnelbench.analysis.ceiling import ceiling as tcp_ceiling
from tunnelbench.errors import LabError
from tunnelbench.traffic import iperf3_json

FIXTURES = Path(__file__).parent.parent / "fixtures" / "iperf3"
DURATION = 2


def docs(direction: str) -> list[dict[str, Any]]:
    path = FIXTURES / f"processes-{direction}-4streams-staggered.json"
    loaded: list[dict[str, Any]] = json.loads(path.read_text())["docs"]
    return loaded


def total(measured: list[iperf3_json.ProcessMeasurement], direction: str) -> float:
    return sum(getattr(m, f"{direction}_bps") or 0.0 for m in measured)


@pytest.mark.parametrize("direction", ["upload", "download", "bidir"])
def test_the_common_window_never_exceeds_what_the_link_can_carry(direction):
    measured = [iperf3_json.parse(doc, DURATION) for doc in docs(direction)]
    offsets = [doc[iperf3_json.WINDOW_KEY]["offset_s"] for doc in docs(direction)]
    assert max(offsets) > 0.5  # really staggered
    ceiling = tcp_ceiling(100_000_000, link_mtu=1500, encapsulation="none").goodput_bps
    halves = ["upload", "download"] if direction == "bidir" else [direction]
    for half in halves:
        assert 0.3 * ceiling < total(measured, half) <= ceiling
    for m in measured:
        # The per-second series is the same count, second by second.
        assert len(m.intervals_bps) == DURATION
        both = (m.upload_bps or 0.0) + (m.download_bps or 0.0)
        assert sum(m.intervals_bps) / DURATION == pytest.approx(both, rel=0.05)


def test_summing_each_clients_own_test_overstates_the_download():
    whole = sum(doc["end"]["sum_received"]["bits_per_second"] for doc in docs("download"))
    window = [iperf3_json.parse(doc, DURATION) for doc in docs("download")]
    assert whole / 1e6 == pytest.approx(90.0, abs=0.1)
    assert total(window, "download") / 1e6 == pytest.approx(70.2, abs=0.1)


def test_retransmits_come_from_the_senders_intervals_in_the_window():
    for doc in docs("upload"):
        window = iperf3_json.parse(doc, DURATION)
        whole = iperf3_json.parse(doc, DURATION)
        assert window.retransmits is not None and whole.retransmits is not None
        assert 0 <= window.retransmits <= whole.retransmits


def test_a_window_the_reports_do_not_cover_is_an_error():
    doc = copy.deepcopy(docs("upload")[0])
    doc[iperf3_json.WINDOW_KEY]["offset_s"] = 3.5  # the client ran 2 + 2 s
    with pytest.raises(LabError, match=r"upload report covers 0\.\d s of the window 3\.50-5\.50"):
        iperf3_json.parse(doc, DURATION)
