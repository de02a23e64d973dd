"""Round-trip time through the tunnel, idle and under load, measured with ping.

The client pings the address iperf3 sends to, so the echo requests take the traffic's
path through the tunnel and wait in the same queues. Just before the traffic, one ping
is waited for (neighbour discovery along the path), then 5 pings 10 ms apart give
``rtt.idle_ms`` (their median; the first may include the tunnel's handshake, which the
median ignores). A second ping runs through
the whole trial at 10 per second; only the replies that arrive inside the measured
window (after the warm-up) count:

- ``rtt.loaded_ms``, ``rtt.loaded_p95_ms``, ``rtt.loaded_max_ms``: median, 95th
  percentile and maximum of their round-trip times;
- ``rtt.samples``: how many replies arrived in the window;
- ``rtt.lost``: requests sent in the window that got no reply although they had time
  to. Ping is stopped soon after the traffic, not a whole ``-W 1`` timeout later (that
  would add most of a second to every trial), so a request counts as lost when ping ran
  on for its *patience* after sending it without a reply: twice the largest round trip
  ping saw, at least 0.1 s and at most the timeout. A request younger than that
  when ping stops counts neither way.

The timeout is 1 s, or on a WAN that can hold a packet longer the longest round trip it
can give one (:func:`tunnelbench.model.wan.rtt_bound_s`: the impairments' delay and
jitter both ways, and a full queue at each end at the shaped rate), rounded up to whole
seconds: a reply that slow is still a reply, not a loss.

With no reply in the window the three times are absent (never zero). ``-D`` stamps each
reply line with the wall-clock time it arrived; the runner's start time is monotonic,
so the window is converted with the offset between the two clocks taken when the traffic
starts. The output format is that of iputils ping (20221126 on Debian 12).
"""

import contextlib
import logging
import math
import re
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunnelbench.analysis.steadiness import trend_t
from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import LinkSettings
from tunnelbench.model.wan import rtt_bound_s
from tunnelbench.probes.trial import Machines, ProbeContext, ProbeKind, ProbeReading, TrialProbe
from tunnelbench.traffic.base import CLIENT, PathSignals

log = logging.getLogger(__name__)

IDLE_COUNT = 5
IDLE_INTERVAL_S = 0.01
LOADED_INTERVAL_S = 0.1
TIMEOUT_S = 1
#: How long the neighbour warm-up ping waits: the kernel resends a lost ARP request or
#: neighbour solicitation after 1 s.
NEIGHBOUR_WAIT_S = 3
MIN_PATIENCE_S = 0.1

_REPLY = re.compile(
    r"^\[(?P<at>\d+\.\d+)\] \d+ bytes from \S+: icmp_seq=(?P<seq>\d+) ttl=\d+"
    r" time=(?P<ms>\d+(?:\.\d+)?) ms(?P<dup> \(DUP!\))?$"
)
_SUMMARY = re.compile(r"^(?P<sent>\d+) packets transmitted, (?P<received>\d+) received")


@dataclass(frozen=True)
class Reply:
    seq: int
    at: float  # wall-clock arrival (ping -D)
    rtt_ms: float

    @property
    def sent(self) -> float:
        """When its request was sent: arrival minus round trip."""
        return self.at - self.rtt_ms / 1000


@dataclass(frozen=True)
class PingOutput:
    replies: list[Reply]  # first reply per sequence number, duplicates left out
    transmitted: int  # requests sent, from ping's summary (icmp_seq 1..transmitted)


def reply_timeout(wan: LinkSettings) -> int:
    """Seconds ping waits for a reply: :data:`TIMEOUT_S`, or the longest round trip the
    WAN can give a packet, rounded up."""
    return max(TIMEOUT_S, math.ceil(rtt_bound_s(wan)))


