"""The steadiness rule held to the bottleneck queue's own evidence, on real captured
sequences: the WAN queues' backlog and drops read every 0.1 s (tunnelbench.probes.backlog),
the loaded pings and the receivers' 0.1 s intervals of one trial, on one timeline
(seconds from the first backlog reading). Captured with the plan ``slow-fifo.toml`` beside
the fixtures (road-warrior, no tunnel, tbf with a pfifo leaf, cubic) on this machine's
6.18 kernel: a FIFO on a 30 Mbit/s link that cubic fills over 2.5 s (wire packets) and
7.5 s (GRO aggregates) before its first drop, and queues bounded by their senders'
sockets that stand still with no drop at all."""

import json
from pathlib import Path
from typing import Any

from tunnelbench.analysis.steadiness import (
    QueueReading,
    QueueSeries,
    first_drop,
    judged,
    queue_judged,
    queue_window,
    settle_seconds,
    unsteady,
    window_rising,
)
from tunnelbench.probes.backlog import from_raw
from tunnelbench.probes.qdisc import window_metrics

FIXTURES = Path(__file__).parent.parent / "fixtures" / "steadiness"
DURATION = 3


def _load(name: str) -> tuple[dict[str, Any], QueueSeries]:
    data = json.loads((FIXTURES / name).read_text())
    series, _ = from_raw(data)
    return data, series


