"""The warm-up's watch over time (traffic/warmup): the window opens on trial a tenth of a
second after the traffic connected and stands when its own first stretch is steady; one
whose first stretch still rose is dropped and opened again once the path settled, as is
one too short to be judged; the bound ends a watch with no evidence; a step up after the
first stretch is not foreseen (the window's thirds flag it afterwards). The
watch, its clock and the steadiness rule are the real ones; the server's link counters
are a known rate's, read from a /proc/net/dev text as the real file is laid out."""

import re
import time
from collections.abc import Callable
from typing import cast

from tunnelbench.lab.host import Host
from tunnelbench.traffic.base import PathSignals, no_reason
from tunnelbench.traffic.warmup import LEAD_S, watch

HEADER = (
    "Inter-|   Receive                            |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n"
)


class Counters:
    """A server whose one link has carried ``carried(t)`` bits t seconds after ``t0``."""

    def __init__(self, t0: float, carried: Callable[[float], float]) -> None:
        self.t0, self.carried = t0, carried

    def read_net(self, files: list[str]) -> str:
        assert files == ["dev"]
        received = int(self.carried(time.monotonic() - self.t0) / 8)
        fields = [received] + [0] * 7 + [0] + [0] * 7
        return (
            HEADER
            + "  lo: 99 0 0 0 0 0 0 0 99 0 0 0 0 0 0 0\n"
            + ("  eth0: " + " ".join(map(str, fields)) + "\n")
        )


def flat(bps: float) -> Callable[[float], float]:
    return lambda t: bps * t


def step(low: float, high: float, at: float) -> Callable[[float], float]:
    return lambda t: low * min(t, at) + high * max(0.0, t - at)


def ramp(start: float, top: float, until: float) -> Callable[[float], float]:
    """From ``start`` bit/s rising evenly to ``top`` by ``until`` s, then flat."""

    def carried(t: float) -> float:
        rising = min(t, until)
        bits = start * rising + (top - start) * rising**2 / (2 * until)
        return bits + top * max(0.0, t - until)

    return carried


def pings(t0: float, ms: float) -> PathSignals:
    """A reply every 0.1 s since ``t0``, each ``ms`` long."""

    def so_far() -> list[tuple[float, float]]:
        count = int((time.monotonic() - t0) / 0.1)
        return [(t0 + 0.1 * k, ms) for k in range(1, count + 1)]

    return PathSignals(so_far)


def watched(
    carried: Callable[[float], float],
    rtt_ms: float | None,
    duration_s: float = 1.0,
    bound_s: float = 5,
):
    """The window's begins as the watch opened them, and how it ended."""
    t0 = time.monotonic()
    opened: list[float] = []
    ended = watch(
        t0,
        bound_s=bound_s,
        duration_s=duration_s,
        server=cast(Host, Counters(t0, carried)),
        signals=pings(t0, rtt_ms) if rtt_ms else PathSignals(lambda: []),
        running=lambda: None,
        stop_reason=no_reason,
        open_window=opened.append,
    )
    assert opened and opened[-1] == ended.begin, (opened, ended)
    return t0, opened, ended


def test_a_steady_path_keeps_the_window_opened_on_trial():
    _, opened, ended = watched(flat(10e9), 0.05)
    assert len(opened) == 1
    # Known once its first half second has passed: the window runs on meanwhile.
    assert 0.5 <= time.monotonic() - ended.begin < 1.0
    assert ended.steady and LEAD_S <= ended.seconds < LEAD_S + 0.3, ended.seconds
    # Judged once its first half second had passed (to a tick of the watch).
    assert re.fullmatch(
        r"RTT and goodput not rising over 0\.[5-9] s from the window's start", ended.reason
    )


def test_a_window_whose_first_stretch_still_rose_is_dropped_and_opened_again():
    """A sender ramping from 1 to 3 Gbit/s over its first 0.8 s."""
    t0, opened, ended = watched(ramp(1e9, 3e9, 0.8), 0.05)
    assert len(opened) == 2 and opened[0] - t0 < LEAD_S + 0.3, opened
    # Opened again once the half second before it was (nearly all) past the ramp.
    assert ended.steady and ended.begin - t0 >= 0.8 + 0.3, ended.begin - t0
    assert re.match(r"the window opened at 0\.[123] s was dropped \(the goodput rose", ended.reason)
    assert ended.reason.endswith("RTT and goodput not rising over the last 0.5 s")


def test_a_step_up_after_the_first_stretch_is_not_foreseen():
    """A single stream at half its rate for its first second, then at all of it (the
    scheduler placing sender and receiver): the window's first half second is flat, so
    it stands; its thirds are held against each other once it has run."""
    _, opened, ended = watched(step(5e9, 10e9, 1.0), 0.05)
    assert len(opened) == 1 and ended.steady and ended.reason.endswith("from the window's start")


def test_a_window_shorter_than_ten_round_trips_is_dropped_unjudged():
    """A 100 ms round trip is judged over a second; the window is half of one."""
    t0, opened, ended = watched(flat(20e6), 100.0, duration_s=0.5)
    assert len(opened) == 2 and ended.steady and ended.begin - t0 >= 1.0
    assert re.fullmatch(
        r"the window opened at 0\.[123] s was dropped \(not judged in it\);"
        r" RTT and goodput not rising over the last 1\.0 s",
        ended.reason,
    ), ended.reason


def test_a_watch_with_no_pings_ends_at_its_bound_and_opens_the_window_there():
    _, opened, ended = watched(flat(10e9), None, bound_s=0.4)
    assert len(opened) == 2
    assert not ended.steady and 0.4 <= ended.seconds < 0.8
    assert ended.reason == "not steady within traffic.warmup_max (0.4 s)"