def ping_argv(
    target: str, family: int, interval: float, count: int | None = None, timeout: int = TIMEOUT_S
) -> list[str]:
    """ping with arrival timestamps (-D), numeric output and the reply timeout."""
    argv = ["ping", f"-{family}", "-D", "-n", "-i", f"{interval:g}", "-W", str(timeout)]
    return argv + (["-c", str(count)] if count is not None else []) + [target]


def parse_ping(text: str) -> PingOutput:
    """Replies and the request count from iputils ping output (with ``-D``).

    Lines that are not replies (the banner, "Destination Host Unreachable", the RTT
    summary) carry no round trip and are skipped; output without ping's "N packets
    transmitted" summary was cut short and is a :class:`LabError`.
    """
    transmitted = None
    for line in text.splitlines():
        if match := _SUMMARY.match(line):
            transmitted = int(match["sent"])
    if transmitted is None:
        tail = text.strip().splitlines()[-1:] or ["no output"]
        raise LabError(f"ping printed no summary (output ends {tail[0]!r})")
    return PingOutput(_replies(text), transmitted)


def _replies(text: str) -> list[Reply]:
    """The first reply of each sequence number in ping's output so far, in order."""
    replies: dict[int, Reply] = {}
    for line in text.splitlines():
        if match := _REPLY.match(line):
            seq = int(match["seq"])
            if match["dup"] is None and seq not in replies:
                replies[seq] = Reply(seq, float(match["at"]), float(match["ms"]))
    return sorted(replies.values(), key=lambda r: r.seq)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy's and
    ``statistics.quantiles(method="inclusive")``'s definition)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def idle_metrics(output: PingOutput) -> dict[str, float]:
    if not output.replies:
        raise LabError(f"idle ping: none of {output.transmitted} requests got a reply")
    return {metric.RTT_IDLE.name: statistics.median(r.rtt_ms for r in output.replies)}


def send_times(output: PingOutput, interval: float, first_sent: float) -> dict[int, float]:
    """When each request was sent: from its reply, or else counted in intervals from the
    nearest request that got one (from ``first_sent``, ping's start, without any)."""
    known = {r.seq: r.sent for r in output.replies}
    anchors = sorted(known.items()) or [(1, first_sent)]
    times = {}
    for seq in range(1, output.transmitted + 1):
        if seq in known:
            times[seq] = known[seq]
            continue
        anchor, at = min(anchors, key=lambda a: abs(a[0] - seq))
        times[seq] = at + (seq - anchor) * interval
    return times


def patience(output: PingOutput, timeout: float = TIMEOUT_S) -> float:
    """How long a request waits for its reply before it counts as lost, in seconds."""
    if not output.replies:
        return timeout
    slowest = max(r.rtt_ms for r in output.replies) / 1000
    return min(timeout, max(MIN_PATIENCE_S, 2 * slowest))


def in_window(output: PingOutput, window: Sequence[float]) -> list[Reply]:
    """The replies that arrived in the window (wall-clock seconds, ends included): what
    the loaded figures count, and what a report draws of them."""
    start, end = window
    return [r for r in output.replies if start <= r.at <= end]


def stored_window(raw: dict[str, Any]) -> tuple[float, list[Reply]]:
    """From a trial's stored reading (:meth:`Pings.finish`'s): the window's start and the
    replies in it; none for pings that did not run (a real client that cannot stamp
    times records only why: ``not_measured``) or whose output was cut short."""
    if "window" not in raw:
        return 0.0, []
    try:
        return raw["window"][0], in_window(parse_ping(raw.get("loaded", "")), raw["window"])
    except LabError:
        return raw["window"][0], []


