"""Reading iperf3's JSON output (``-J --get-server-output``), as 3.12 writes it.

Goodput is what the receivers counted over the measured window: the bytes of their
intervals in it over those intervals' own length. Intervals are taken from whichever
side received: the server's report for upload, the client's for download, both for
bidirectional tests; TCP retransmits from the sending side's intervals.

Not from the end summary (``end.sum_received``): 3.12 divides its bytes by the server's
elapsed time, which neither ends with the sender nor always covers the intervals. In a
TCG guest it read 5% low (2.599 Mbit/s: 0.13 s of idle after the sender stopped were
counted, where the intervals read 2.729) and 3.8% high (its 1.93 s were shorter than the
2.00 s of intervals holding its bytes); over the 20 cases of one kernel suite it spread
twice as wide (sd 2.1% of the ceiling, against 1.1% for the intervals).

A window need not be the client's own test: when several clients (one per stream) start
at different moments, only a window in which all of them ran may be summed
(:data:`WINDOW_KEY`).

UDP loss and jitter are the receiving side's own figures. For upload that is the
server's report (``server_output_json``): 3.12's client-side upload summary adds the
loss of the omitted warm-up to the count, and its ``lost_percent`` uses a different
packet count. The percentage is therefore computed here, from the receiver's lost and
expected (``packets``) counts.
"""

from dataclasses import dataclass, field
from typing import Any

from tunnelbench.errors import LabError


@dataclass(frozen=True)
class UdpReceived:
    """One direction of a UDP test as its receiver saw it (warm-up excluded)."""

    lost_packets: int
    packets: int  # packets the receiver expected: received plus lost
    jitter_ms: float


@dataclass
class ProcessMeasurement:
    upload_bps: float | None
    download_bps: float | None
    retransmits: int | None
    intervals_bps: list[float]
    udp: list[UdpReceived] = field(default_factory=list)  # one per direction; empty for TCP
    congestion: str | None = None  # the TCP sender's congestion control
    window_s: float | None = None  # the receivers' intervals counted, shortest direction
    #: Goodput in each 0.1 s of the window, where the receivers reported that often (a
    #: common window's ``-i 0.1``); empty otherwise.
    fine_bps: list[float] = field(default_factory=list)


def protocol(doc: dict[str, Any]) -> str:
    """ "TCP" or "UDP", as the test ran."""
    return str(doc.get("start", {}).get("test_start", {}).get("protocol", "TCP")).upper()


def udp_received(doc: dict[str, Any]) -> list[UdpReceived]:
    """Loss and jitter of each direction of a UDP test, from its receiver's report."""
    end = doc.get("end") or {}
    reverse = bool(doc.get("start", {}).get("test_start", {}).get("reverse", 0))
    summaries = []
    if "sum_received" in end:
        if reverse:  # download: the client received
            summaries.append(end["sum_received"])
        else:  # upload: the server received, and says so in its own report
            server_end = (doc.get("server_output_json") or {}).get("end") or {}
            if "sum_received" not in server_end:
                raise LabError(
                    "iperf3 UDP upload output lacks the server's report "
                    "(server_output_json.end.sum_received; run with --get-server-output)"
                )
            summaries.append(server_end["sum_received"])
    if "sum_received_bidir_reverse" in end:  # the client received the reverse half
        summaries.append(end["sum_received_bidir_reverse"])
    return [
        UdpReceived(
            lost_packets=int(s["lost_packets"]),
            packets=int(s["packets"]),
            jitter_ms=float(s["jitter_ms"]),
        )
        for s in summaries
    ]


def lost_percent(received: list[UdpReceived]) -> float | None:
    """Lost packets as percent of the packets the receivers expected; None if none were."""
    expected = sum(r.packets for r in received)
    return 100.0 * sum(r.lost_packets for r in received) / expected if expected else None


def version(doc: dict[str, Any]) -> str:
    return str(doc.get("start", {}).get("version", "unknown"))


@dataclass(frozen=True)
class _Interval:
    """One interval of one report: its place on the test's timeline (s) and its count."""

    start: float
    seconds: float
    bytes: int
    retransmits: int | None


def _timeline(doc: dict[str, Any], key: str, *, sender: bool) -> list[_Interval]:
    """The non-omitted intervals of one summary (``sum`` or ``sum_bidir_reverse``) of
    one report, placed by their accumulated lengths.

    iperf3 3.12 restarts the clock at the end of ``--omit``, and the first interval after
    it carries a wrong ``start``. With ``-O 2`` or more its ``seconds`` are sometimes
    wrong too: they take in the last omitted second (2.002 s for one second's bytes, and
    the window's goodput read half the link's), while its ``end`` is on the restarted
    clock. A ``seconds`` longer than the time since the previous interval's ``end`` by
    :data:`OMITTED_SLIP_S` or more is that; the interval is then as long as that time."""
    placed: list[_Interval] = []
    at = 0.0
    previous_end = 0.0
    for interval in doc.get("intervals", []):
        summary = interval.get(key)
        if not summary or bool(summary["sender"]) != sender or summary.get("omitted", False):
            continue
        seconds, end = float(summary["seconds"]), float(summary["end"])
        if 0 < end - previous_end <= seconds - OMITTED_SLIP_S:
            seconds = end - previous_end
        previous_end = end
        retransmits = summary.get("retransmits")
        placed.append(_Interval(at, seconds, int(summary["bytes"]), retransmits))
        at += seconds
    return placed