def _signals(data: dict[str, Any]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    return [(t, v) for t, v in data["rtt_ms"]], [(t, v) for t, v in data["rate_bps"]]


def _moments(start: float, end: float) -> list[float]:
    """Every 0.1 s from ``start`` to ``end``: the warm-up's pace."""
    return [round(start + k / 10, 1) for k in range(round((end - start) * 10) + 1)]


def test_a_fifo_still_filling_holds_the_warmup_until_it_overflows():
    """Wire packets: the gateway's queue grows by ~125 packets a second from the start
    to its first drop at 2.5 s. Every stretch before it is judged still filling, by the
    backlog itself; from the first drop on the queue is full, and steady."""
    data, queues = _load("fifo-30mbit-300-download-wire.json")
    rtt, rates = _signals(data)
    dropped = first_drop(queues["gw.wan"])
    assert dropped is not None and 2.4 < dropped < 2.6
    for now in _moments(0.6, dropped - 0.1):
        found = judged(rtt, rates, now=now, since=0.1, duration_s=DURATION, queues=queues)
        assert found is not None and not found[0], now
        assert "the gw.wan queue still filled" in found[1]
        assert "no drop yet" in found[1]
    for now in _moments(dropped + 0.1, data["window"][1]):
        found = judged(rtt, rates, now=now, since=0.1, duration_s=DURATION, queues=queues)
        assert found is not None and found[0], now
        assert "the gw.wan queue overflowed" in found[1]


def test_a_slow_fill_of_aggregates_is_not_steady_until_its_first_drop():
    """GRO aggregates of 4-9 kB: 300 of them take cubic 7.5 s to fill, and their count
    wobbles (29-64 packets in the first 2 s) while their bytes climb."""
    data, queues = _load("fifo-30mbit-300-download-aggregates.json")
    rtt, rates = _signals(data)
    dropped = first_drop(queues["gw.wan"])
    assert dropped is not None and 7.4 < dropped < 7.6
    verdicts = [
        judged(rtt, rates, now=now, since=0.1, duration_s=DURATION, queues=queues)
        for now in _moments(0.6, dropped - 0.1)
    ]
    assert all(v is not None and not v[0] for v in verdicts)
    # The stretch judged grows with the round trip (ten of them): 3 s near the end.
    assert settle_seconds(rtt[-1][1]) >= 3


def test_a_window_placed_in_the_fill_calls_itself_rising_and_is_flagged():
    """Windows opened before the queue first overflowed (as a warm-up that judged the
    round trip too early would open them) are filling; the window the warm-up chose,
    opened at the first drop, is not, though its round trip climbs with cubic's regrowth
    after that drop (93 → 116 ms): the loss cycle, not a transient."""
    _, queues = _load("fifo-30mbit-300-download-aggregates.json")
    for begin in (0.5, 2.0, 4.0):
        window = (begin, begin + DURATION)
        found = queue_window("gw.wan", queues["gw.wan"], window, DURATION)
        assert found is not None and found.filling and found.standing
        metrics = window_metrics(queues, window, DURATION)
        assert metrics["qdisc.gw.wan.window_filling"] == 1
        (flag,) = window_rising(metrics)
        assert flag.startswith("not steady: the gw.wan queue still filled across the window (")
        assert flag.endswith("no drop yet; lengthen traffic.warmup)")
        assert unsteady(metrics | {"warmup.steady": 1.0}) == (flag,)
    wire, wire_queues = _load("fifo-30mbit-300-download-wire.json")
    chosen = tuple(wire["window"])
    metrics = window_metrics(wire_queues, chosen, DURATION)
    assert metrics["qdisc.gw.wan.window_filling"] == 0
    assert metrics["qdisc.gw.wan.window_standing"] == 1
    assert wire["metrics"]["rtt.loaded_first_ms"] < wire["metrics"]["rtt.loaded_last_ms"]
    assert window_rising(metrics | wire["metrics"]) == ()


def test_a_flat_standing_queue_with_no_drop_is_steady():
    """Four senders into the client's own 1 Gbit/s queue: their sockets bound it at 11-14
    aggregates (749-886 kB, one step up at 1.5 s), and it never drops. The queue's
    evidence ends the warm-up within half a second and the window stands."""
    data, queues = _load("fifo-1gbit-1000-upload-4streams.json")
    client = queues["client.wan"]
    assert first_drop(client) is None
    found = queue_judged(queues, now=0.8, stretch=0.5, duration_s=DURATION)
    assert found == (True, "the client.wan queue held 749 kB, not growing, over 0.5 s")
    for now in _moments(2.1, 3.3):
        found = queue_judged(queues, now=now, stretch=0.5, duration_s=DURATION)
        assert found is not None and found[0], now
    window = queue_window("client.wan", client, tuple(data["window"]), DURATION)
    assert window is not None and window.standing and not window.filling
    assert window_rising(window_metrics(queues, tuple(data["window"]), DURATION)) == ()


def test_a_queue_bounded_by_its_sender_is_steady_where_the_round_trip_saws():
    """One sender into its own 30 Mbit/s queue: its socket holds it at 60-90 packets with
    no drop, and the pings saw between 23 and 41 ms. The queue held a standing backlog
    and did not grow: steady."""
    data, queues = _load("fifo-30mbit-300-upload-wire.json")
    rtt, rates = _signals(data)
    for now in _moments(1.4, data["window"][1]):
        found = judged(rtt, rates, now=now, since=0.1, duration_s=DURATION, queues=queues)
        assert found is not None and found[0], now
    assert window_rising(window_metrics(queues, tuple(data["window"]), DURATION)) == ()


def test_no_queue_leaves_the_round_trip_and_rate_to_judge():
    """An empty queue (the other direction's, holding only acknowledgements) is no
    evidence either way."""
    _, queues = _load("fifo-30mbit-300-download-wire.json")
    idle = {"client.wan": queues["client.wan"]}
    assert queue_judged(idle, now=2.0, stretch=0.5, duration_s=DURATION) is None
    # Too few readings yet is not "no queue": the verdict waits for them.
    too_few = {"gw.wan": [QueueReading(0.0, 0, 0, 0), QueueReading(0.1, 1514, 1, 0)]}
    found = queue_judged(too_few, now=0.1, stretch=0.5, duration_s=DURATION)
    assert found == (None, "the gw.wan queue gave fewer than 5 readings yet")