def loaded_metrics(
    output: PingOutput,
    window: tuple[float, float],
    *,
    interval: float,
    first_sent: float,
    stopped_at: float,
    timeout: float = TIMEOUT_S,
) -> dict[str, float]:
    """The ``rtt.loaded*``, ``rtt.samples`` and ``rtt.lost`` metrics of one window
    (wall-clock seconds, as ping -D prints them)."""
    start, end = window
    inside = [r.rtt_ms for r in in_window(output, window)]
    replied = {r.seq for r in output.replies}
    wait = patience(output, timeout)
    lost = sum(
        1
        for seq, sent in send_times(output, interval, first_sent).items()
        if seq not in replied and start <= sent <= end and sent + wait <= stopped_at
    )
    metrics: dict[str, float] = {metric.RTT_SAMPLES.name: len(inside), metric.RTT_LOST.name: lost}
    if inside:
        metrics[metric.RTT_LOADED.name] = statistics.median(inside)
        metrics[metric.RTT_LOADED_P95.name] = round(percentile(inside, 95), 3)
        metrics[metric.RTT_LOADED_MAX.name] = max(inside)
    # Whether the queue still grew across the window (tunnelbench.analysis.steadiness).
    third = (end - start) / 3
    first = [r.rtt_ms for r in output.replies if start <= r.at < start + third]
    last = [r.rtt_ms for r in output.replies if end - third < r.at <= end]
    if first and last:
        metrics[metric.RTT_FIRST.name] = statistics.median(first)
        metrics[metric.RTT_LAST.name] = statistics.median(last)
    # Whether the rise is a trend or the noise of a CPU-bound path (steadiness).
    if (t := trend_t([(r.at, r.rtt_ms) for r in in_window(output, window)])) is not None:
        metrics[metric.RTT_TREND.name] = t
    return metrics