#: How much longer than its place on the restarted clock an interval's ``seconds`` must be
#: to have taken in an omitted second (:func:`_timeline`): half the 1 s interval a client
#: measured over its own test reports in. Seen: 1.0 s more; a guest's scheduling, 0.02 s.
OMITTED_SLIP_S = 0.5


def _within(intervals: list[_Interval], begin: float, end: float) -> list[_Interval]:
    """The intervals whose middle lies in [begin, end)."""
    return [i for i in intervals if begin <= i.start + i.seconds / 2 < end]


def _rate(intervals: list[_Interval]) -> float:
    seconds = sum(i.seconds for i in intervals)
    return 8.0 * sum(i.bytes for i in intervals) / seconds if seconds > 0 else 0.0


#: The key tunnelbench adds to a client's document measured over a common window:
#: ``{"offset_s": s}``, where that window begins on the client's measured timeline.
WINDOW_KEY = "tunnelbench_window"
#: The key tunnelbench adds to a client's document when it stopped the client (an "auto"
#: warm-up): ``true``; its server's own report is then its ``server_output_json``.
STOPPED_KEY = "tunnelbench_stopped"


Half = tuple[str, dict[str, Any], str, dict[str, Any], str]


def _halves(doc: dict[str, Any]) -> list[Half]:
    """Each direction of the test: (direction, receiving report, its summary key,
    sending report, its summary key)."""
    server = doc.get("server_output_json") or {}
    if not server.get("intervals"):
        raise LabError("iperf3 output lacks the server's intervals (run with --get-server-output)")
    reverse = bool(doc.get("start", {}).get("test_start", {}).get("reverse", 0))
    bidir = any("sum_bidir_reverse" in i for i in doc.get("intervals", []))
    halves: list[Half] = []
    if reverse:
        halves.append(("download", doc, "sum", server, "sum"))
    else:
        halves.append(("upload", server, "sum", doc, "sum"))
    if bidir:
        halves.append(("download", doc, "sum_bidir_reverse", server, "sum_bidir_reverse"))
    return halves


#: The receivers' short interval (s) for a client measured over a common window
#: (iperf3.WINDOW_INTERVAL_S is this).
FINE_S = 0.1


def interval_s(doc: dict[str, Any]) -> float:
    """How often the receivers reported: :data:`FINE_S` (``-i 0.1``) or 1 s."""
    _, receiver, key, _, _ = _halves(doc)[0]
    lengths = sorted(i.seconds for i in _timeline(receiver, key, sender=False))
    return 1.0 if not lengths or lengths[len(lengths) // 2] > 0.5 else FINE_S


def series(doc: dict[str, Any], duration: int, step: float) -> list[float]:
    """Goodput (bit/s) in each ``step`` of the window [offset, offset + duration), every
    direction summed: the receivers' intervals whose middle lies in it. A step shorter
    than the receivers' interval gives 0 where no interval's middle falls."""
    offset = float(doc.get(WINDOW_KEY, {}).get("offset_s", 0.0))
    count = round(duration / step)
    out = [0.0] * count
    for _, receiver, key, _, _ in _halves(doc):
        received = _within(_timeline(receiver, key, sender=False), offset, offset + duration)
        for n in range(count):
            out[n] += _rate(_within(received, offset + n * step, offset + (n + 1) * step))
    return out


def parse(doc: dict[str, Any], duration: int) -> ProcessMeasurement:
    """One client's measurement over [offset, offset + duration) s of its measured
    (non-omitted) test, ``offset`` read from :data:`WINDOW_KEY` (0 without it: the test's
    own window, after ``-O``), from its receivers' intervals. A client measured over a
    common window runs with short ``-i`` on both ends, so that the window's edges fall
    within a fraction of a second; one measured over its own test runs with ``-i 1``,
    whose edges are the window's.

    Goodput and the per-second series come from the receiving side's intervals (the
    server's report for upload, the client's for download), TCP retransmits from the
    sending side's. UDP loss and jitter are the receivers' summaries of the whole test.
    """
    if "error" in doc:
        raise LabError(f"iperf3: {doc['error']}")
    offset = float(doc.get(WINDOW_KEY, {}).get("offset_s", 0.0))
    end = offset + duration
    rates: dict[str, float] = {}
    counted: list[float] = []
    retransmits: list[int] = []
    for direction, receiver, key, sender, sender_key in _halves(doc):
        received = _within(_timeline(receiver, key, sender=False), offset, end)
        covered = sum(i.seconds for i in received)
        if covered < duration - 0.5:
            raise LabError(
                f"iperf3's {direction} report covers {covered:.1f} s of the window"
                f" {offset:.2f}-{end:.2f} s; expected {duration} s"
            )
        rates[direction] = rates.get(direction, 0.0) + _rate(received)
        counted.append(covered)
        sent = _within(_timeline(sender, sender_key, sender=True), offset, end)
        retransmits += [i.retransmits for i in sent if i.retransmits is not None]
    udp = protocol(doc) == "UDP"
    end_summary = doc.get("end") or {}
    return ProcessMeasurement(
        upload_bps=rates.get("upload"),
        download_bps=rates.get("download"),
        retransmits=None if udp or not retransmits else sum(retransmits),
        intervals_bps=series(doc, duration, 1.0),
        udp=udp_received(doc) if udp else [],
        congestion=end_summary.get("sender_tcp_congestion"),
        window_s=min(counted),
        fine_bps=series(doc, duration, FINE_S) if interval_s(doc) == FINE_S else [],
    )
