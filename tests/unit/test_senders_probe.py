"""The senders' own evidence (tunnelbench.probes.senders): their congestion windows read
from /proc/net/tcp, and the steadiness rule held to them, on real captured readings.
Captured on this machine's 6.18 kernel in the client's namespace of a lab running four
cubic streams through wireguard-go (road-warrior, a fixed warm-up of 0 and a 10 s
window): two streams at their bound from the first second, two growing their windows
with nothing lost for 7.5 s, then all four bound."""

import json
import socket
import struct
from pathlib import Path

import pytest

from tunnelbench.analysis.steadiness import (
    SETTLE_SAMPLES,
    QueueReading,
    QueueSeries,
    first_drop,
    queue_judged,
    queue_window,
    window_rising,
)
from tunnelbench.errors import LabError
from tunnelbench.probes.backlog import from_raw
from tunnelbench.probes.senders import parse_recoveries, reading, window_metrics, windows
from tunnelbench.system.sockdiag import open_here, parse

FIXTURES = Path(__file__).parent.parent / "fixtures" / "steadiness"
DURATION = 3


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def _series() -> tuple[QueueSeries, tuple[float, float] | None]:
    return from_raw(json.loads(_text("senders-wireguard-go-4streams.json")))


def _dump() -> bytes:
    return (FIXTURES / "sockdiag-wireguard-go-4streams.bin").read_bytes()


def test_the_kernel_s_answer_gives_each_established_socket_s_window_and_write_queue():
    # four data streams and their four iperf3 control connections (13 segments, nothing
    # queued); the answer's last message says it is done
    sockets, done = parse(_dump())
    assert done
    assert [s.cwnd for s in sockets] == [13, 3019, 13, 320, 13, 2928, 13, 607]
    assert [s.write_queue for s in sockets if s.cwnd > 13] == [
        3_289_200,
        1_328_328,
        2_646_240,
        2_798_928,
    ]
    assert windows(sockets) == (6926, 10_062_696)
    # the answer read in two pieces: the dump goes on after the first
    first, done = parse(_dump()[:-20])
    assert first == sockets and not done


def test_an_error_from_the_kernel_is_raised():
    error = struct.pack("=IHHIIi", 36, 2, 0, 1, 0, -13) + bytes(16)  # NLMSG_ERROR: EACCES
    with pytest.raises(OSError, match="Permission denied"):
        parse(error)


def test_the_kernel_is_asked_for_a_connection_this_test_opened_on_loopback():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                mine = client.getsockname()[1]
                asked = open_here()
                try:
                    found = asked.established()
                    assert "TcpExt:" in asked.netstat()
                finally:
                    asked.close()
    ours = {(s.local_port, s.remote_port): s for s in found}
    assert set(ours) >= {(mine, port), (port, mine)}
    assert ours[(mine, port)].cwnd >= 10 and ours[(mine, port)].write_queue == 0


def test_the_loss_recoveries_are_the_namespace_s_recoveries_and_timeouts():
    assert parse_recoveries(_text("proc-net-netstat-wireguard-go-4streams.txt")) == 0
    # this machine's own namespace: 5 retransmission timeouts, no recovery
    assert parse_recoveries(_text("proc-net-netstat-host.txt")) == 5
    with pytest.raises(LabError, match="TcpExt"):
        parse_recoveries("Ip: Forwarding\nIp: 1\n")


def test_one_reading_is_a_queue_of_bytes_windows_and_recoveries():
    sockets, _ = parse(_dump())
    found = reading(sockets, _text("proc-net-netstat-wireguard-go-4streams.txt"))
    assert found == {"backlog_bytes": 10_062_696, "backlog_packets": 6926, "drops": 0}


def test_growing_windows_with_nothing_lost_keep_the_warm_up_going_until_they_are_bound():
    series, _ = _series()
    for now in (1.0, 3.0, 5.0, 7.0):
        found = queue_judged(series, now=now, stretch=0.5, duration_s=DURATION)
        assert found is not None and not found[0], now
        assert found[1].startswith("the client's TCP senders still grew their windows over 0.5 s")
        assert found[1].endswith("segments, no loss yet)")
    # bound from 7.5 s: the windows say nothing more, and never that a queue stands
    for now in (8.0, 9.0, 10.0):
        assert queue_judged(series, now=now, stretch=0.5, duration_s=DURATION) is None


