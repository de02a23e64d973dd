"""Round-trip times from real iputils ping output, and the measured window."""

import pytest

from tests.unit.probe_fixtures import text, window
from tunnelbench.errors import LabError
from tunnelbench.probes.rtt import (
    idle_metrics,
    loaded_metrics,
    parse_ping,
    patience,
    percentile,
    ping_argv,
)

# capture.sh sends SIGINT to ping 0.3 s after the traffic ends.
STOP_AFTER_END_S = 0.3


def loaded(lab: str, **overrides: float) -> dict[str, float]:
    start, end = window(lab)
    out = parse_ping(text(f"ping-loaded-{lab}.txt"))
    args = {"interval": 0.1, "first_sent": start - 0.5, "stopped_at": end + STOP_AFTER_END_S}
    return loaded_metrics(out, (start, end), **(args | overrides))


def test_ping_argv():
    assert ping_argv("198.18.1.2", 4, 0.1) == [
        "ping", "-4", "-D", "-n", "-i", "0.1", "-W", "1", "198.18.1.2",
    ]  # fmt: skip
    assert ping_argv("2001:2:0:1::2", 6, 0.01, 5)[-3:] == ["-c", "5", "2001:2:0:1::2"]


def test_idle_rtt_is_the_median_of_five():
    out = parse_ping(text("ping-idle.txt"))
    assert out.transmitted == 5
    # 1.62 (the WireGuard handshake), 0.268, 0.187, 0.194, 0.239 -> median 0.239
    assert idle_metrics(out) == {"rtt.idle_ms": 0.239}
    v6 = parse_ping(text("ping-idle-v6.txt"))
    assert [r.seq for r in v6.replies] == [1, 2, 3, 4, 5]


def test_replies_and_losses_of_the_htb_trial():
    out = parse_ping(text("ping-loaded-htb.txt"))
    assert out.transmitted == 28
    assert len(out.replies) == 16
    first = out.replies[0]
    assert (first.seq, first.at, first.rtt_ms) == (1, 1795246175.715441, 1.81)


def test_only_replies_inside_the_window_count():
    # Window 1795246176.212 .. 178.253: replies seq 6, 7, 10, 15, 19, 20, 21, 24 arrive
    # in it (seq 5 at 176.127 before, seq 26 at 178.311 after). Their RTTs sorted:
    # 5.02 6.86 7.12 8.87 9.78 12.1 12.1 15.0
    m = loaded("htb")
    assert m["rtt.samples"] == 8
    assert m["rtt.loaded_ms"] == pytest.approx((8.87 + 9.78) / 2)  # 9.325
    # p95: rank (8 - 1) * 0.95 = 6.65 -> 12.1 + (15.0 - 12.1) * 0.65 = 13.985
    assert m["rtt.loaded_p95_ms"] == pytest.approx(13.985)
    assert m["rtt.loaded_max_ms"] == 15.0
    # 28 sent, 16 replied: the 12 unanswered (8, 9, 11-14, 16-18, 22, 23, 25) were all
    # sent inside the window; the slowest reply took 15 ms, so each waited its
    # patience of max(0.1, 2 x 0.015) = 0.1 s before ping stopped.
    assert m["rtt.lost"] == 12


def test_a_request_too_young_when_ping_stops_is_not_lost():
    _, end = window("htb")
    # Seq 25 was sent at about 178.2065 (seq 24's send time 178.1065 + 0.1 s); with ping
    # stopped at the window's end (178.2535) it had waited less than its 0.1 s.
    assert loaded("htb", stopped_at=end)["rtt.lost"] == 11


def test_bufferbloat_loaded_rtt_exceeds_idle():
    m = loaded("bloat")
    idle_before = [0.060, 0.049, 0.048, 0.039, 0.057]  # seq 1-5, before the traffic
    assert m["rtt.loaded_ms"] > 50 * max(idle_before)
    assert m["rtt.lost"] == 0
    # Window 180.672 .. 182.720 (2.05 s at one request per 0.1 s): the replies to seq 6
    # (arrived 180.701) to seq 26 (182.715), 21 of them.
    assert m["rtt.samples"] == 21


def test_no_reply_in_the_window_leaves_the_times_absent():
    start, end = window("htb")
    m = loaded("htb", stopped_at=end + 5)
    late = loaded_metrics(
        parse_ping(text("ping-loaded-htb.txt")),
        (end + 1, end + 2),  # after the last request: nothing sent, nothing received
        interval=0.1,
        first_sent=start - 0.5,
        stopped_at=end + 5,
    )
    assert late == {"rtt.samples": 0, "rtt.lost": 0}
    assert m["rtt.samples"] == 8


def test_patience_is_twice_the_slowest_reply_within_bounds():
    assert patience(parse_ping(text("ping-loaded-htb.txt"))) == 0.1  # 2 x 15 ms < 0.1 s
    assert patience(parse_ping(text("ping-loaded-bloat.txt"))) == 0.1  # 2 x 19.6 ms


def test_percentile_interpolates_between_ranks():
    assert percentile([1.0], 95) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)


def test_output_cut_short_is_a_lab_error():
    cut = "\n".join(text("ping-loaded-htb.txt").splitlines()[:5])
    with pytest.raises(LabError, match="ping printed no summary"):
        parse_ping(cut)
