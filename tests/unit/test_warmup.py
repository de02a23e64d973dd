"""A warm-up that ends on evidence: the steadiness rule on the series it watches, the
client's command line, and a stopped iperf3 test's documents (real 3.12 output of a
client stopped with SIGINT 2.2 s into a 0.1 s-interval test, and its server's)."""

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tunnelbench.analysis.steadiness import rising, settle_seconds, settled, slope
from tunnelbench.errors import LabError
from tunnelbench.lab.host import NetnsHost
from tunnelbench.lab.state import LabState
from tunnelbench.model.plan import TrafficSettings
from tunnelbench.traffic import iperf3_json, warmup
from tunnelbench.traffic.iperf3 import _interrupted, client_argv

FIXTURES = Path(__file__).parent.parent / "fixtures" / "iperf3"
#: The fixtures are this machine's files: a namespace host reads them (namespace unused).
HERE = NetnsHost("unused", LabState("unused"))


def _series(
    start: float, per_s: float, noise: float, seconds: float = 2.0
) -> list[tuple[float, float]]:
    rng = random.Random(7)
    return [
        (k / 10, start + per_s * k / 10 + rng.gauss(0, noise)) for k in range(int(seconds * 10))
    ]


def _settled(
    rtt: list[tuple[float, float]], rate: list[tuple[float, float]], now: float = 1.9
) -> str | None:
    return settled(rtt, rate, now=now, since=0.0, duration_s=3)


def test_a_noiseless_trend_and_a_flat_series():
    assert slope([(0, 1.0), (1, 2.0), (2, 3.0)]) == (1.0, float("inf"))
    assert slope([(0, 5.0), (1, 5.0), (2, 5.0)]) == (0.0, 0.0)
    assert slope([(0, 1.0), (0, 2.0), (0, 3.0)]) is None
    assert not rising([(0, 5.0), (1, 5.0), (2, 5.0)], 3, 1.0)
    assert rising([(0, 5.0), (1, 6.0), (2, 7.0)], 3, 1.0)
    assert not rising([(0, 7.0), (1, 6.0), (2, 5.0)], 3, 1.0)  # a queue draining


def test_a_fast_path_is_steady_after_the_shortest_stretch():
    flat_rtt, flat_rate = _series(0.06, 0, 0.01), _series(10e9, 0, 5e8)
    assert _settled(flat_rtt, flat_rate) == "RTT and goodput not rising over the last 0.5 s"
    assert _settled(flat_rtt, flat_rate, now=0.4) is None  # not yet half a second


def test_pings_read_late_are_judged_up_to_their_latest_reply():
    """A real client's ping output, read over SSH, ends 0.25 s before the clock: the last
    half second up to ``now`` holds 3 of its replies, the half second up to the latest
    reply 5. Pings a whole second old are not judged (the path may have changed)."""
    flat_rate = _series(10e9, 0, 5e8)
    lagging = [(t, v) for t, v in _series(0.06, 0, 0.01) if t <= 1.9 - 0.25]
    assert _settled(lagging, flat_rate) == "RTT and goodput not rising over the last 0.5 s"
    stale = [(t, v) for t, v in lagging if t <= 0.9]
    assert _settled(stale, flat_rate) is None


def test_a_sparse_series_is_judged_over_its_last_five_samples():
    """A real server's counters, read over SSH about 3 times a second, put 1-2 samples in
    the last half second: the stretch is widened to the last 5 (and a rise in them is
    still a rise); never to samples from before the traffic began."""
    sparse = [(t, v) for t, v in _series(10e9, 0, 5e8) if round(t * 10) % 3 == 0]
    flat_rtt = _series(0.06, 0, 0.01)
    assert _settled(flat_rtt, sparse) == "RTT and goodput not rising over the last 0.5 s"
    climbing = [(t, v) for t, v in _series(1e9, 2e9, 1e7) if round(t * 10) % 3 == 0]
    assert _settled(flat_rtt, climbing) is None
    assert settled(flat_rtt, sparse, now=1.9, since=1.0, duration_s=3) is None


def test_a_queue_still_filling_is_not_steady():
    """cubic filling a 600-packet FIFO at 30 Mbit/s: ~22 ms more RTT each second."""
    assert _settled(_series(150.0, 22.0, 1.0), _series(30e6, 0, 3e5)) is None


def test_the_1000_packet_fifo_of_the_queue_comparison_is_not_steady_while_it_fills():
    """The captured case: 4 flows through 1 Gbit/s, the FIFO of 1000 aggregates filling
    at ~7 ms a second (81.8 -> 102.5 ms over a 3 s window that an early end of the
    warm-up let through), with the pings' jitter."""
    filling = _series(75.0, 7.0, 1.5, seconds=3.0)
    assert settled(filling, _series(956e6, 0, 2e6, 3.0), now=2.9, since=0.0, duration_s=3) is None


def test_a_cpu_bound_paths_jitter_is_not_a_trend():
    """wireguard-go's loaded RTT jumps between 1 and 8 ms with no direction."""
    rng = random.Random(3)
    jumpy = [(k / 10, rng.uniform(1.0, 8.0)) for k in range(20)]
    assert _settled(jumpy, _series(3e9, 0, 3e8)) is not None


