"""A path whose queue holds 600 ms (tests/fixtures/runs/bloated-600ms.db: 8 streams
through a 3 Mbit/s WAN and a byte FIFO of 225,000 bytes, 3 s windows): what its findings
must say about a window of few round trips and a sender whose own queue drops its
retransmissions."""

import re
from pathlib import Path

from tests.report_fixtures import recorded
from tunnelbench.analysis.diagnosis import Bound
from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.report import view


def _bloated(tmp_path: Path) -> tuple[view.RunView, ConfigSummary]:
    loaded = view.load(recorded("bloated-600ms", tmp_path), "latest")
    return loaded, next(s for s in loaded.summaries if s.config.lab.wan.queue_bytes == 225_000)


def test_goodput_above_the_ceiling_names_a_window_of_few_round_trips(tmp_path):
    """108-113% of the ceiling over 3 s at 592 ms: the receivers' 0.1 s reports ranged
    from 0 to 172 kB, what was held behind a lost segment handed over a round trip
    later; the finding says so and how long to measure instead."""
    _, bloated = _bloated(tmp_path)
    assert bloated.diagnosis is not None
    verdict = bloated.diagnosis.verdict
    assert verdict.bound is Bound.ABOVE_CEILING
    assert "its window (3 s) spans only 5.1 round trips under load (592 ms)" in verdict.summary
    assert "(`traffic.duration` ≥ 6)" in verdict.summary
    trips = {e.name: e.value for e in verdict.evidence}["round trips in the window"]
    assert 5.0 < trips < 5.2


def test_a_share_of_segments_retransmitted_is_at_most_all_of_them(tmp_path):
    """The sender's own FIFO dropped its retransmissions again and again: 3,598 in a
    window where the kernel's OutSegs (new data only) counted 687."""
    loaded, _ = _bloated(tmp_path)
    shares = [
        float(m.group(1))
        for s in loaded.summaries
        if s.diagnosis is not None
        for f in s.diagnosis.findings
        if (m := re.search(r"([\d.]+)% of TCP segments were retransmitted", f.summary))
    ]
    assert shares and all(0 < share <= 100 for share in shares), shares
