"""Reading iperf3's JSON output (``-J --get-server-output``), as 3.12 writes it.

Goodput is what the receivers counted (``end.sum_received``, plus its ``_bidir_reverse``
twin), which already excludes the ``--omit`` warm-up. ``sum_received`` is the direction
the test names (client to server, or server to client with ``-R``); ``_bidir_reverse``
is the server-to-client half of a ``--bidir`` test. (The summaries' ``sender`` flags do not
say this for UDP, where ``sum_received`` is always marked ``sender: false``.)

Intervals are taken from whichever side received: the server's report for upload, the
client's for download, both for bidirectional tests.

:func:`parse_window` measures one process over a stated part of its test instead of its
whole test, from the intervals alone: when several clients (one per stream) start at
different moments, only a window in which all of them ran may be summed.

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


def protocol(doc: dict[str, Any]) -> str:
    """ "TCP" or "UDP", as the test ran."""
    return str(doc.get("start", {}).get("test_start", {}).get("protocol", "TCP")).upper()


def parse(doc: dict[str, Any], duration: int) -> ProcessMeasurement:
    """Measurements from one iperf3 client's JSON document."""
    if "error" in doc:
        raise LabError(f"iperf3: {doc['error']}")
    end = doc.get("end") or {}
    reverse = bool(doc.get("start", {}).get("test_start", {}).get("reverse", 0))
    udp = protocol(doc) == "UDP"
    upload = download = None
    if "sum_received" in end:
        rate = float(end["sum_received"]["bits_per_second"])
        if reverse:
            download = rate
        else:
            upload = rate
    if "sum_received_bidir_reverse" in end:
        download = float(end["sum_received_bidir_reverse"]["bits_per_second"])
    if upload is None and download is None:
        raise LabError("iperf3 output has no receiver summary (end.sum_received)")
    retransmits = [
        end[key]["retransmits"]
        for key in ("sum_sent", "sum_sent_bidir_reverse")
        if key in end and "retransmits" in end[key]
    ]
    return ProcessMeasurement(
        upload_bps=upload,
        download_bps=download,
        retransmits=sum(retransmits) if retransmits and not udp else None,
        intervals_bps=receiver_intervals(doc, duration),
        udp=udp_received(doc) if udp else [],
        congestion=end.get("sender_tcp_congestion"),
    )


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


def receiver_intervals(doc: dict[str, Any], duration: int) -> list[float]:
    """Goodput per interval as the receivers saw it, omitted warm-up intervals dropped.

    The server reports one more, partial interval after the test ends; only intervals
    that start within the test duration are kept.
    """
    reports = [doc.get("intervals", [])]
    if server := doc.get("server_output_json"):
        reports.append(server.get("intervals", []))
    series: list[float] = []
    for intervals in reports:
        index = 0
        for interval in intervals:
            received = [
                v
                for k, v in interval.items()
                if k.startswith("sum") and not v["sender"] and not v.get("omitted", False)
            ]
            if not received or received[0]["start"] >= duration - 0.5:
                continue
            if index == len(series):
                series.append(0.0)
            series[index] += sum(float(v["bits_per_second"]) for v in received)
            index += 1
    return series


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
    one report, placed by their accumulated lengths: iperf3 3.12 restarts the clock at
    the end of ``--omit`` and its first interval after it carries a wrong ``start``,
    but every interval's ``seconds`` is right."""
    placed: list[_Interval] = []
    at = 0.0
    for interval in doc.get("intervals", []):
        summary = interval.get(key)
        if not summary or bool(summary["sender"]) != sender or summary.get("omitted", False):
            continue
        seconds = float(summary["seconds"])
        retransmits = summary.get("retransmits")
        placed.append(_Interval(at, seconds, int(summary["bytes"]), retransmits))
        at += seconds
    return placed


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


def parse_window(doc: dict[str, Any], duration: int) -> ProcessMeasurement:
    """One client's measurement over [offset, offset + duration) s of its measured
    (non-omitted) test, ``offset`` read from :data:`WINDOW_KEY`, from its receivers'
    intervals (run with short ``-i`` on both ends so that the window's edges fall within
    a fraction of a second).

    Goodput and the per-second series come from the receiving side's intervals (the
    server's report for upload, the client's for download), TCP retransmits from the
    sending side's. UDP loss and jitter are the receivers' summaries of the whole test.
    """
    if "error" in doc:
        raise LabError(f"iperf3: {doc['error']}")
    offset = float(doc[WINDOW_KEY]["offset_s"])
    server = doc.get("server_output_json") or {}
    if not server.get("intervals"):
        raise LabError("iperf3 output lacks the server's intervals (run with --get-server-output)")
    reverse = bool(doc.get("start", {}).get("test_start", {}).get("reverse", 0))
    bidir = any("sum_bidir_reverse" in i for i in doc.get("intervals", []))
    # (direction, receiving report, its summary key, sending report, its summary key)
    halves: list[tuple[str, dict[str, Any], str, dict[str, Any], str]] = []
    if reverse:
        halves.append(("download", doc, "sum", server, "sum"))
    else:
        halves.append(("upload", server, "sum", doc, "sum"))
    if bidir:
        halves.append(("download", doc, "sum_bidir_reverse", server, "sum_bidir_reverse"))
    end = offset + duration
    rates: dict[str, float] = {}
    series = [0.0] * duration
    retransmits: list[int] = []
    for direction, receiver, key, sender, sender_key in halves:
        received = _within(_timeline(receiver, key, sender=False), offset, end)
        covered = sum(i.seconds for i in received)
        if covered < duration - 0.5:
            raise LabError(
                f"iperf3's {direction} report covers {covered:.1f} s of the window"
                f" {offset:.2f}-{end:.2f} s; expected {duration} s"
            )
        rates[direction] = rates.get(direction, 0.0) + _rate(received)
        for second in range(duration):
            part = _within(received, offset + second, offset + second + 1)
            series[second] += _rate(part)
        sent = _within(_timeline(sender, sender_key, sender=True), offset, end)
        retransmits += [i.retransmits for i in sent if i.retransmits is not None]
    udp = protocol(doc) == "UDP"
    end_summary = doc.get("end") or {}
    return ProcessMeasurement(
        upload_bps=rates.get("upload"),
        download_bps=rates.get("download"),
        retransmits=None if udp or not retransmits else sum(retransmits),
        intervals_bps=series,
        udp=udp_received(doc) if udp else [],
        congestion=end_summary.get("sender_tcp_congestion"),
    )
