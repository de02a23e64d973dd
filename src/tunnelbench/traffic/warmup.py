"""Ending the warm-up on evidence: watch the running traffic until the path is in steady
state (:func:`tunnelbench.analysis.steadiness.settled`), at most ``traffic.warmup_max``.

A fixed warm-up is too long for a sub-millisecond path, which is steady within
milliseconds, and far too short for a bloated queue, which cubic fills over seconds. The
watch samples two things every :data:`POLL_S`, each read without starting a process:

- the loaded round trip, from the trial's ping (:class:`PathSignals.loaded_rtt`);
- the rate the server's host carries, from its ``/proc/net/dev`` (its links' received
  plus sent bytes, so upload, download and both alike): in a namespace of this machine
  read without starting a process, on a real host over its connection.

What it found is kept with the trial (:class:`WarmupEnd`): how long the warm-up took,
whether the path settled or the bound ended it, and why.
"""

import time
from collections.abc import Callable

from tunnelbench.analysis.steadiness import settled
from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.traffic.base import PathSignals, StopReason, WarmupEnd

#: How often the watch samples.
POLL_S = 0.1


def link_bytes(text: str) -> int:
    """Received plus sent bytes of every link but loopback in the text of /proc/net/dev."""
    total = 0
    for line in text.splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() == "lo":
            continue
        values = fields.split()
        total += int(values[0]) + int(values[8])
    return total


def host_bytes(host: Host) -> int:
    return link_bytes(host.read_net(["dev"]))


def _read(server: Host) -> tuple[int, float]:
    """The server's link bytes and when they were read (the middle of the read)."""
    before = time.monotonic()
    try:
        total = host_bytes(server)
    except (LabError, ValueError, IndexError) as exc:
        raise LabError(f"warm-up: cannot read the endpoints' counters ({exc})") from None
    return total, (before + time.monotonic()) / 2


def wait_steady(
    t0: float,
    *,
    bound_s: float,
    duration_s: float,
    server: Host,
    signals: PathSignals,
    running: Callable[[], str | None],
    stop_reason: StopReason,
) -> WarmupEnd:
    """Watch from ``t0`` (the traffic connected) until the path is steady or ``bound_s``
    has passed. ``running`` says why the traffic cannot go on (a client that ended)."""
    last_bytes, last_at = _read(server)
    rates: list[tuple[float, float]] = []
    tick = time.monotonic()
    while True:
        # Every POLL_S, a read's own time included (over SSH it takes a round trip).
        tick += POLL_S
        time.sleep(max(0.0, tick - time.monotonic()))
        if (reason := stop_reason() or running()) is not None:
            raise LabError(reason)
        now_bytes, now = _read(server)
        rates.append((now, 8 * (now_bytes - last_bytes) / (now - last_at)))
        last_bytes, last_at = now_bytes, now
        why = settled(
            signals.loaded_rtt(),
            rates,
            now=now,
            since=t0,
            duration_s=duration_s,
        )
        if why is not None:
            return WarmupEnd(now, now - t0, True, why)
        if now - t0 >= bound_s:
            return WarmupEnd(
                now, now - t0, False, f"not steady within traffic.warmup_max ({bound_s:g} s)"
            )
