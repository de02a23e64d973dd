"""Reading iperf 2.1.8's CSV reports (``--enhanced --reportstyle C``), as that release
writes them; anything else is refused, naming the line, never guessed at.

What 2.1.8 prints (real captures in tests/fixtures/iperf2):

- ``-y C`` gives iperf 2.0's *basic* CSV. ``-e`` only adds milliseconds to the
  timestamp; none of the enhanced columns of the text report (writes, reads, the TCP
  retry count, cwnd, RTT) appear, so TCP retransmits cannot be read from it.
- One line per stream per interval (``-i 1``), then one final line per stream covering
  its whole test, each stream's lines in order. There are no ``[SUM]`` lines, with or
  without ``--sum-only`` (which changes nothing in CSV): sums are computed here.
- TCP lines have 9 fields: timestamp, sender address, sender port, receiver address,
  receiver port, transfer id, interval ``start-end`` (0.1 s resolution), bytes, bits per
  second. UDP lines add 5: jitter (ms), lost, total (datagrams expected), lost percent,
  out-of-order. The UDP columns mean something on the receiving side only (a sender's
  final line has total -1).
- The address columns name the data's sender, then its receiver, on both ends: an
  upload's lines read client → server in the client's and in the server's output, a
  download's read server → client. (A full-duplex client names its own receiving end
  ``::`` port 0.) So a line's direction is told by the side the server's address is on.
- Each side reports its own socket calls: the sender what it wrote, the receiver what it
  read. Goodput is the receiver's figure: the server's lines for the upload direction,
  the client's for the download direction (``-R``, and the reverse half of
  ``--full-duplex``).

iperf2 has no warm-up option (iperf3's ``-O``): the test runs for warm-up plus duration
and the measured figures are computed from the receiver's 1 s interval lines whose start
lies in the measured window. The final lines cover the warm-up too and are only used to
check the intervals (they can never count more than the total).
"""

import ipaddress
import re
from dataclasses import dataclass

from tunnelbench.errors import LabError
from tunnelbench.kinds import Direction, Protocol

TCP_FIELDS = 9
UDP_FIELDS = TCP_FIELDS + 5
_TIMESTAMP = re.compile(r"\d{14}\.\d{3}")  # YYYYMMDDhhmmss.mmm (-e adds the .mmm)
_INTERVAL = re.compile(r"(\d+\.\d)-(\d+\.\d)")
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?\d+\.\d+")

#: (address, port): one end of a stream as the CSV names it.
Endpoint = tuple[str, int]


@dataclass(frozen=True)
class UdpColumns:
    jitter_ms: float
    lost: int
    total: int  # datagrams the receiver expected: received plus lost
    lost_pct: float
    out_of_order: int


@dataclass(frozen=True)
class Line:
    """One CSV report line; ``number`` is its 1-based line number in its output."""

    number: int
    text: str
    sender: Endpoint
    receiver: Endpoint
    transfer_id: int
    start: float
    end: float
    bytes: int
    bits_per_second: int
    udp: UdpColumns | None

    def seconds(self) -> float:
        """The interval's exact length: iperf computed the rate over it, while the
        printed interval is rounded to 0.1 s (e.g. ``1.0-2.0`` for 1.0000-1.9964)."""
        if self.bits_per_second > 0:
            return 8 * self.bytes / self.bits_per_second
        return self.end - self.start


@dataclass(frozen=True)
class StreamReport:
    """Everything one side printed about one stream in one direction."""

    side: str  # "client" or "server"
    transfer_id: int
    sender: Endpoint
    receiver: Endpoint
    intervals: tuple[Line, ...]
    total: Line  # the final line: the whole test, warm-up included


@dataclass(frozen=True)
class UdpReceived:
    """One receiving stream's UDP figures over the measured window."""

    lost_packets: int
    packets: int  # expected: received plus lost
    jitter_ms: float  # mean of the stream's interval jitters


@dataclass
class Measurement:
    """What the receivers counted over the measured window."""

    upload_bps: float | None
    download_bps: float | None
    intervals_bps: list[float]  # per measured second, every receiving stream summed
    udp: list[UdpReceived]  # one per receiving stream; empty for TCP
    received_bytes: int  # the receivers' final lines: the whole test, warm-up included
    window_s: float  # the measured intervals' length, shortest stream


def _fail(side: str, line_no: int, text: str, why: str) -> LabError:
    return LabError(
        f"iperf2 {side} output line {line_no}: {why}: {text!r}"
        " (the parser reads iperf 2.1.8's CSV format only)"
    )