def test_a_loss_ends_the_filling_the_windows_then_cycle():
    series, _ = _series()
    lost = {
        name: [QueueReading(r.at, r.backlog_bytes, r.backlog_packets, r.drops + (r.at > 0.25))
               for r in readings]
        for name, readings in series.items()
    }  # fmt: skip
    assert queue_judged(lost, now=3.0, stretch=0.5, duration_s=DURATION) is None
    window = queue_window("client.cwnd", lost["client.cwnd"], (0.3, 3.3), DURATION)
    assert window is not None and not window.filling


def test_a_window_opened_while_they_grew_is_flagged_and_one_opened_after_is_not():
    series, window = _series()
    assert window is not None
    metrics = window_metrics(series, window, 10)  # the captured trial's 10 s window
    assert metrics["tcp.client.cwnd.window_filling"] == 1
    assert metrics["tcp.server.cwnd.window_filling"] == 0  # the receiver sends no data
    (flag,) = window_rising(metrics)
    assert flag == (
        "not steady: the client's TCP senders still grew their windows across the window"
        " (5,782 → 12,044 segments, no loss yet; lengthen traffic.warmup)"
    )
    late = window_metrics(series, (7.5, 10.5), DURATION)
    assert late["tcp.client.cwnd.window_first"] == late["tcp.client.cwnd.window_last"] == 12078
    assert window_rising(late) == ()
    found = queue_window("client.cwnd", series["client.cwnd"], (7.5, 10.5), DURATION)
    assert found is not None and not found.standing  # windows never settle a trial


def test_where_the_wan_queue_is_watched_its_drops_are_the_senders_losses():
    """A retransmission timeout that a stalled guest fired with nothing lost (its FIFO
    never dropped) does not end the fill; the FIFO's first drop does."""
    series, _ = _series()
    recovered = [
        QueueReading(r.at, r.backlog_bytes, r.backlog_packets, r.drops + (r.at > 0.25))
        for r in series["client.cwnd"]
    ]
    fifo = [QueueReading(r.at, 150_000, 100, 0) for r in recovered]
    found = queue_judged(
        {"client.cwnd": recovered, "client.wan": fifo}, now=3.0, stretch=0.5, duration_s=DURATION
    )
    assert found is not None and not found[0]
    assert found[1].startswith("the client's TCP senders still grew their windows")
    overflowed = [QueueReading(r.at, 150_000, 100, int(r.at > 2.0)) for r in recovered]
    found = queue_judged(
        {"client.cwnd": recovered, "client.wan": overflowed},
        now=3.0, stretch=0.5, duration_s=DURATION,
    )  # fmt: skip
    assert found == (True, "the client.wan queue overflowed (1 drops), holding 150 kB")


def test_cubic_creeping_near_its_last_maximum_is_a_queue_still_filling():
    """A Debian guest (TCG), a 700 kB FIFO at 20 Mbit/s behind 10 ms, one cubic stream:
    a retransmission timeout the stalled guest fired (undone: nothing was lost, the FIFO
    never dropped) left the window at its maximum, 283 segments, where cubic grows it
    slowly. The FIFO stood at about 350 kB from 4.7 s to 7.8 s; the warm-up ended there
    (a floor of 10 segments read 286 → 290 as not growing) and the loaded round trip
    read 171 ms where the full queue holds 301. The windows crept on, and grew faster
    from 8 s, the FIFO filling behind them (418 kB at 9.9 s)."""
    data = json.loads(_text("guest-fifo-700kB-cubic-plateau.json"))
    queues, _ = from_raw(data["qdisc"])
    windows_, _ = from_raw(data["cwnd"])
    series = dict(queues) | dict(windows_)
    stretch = 1.7  # ten loaded round trips
    for now in (6.2, 6.8, 7.5, 7.8, 8.5, 9.5):
        found = queue_judged(series, now=now, stretch=stretch, duration_s=DURATION)
        assert found is not None and not found[0], (now, found)
        assert found[1].startswith("the client's TCP senders still grew their windows"), found