def test_a_long_path_is_judged_over_ten_round_trips():
    assert settle_seconds(None) == settle_seconds(0.05) == 0.5
    assert settle_seconds(200.0) == 2.0
    # At a 150 ms loaded RTT the stretch is 1.5 s: not judged before then.
    flat = _series(150.0, 0, 1.0)
    assert _settled(flat, _series(30e6, 0, 3e5), now=1.4) is None
    assert _settled(flat, _series(30e6, 0, 3e5), now=1.9) is not None


def test_an_auto_client_omits_nothing_and_runs_past_the_bound():
    argv = client_argv("iperf3", "198.18.0.2", 5201, TrafficSettings(duration=3), 1)
    assert argv[argv.index("-t") + 1] == "25"  # warmup_max 20 + 3 + the margin of 2
    assert argv[argv.index("-O") + 1] == "0"
    assert argv[argv.index("-i") + 1] == "0.1"
    fixed = client_argv("iperf3", "198.18.0.2", 5201, TrafficSettings(duration=3, warmup=1), 1)
    assert fixed[fixed.index("-O") + 1] == "1" and fixed[fixed.index("-i") + 1] == "1"


def _stopped(tmp_path: Path) -> dict[str, Any]:
    server = tmp_path / "server.json"
    server.write_text((FIXTURES / "stopped-upload-server.json").read_text())
    client = json.loads((FIXTURES / "stopped-upload-client.json").read_text())
    return _interrupted(client, HERE, server)


def test_a_stopped_client_is_measured_from_its_servers_own_report(tmp_path: Path):
    doc = _stopped(tmp_path)
    assert "error" not in doc and doc[iperf3_json.STOPPED_KEY] is True
    doc[iperf3_json.WINDOW_KEY] = {"offset_s": 0.5}
    measured = iperf3_json.parse(doc, 1)
    server = doc["server_output_json"]["intervals"]
    inside = [i["sum"] for i in server if 0.5 <= i["sum"]["start"] + 0.05 < 1.5]
    expected = 8 * sum(i["bytes"] for i in inside) / sum(i["seconds"] for i in inside)
    assert measured.upload_bps == pytest.approx(expected)
    assert len(inside) == 10


@pytest.mark.parametrize(
    "error",
    [
        "getsockopt - Bad file descriptor",
        "unable to write to stream socket: Broken pipe",
        "unable to write to stream socket: Connection reset by peer",
    ],
)
def test_a_server_that_met_the_stop_on_a_closed_socket_keeps_its_intervals(
    tmp_path: Path, error: str
):
    """A sending server (4 streams, download) reported the stop as "getsockopt - Bad file
    descriptor" in CI, and once as a write to the socket the stopped client had closed;
    its intervals are what it measured, and the window must still lie within them."""
    server = tmp_path / "server.json"
    report = json.loads((FIXTURES / "stopped-upload-server.json").read_text())
    server.write_text(json.dumps(report | {"error": error}))
    client = json.loads((FIXTURES / "stopped-upload-client.json").read_text())
    doc = _interrupted(client, HERE, server)
    assert "error" not in doc["server_output_json"] and doc[iperf3_json.STOPPED_KEY] is True
    doc[iperf3_json.WINDOW_KEY] = {"offset_s": 0.5}
    assert (iperf3_json.parse(doc, 1).upload_bps or 0) > 0
    cut_short = json.loads(json.dumps(report))
    cut_short["intervals"] = cut_short["intervals"][:5]  # it ended 0.5 s in
    server.write_text(json.dumps(cut_short | {"error": error}))
    client = json.loads((FIXTURES / "stopped-upload-client.json").read_text())
    doc = _interrupted(client, HERE, server)
    doc[iperf3_json.WINDOW_KEY] = {"offset_s": 0.5}
    with pytest.raises(LabError, match="covers"):
        iperf3_json.parse(doc, 1)


def test_any_other_end_of_a_client_is_the_trials_error(tmp_path: Path):
    server = tmp_path / "server.json"
    server.write_text((FIXTURES / "stopped-upload-server.json").read_text())
    client = json.loads((FIXTURES / "stopped-upload-client.json").read_text())
    client["error"] = "unable to send control message: Bad file descriptor"
    with pytest.raises(LabError, match="iperf3: unable to send control message"):
        _interrupted(client, HERE, server)
    client = json.loads((FIXTURES / "stopped-upload-client.json").read_text())
    server.write_text(json.dumps({"intervals": []}))  # a server that ran to its end
    with pytest.raises(LabError, match="iperf3 server: it did not see the stop"):
        _interrupted(client, HERE, server)


#: /proc/net/dev's form (its heading's two lines; fields cut after the transmit bytes).
DEV = (
    "Inter-|   Receive                            |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes packets\n"
    "    lo: 9000000     100    0    0    0     0          0         0  9000000  100\n"
    "  eth0:    1500      10    0    0    0     0          0         0     2500   20\n"
    "tb-wg0:      70       1    0    0    0     0          0         0       30    1\n"
)


def test_the_rate_counts_every_link_but_loopback_both_ways():
    assert warmup.link_bytes(DEV) == 1500 + 2500 + 70 + 30
    assert warmup.link_bytes(Path("/proc/net/dev").read_text()) >= 0  # this kernel's form