def _address(side: str, number: int, text: str, value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise _fail(side, number, text, f"{value!r} is not an IP address") from None


def _int(side: str, number: int, text: str, value: str, what: str) -> int:
    if not _INT.fullmatch(value):
        raise _fail(side, number, text, f"{what} {value!r} is not a whole number")
    return int(value)


def _float(side: str, number: int, text: str, value: str, what: str) -> float:
    if not _FLOAT.fullmatch(value):
        raise _fail(side, number, text, f"{what} {value!r} is not a decimal number")
    return float(value)


def parse_line(side: str, number: int, text: str, protocol: Protocol) -> Line:
    """One CSV line, every field checked against 2.1.8's format."""
    fields = text.split(",")
    expected = TCP_FIELDS if protocol is Protocol.TCP else UDP_FIELDS
    if len(fields) != expected:
        raise _fail(
            side, number, text, f"{len(fields)} fields, {protocol.value.upper()} has {expected}"
        )
    if not _TIMESTAMP.fullmatch(fields[0]):
        raise _fail(side, number, text, f"timestamp {fields[0]!r} is not YYYYMMDDhhmmss.mmm")
    interval = _INTERVAL.fullmatch(fields[6])
    if not interval:
        raise _fail(side, number, text, f"interval {fields[6]!r} is not START-END")
    start, end = float(interval.group(1)), float(interval.group(2))
    if end < start:
        raise _fail(side, number, text, "the interval ends before it starts")
    udp = None
    if protocol is Protocol.UDP:
        udp = UdpColumns(
            jitter_ms=_float(side, number, text, fields[9], "jitter"),
            lost=_int(side, number, text, fields[10], "lost"),
            total=_int(side, number, text, fields[11], "total"),
            lost_pct=_float(side, number, text, fields[12], "lost percent"),
            out_of_order=_int(side, number, text, fields[13], "out-of-order"),
        )
    line = Line(
        number=number,
        text=text,
        sender=(
            _address(side, number, text, fields[1]),
            _int(side, number, text, fields[2], "port"),
        ),
        receiver=(
            _address(side, number, text, fields[3]),
            _int(side, number, text, fields[4], "port"),
        ),
        transfer_id=_int(side, number, text, fields[5], "transfer id"),
        start=start,
        end=end,
        bytes=_int(side, number, text, fields[7], "bytes"),
        bits_per_second=_int(side, number, text, fields[8], "bits per second"),
        udp=udp,
    )
    if line.bytes < 0 or line.bits_per_second < 0:
        raise _fail(side, number, text, "negative bytes or rate")
    return line


def parse(text: str, side: str, protocol: Protocol) -> list[Line]:
    """Every line of one side's standard output; any line that is not a report line of
    the expected protocol is an error naming it."""
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            lines.append(parse_line(side, number, raw.strip(), protocol))
    return lines


def stream_reports(lines: list[Line], side: str) -> list[StreamReport]:
    """Lines grouped per stream and direction (transfer id, sender, receiver), in order
    of first appearance; each stream's last line is its final report, the others are
    its intervals, which must follow one another from 0.0."""
    groups: dict[tuple[int, Endpoint, Endpoint], list[Line]] = {}
    for line in lines:
        groups.setdefault((line.transfer_id, line.sender, line.receiver), []).append(line)
    reports = []
    for (transfer_id, sender, receiver), group in groups.items():
        *intervals, total = group
        if total.start != 0.0:
            raise _fail(side, total.number, total.text, "the stream's last line is not its total")
        expected_start = 0.0
        for line in intervals:
            if abs(line.start - expected_start) > 0.01:
                raise _fail(
                    side,
                    line.number,
                    line.text,
                    f"the stream's interval should start at {expected_start:.1f} s",
                )
            expected_start = line.end
        if sum(line.bytes for line in intervals) > total.bytes:
            raise _fail(side, total.number, total.text, "the intervals add up to more than this")
        reports.append(StreamReport(side, transfer_id, sender, receiver, tuple(intervals), total))
    return reports


def direction_of(report: StreamReport, server: Endpoint) -> Direction:
    """``upload`` when the data went to the server, ``download`` when it came from it."""
    target = (str(ipaddress.ip_address(server[0])), server[1])
    if report.receiver == target:
        return Direction.UPLOAD
    if report.sender == target:
        return Direction.DOWNLOAD
    raise _fail(
        report.side,
        report.total.number,
        report.total.text,
        f"neither end of this stream is the server {server[0]} port {server[1]}",
    )


def _directions(direction: Direction) -> tuple[Direction, ...]:
    if direction is Direction.BIDIR:
        return (Direction.UPLOAD, Direction.DOWNLOAD)
    return (direction,)


def _check_counts(
    reports: list[StreamReport], side: str, server: Endpoint, direction: Direction, streams: int
) -> dict[Direction, list[StreamReport]]:
    by_direction: dict[Direction, list[StreamReport]] = {
        Direction.UPLOAD: [],
        Direction.DOWNLOAD: [],
    }
    for report in reports:
        by_direction[direction_of(report, server)].append(report)
    wanted = _directions(direction)
    for way, found in by_direction.items():
        expected = streams if way in wanted else 0
        if len(found) != expected:
            raise LabError(
                f"iperf2 {side} reported {len(found)} {way.value} stream(s), expected"
                f" {expected} ({streams} stream(s), direction {direction.value})"
            )
    return by_direction


def windowed(report: StreamReport, warmup: int, duration: int) -> list[Line]:
    """The stream's intervals in the measured window, which they must cover: one per
    second from ``warmup`` on."""
    inside = [line for line in report.intervals if warmup - 0.01 <= line.start < warmup + duration]
    starts = [round(line.start, 1) for line in inside]
    if starts != [float(warmup + k) for k in range(duration)]:
        last = report.intervals[-1].end if report.intervals else 0.0
        raise LabError(
            f"iperf2 {report.side}'s report of stream {report.transfer_id}"
            f" ({report.sender[0]} port {report.sender[1]} to {report.receiver[0]} port"
            f" {report.receiver[1]}) has 1 s intervals up to {last:.1f} s; the measured"
            f" window is {warmup}-{warmup + duration} s"
        )
    return inside


def _udp(report: StreamReport, window: list[Line]) -> UdpReceived:
    columns = []
    for line in window:
        if line.udp is None or line.udp.total < 0:
            raise _fail(report.side, line.number, line.text, "no receiver's datagram count")
        columns.append(line.udp)
    return UdpReceived(
        lost_packets=sum(c.lost for c in columns),
        packets=sum(c.total for c in columns),
        jitter_ms=sum(c.jitter_ms for c in columns) / len(columns),
    )


def measure(
    client: str,
    server: str,
    *,
    protocol: Protocol,
    direction: Direction,
    target: Endpoint,
    streams: int,
    warmup: int,
    duration: int,
) -> Measurement:
    """The receivers' goodput per direction, per-second intervals and UDP loss over the
    measured window, from the client's and the server's standard output.

    Both outputs must hold exactly ``streams`` streams in each direction the test runs
    (and none in the other). A stream's goodput is the bytes of its measured intervals
    over their exact total length; a direction's goodput is the sum over its streams
    (they run concurrently: one process, whose threads start sending together).
    """
    sides = {
        "client": stream_reports(parse(client, "client", protocol), "client"),
        "server": stream_reports(parse(server, "server", protocol), "server"),
    }
    found = {
        side: _check_counts(reports, side, target, direction, streams)
        for side, reports in sides.items()
    }
    receivers = {Direction.UPLOAD: "server", Direction.DOWNLOAD: "client"}
    rates: dict[Direction, float] = {}
    intervals = [0.0] * duration
    udp: list[UdpReceived] = []
    counted: list[float] = []
    received_bytes = 0
    for way in _directions(direction):
        rates[way] = 0.0
        for report in found[receivers[way]][way]:
            window = windowed(report, warmup, duration)
            seconds = sum(line.seconds() for line in window)
            if seconds <= 0:
                raise LabError(f"iperf2 {report.side}'s stream {report.transfer_id} measured 0 s")
            rates[way] += 8 * sum(line.bytes for line in window) / seconds
            counted.append(seconds)
            for k, line in enumerate(window):
                intervals[k] += line.bits_per_second
            if protocol is Protocol.UDP:
                udp.append(_udp(report, window))
            received_bytes += report.total.bytes
    return Measurement(
        upload_bps=rates.get(Direction.UPLOAD),
        download_bps=rates.get(Direction.DOWNLOAD),
        intervals_bps=intervals,
        udp=udp,
        received_bytes=received_bytes,
        window_s=min(counted),
    )


def lost_percent(received: list[UdpReceived]) -> float | None:
    """Lost datagrams as percent of those the receivers expected; None if none were."""
    expected = sum(r.packets for r in received)
    return 100.0 * sum(r.lost_packets for r in received) / expected if expected else None