class Pings:
    """The trial's pings from one host to where the generator sends: one to learn the
    neighbours, the idle ones, then 10 a second through the trial until stopped. The
    host is any :class:`~tunnelbench.lab.host.Host`: a lab's namespace, a real client
    over SSH. ``clock_offset``: the host's wall clock minus this machine's (ping -D
    stamps replies with the host's), 0 for this machine's namespaces."""

    def __init__(
        self,
        host: Host,
        directory: Path,
        target: str,
        family: int,
        timeout: int,
        *,
        clock_offset: float = 0.0,
        tag: str = "",
    ) -> None:
        self.host, self.directory = host, directory
        self.target, self.family, self.timeout = target, family, timeout
        self.clock_offset = clock_offset
        self.window: tuple[float, float] | None = None
        self.output = directory / f"ping-loaded{tag}.txt"
        self.errors = directory / f"ping-loaded{tag}.err"
        self.process: subprocess.Popen[bytes] | None = None

    def host_time(self) -> float:
        """Now, on the host's wall clock."""
        return time.time() + self.clock_offset

    def begin(self) -> None:
        """The idle pings, then the loaded ping started (recorded by the host: teardown
        ends it by PID if the trial fails)."""
        # One ping first, waited for, so that the neighbours along the path are known:
        # the idle pings go out within 40 ms, and all of them would wait out one lost
        # ARP request (on an impaired WAN: a 1 s retry, and an idle "RTT" of 1,037 ms).
        warm = max(self.timeout, NEIGHBOUR_WAIT_S)
        self.host.run(
            ping_argv(self.target, self.family, IDLE_INTERVAL_S, 1, warm),
            check=False,
            timeout=warm + 5,
        )
        idle = self.host.run(
            ping_argv(self.target, self.family, IDLE_INTERVAL_S, IDLE_COUNT, self.timeout),
            timeout=IDLE_COUNT * IDLE_INTERVAL_S + self.timeout + 5,
        )
        self.idle_text = idle.stdout
        argv = ping_argv(self.target, self.family, LOADED_INTERVAL_S, timeout=self.timeout)
        self.first_sent = self.host_time()
        self.process = self.host.spawn(argv, stdout=self.output, stderr=self.errors)

    def started(self, begin: float, duration: float) -> None:
        """The measured window: from monotonic ``begin``, ``duration`` seconds."""
        wall = begin + (self.host_time() - time.monotonic())
        self.window = (wall, wall + duration)

    def loaded_so_far(self) -> list[tuple[float, float]]:
        """(monotonic s of arrival, ms) of every loaded reply so far."""
        offset = self.host_time() - time.monotonic()
        text = self.host.read(self.output)
        return [(r.at - offset, r.rtt_ms) for r in _replies(text)]

    def finish(self) -> ProbeReading:
        """Stop the loaded ping (SIGINT: it prints its summary and exits) and read both."""
        process = self.process
        if process is None:
            raise LabError("rtt probe: the loaded ping was never started")
        self.process = None
        if process.poll() is not None:
            raise LabError(f"ping exited during the trial: {self._stderr()}")
        self.host.interrupt(process)
        stopped_at = self.host_time()
        try:
            code = process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            raise LabError("ping did not exit within 2 s of SIGINT") from None
        if code not in (0, 1):  # 1: no reply at all, which is a measurement too
            raise LabError(f"ping failed (exit {code}): {self._stderr()}")
        if self.window is None:
            raise LabError("rtt probe: the traffic never reported its start")
        loaded_text = self.host.read(self.output)
        metrics = idle_metrics(parse_ping(self.idle_text))
        metrics |= loaded_metrics(
            parse_ping(loaded_text),
            self.window,
            interval=LOADED_INTERVAL_S,
            first_sent=self.first_sent,
            stopped_at=stopped_at,
            timeout=self.timeout,
        )
        raw = {
            "target": self.target,
            "idle": self.idle_text,
            "loaded": loaded_text,
            "window": list(self.window),
            "first_sent": self.first_sent,
            "stopped_at": stopped_at,
        }
        if self.clock_offset:
            raw["clock_offset_s"] = round(self.clock_offset, 4)
        return ProbeReading(metrics, raw)

    def abandon(self) -> None:
        """Stop the loaded ping if it still runs: a trial that failed before
        :meth:`finish` (its record ends it later in any case)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(LabError):
                self.host.interrupt(self.process)
        self.process = None

    def _stderr(self) -> str:
        lines = self.host.read(self.errors).strip().splitlines()
        return lines[-1] if lines else "no error output"


class RttProbe(TrialProbe):
    kind = ProbeKind.RTT
    alongside = False  # the idle ping's round trips

    def __init__(self) -> None:
        self.pings: Pings | None = None
        #: Why the round trips are not measured (a lenient trial's machines).
        self.unmeasured: str | None = None

    def before(self, machines: Machines, context: ProbeContext) -> None:
        traffic = context.traffic
        self.duration, self.lenient = traffic.duration, context.lenient
        try:
            offset = machines.clock_offset(CLIENT)  # before any ping runs
            self.pings = Pings(
                machines.host(CLIENT),
                machines.files(CLIENT),
                machines.server_address(traffic.family),  # where the generator sends
                traffic.family,
                reply_timeout(context.wan),
                clock_offset=offset,
            )
            self.pings.begin()
        except LabError as exc:
            if not context.lenient:
                raise
            self.pings, self.unmeasured = None, str(exc)
            log.warning("round-trip times not measured: %s", exc)

    def started(self, begin: float) -> None:
        if self.pings is not None:
            self.pings.started(begin, self.duration)

    def signals(self) -> PathSignals | None:
        """The loaded pings so far, for a warm-up that ends on evidence
        (:mod:`tunnelbench.traffic.warmup`); None where there are none."""
        return None if self.pings is None else PathSignals(self.pings.loaded_so_far)

    def after(self) -> ProbeReading:
        if self.pings is not None:
            try:
                return self.pings.finish()
            except LabError as exc:
                if not self.lenient:
                    raise
                self.unmeasured = str(exc)
                log.warning("round-trip times not measured: %s", exc)
        return ProbeReading({}, {"not_measured": self.unmeasured})

    def abandon(self) -> None:
        if self.pings is not None:
            self.pings.abandon()