def test_a_queue_read_too_thinly_for_a_stretch_is_judged_over_its_last_readings():
    """A Debian guest (TCG), a 700 kB FIFO at 20 Mbit/s behind 10 ms, one cubic stream,
    the first trial in a freshly built lab: the guest read its queues every 0.15-0.3 s.
    The window opened 0.33 s into the traffic; the first half second after it held 2 of
    the FIFO's readings and 4 of the windows', both were passed over, and the round trip
    and rate called the path steady. The FIFO held 90-129 kB of its 700 kB all window,
    never dropped, and the windows grew from 121 to 134 segments: the loaded round trip
    read 68.7 ms where the full queue holds 301 (the same plan's trials that did fill it
    read 246-253 ms). Judged over their last five readings, neither queue ever calls
    that path steady."""
    data = json.loads(_text("guest-fifo-700kB-thin-readings.json"))
    queues, window = from_raw(data["qdisc"])
    windows_, _ = from_raw(data["cwnd"])
    series = dict(queues) | dict(windows_)
    assert window is not None
    begin, end = window
    assert first_drop(series["client.wan"]) is None
    stretch = 0.7  # the trial's own: ten loaded round trips
    # The old rule's blind spot: too few readings in the stretch after the window opened.
    thin = [r for r in series["client.wan"] if begin <= r.at <= begin + stretch]
    assert len(thin) < SETTLE_SAMPLES
    moments = [round(begin + stretch + k / 10, 2) for k in range(int((end - begin) * 10) - 6)]
    verdicts = []
    for now in moments:
        live = {name: [r for r in found if r.at <= now] for name, found in series.items()}
        found = queue_judged(live, now=now, stretch=stretch, duration_s=DURATION, since=begin)
        assert found is not None and found[0] is not True, (now, found)
        verdicts.append(found)
    # Where the old rule ended the warm-up, the windows say the queue still fills.
    assert verdicts[0][0] is False and "still grew their windows" in verdicts[0][1]
    # Half a second after the window opened, four readings of the windows and two of
    # the FIFO: the old rule passed both over (and the round trip judged); now they wait.
    now = begin + 0.5
    live = {name: [r for r in found if r.at <= now] for name, found in series.items()}
    found = queue_judged(live, now=now, stretch=0.5, duration_s=DURATION, since=begin)
    assert found == (None, "the client.cwnd queue gave fewer than 5 readings yet")


def test_windows_that_only_rise_are_a_queue_still_filling_however_noisy_the_fifo():
    """The same guest, FIFO and plan, the next run: the windows rose from 75 to 205
    segments over 8.6 s with no fall and no drop. At 9.97 s a 0.7 s stretch read 114,
    117, 117, 117, 118, 118 segments (a step, then a plateau: no significant slope) and
    the FIFO's backlog swung between 69 and 106 kB, which called the path steady with
    89 kB of its 700 queued; the loaded round trip read 77 ms. Windows that only rise
    hold the warm-up from the first second to the end of the readings."""
    data = json.loads(_text("guest-fifo-700kB-windows-climbing.json"))
    queues, window = from_raw(data["qdisc"])
    windows_, _ = from_raw(data["cwnd"])
    series = dict(queues) | dict(windows_)
    assert window is not None and first_drop(series["client.wan"]) is None
    stretch = 0.7  # the trial's own: ten loaded round trips
    ended = 9.97  # where the trial's warm-up ended
    moments = sorted([ended] + [round(6.0 + k / 10, 2) for k in range(int((13.3 - 6.0) * 10))])
    for now in moments:
        live = {name: [r for r in found if r.at <= now] for name, found in series.items()}
        found = queue_judged(live, now=now, stretch=stretch, duration_s=DURATION, since=4.9)
        assert found is not None and found[0] is False, (now, found)
        if now == ended:
            assert found[1].startswith("the client's TCP senders still grew their windows")
