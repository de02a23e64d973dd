"""Ending the warm-up on evidence: watch the running traffic until the path is in steady
state (:func:`tunnelbench.analysis.steadiness.settled`), at most ``traffic.warmup_max``.

A fixed warm-up is too long for a sub-millisecond path, which is steady within
milliseconds, and far too short for a bloated queue, which cubic fills over seconds. The
watch samples two things every :data:`POLL_S`, each read without starting a process:

- the loaded round trip, from the trial's ping (:class:`PathSignals.loaded_rtt`);
- the rate the server's namespace carries, from ``/proc/PID/net/dev`` of a process in it
  (its links' received plus sent bytes, so upload, download and both alike).

What it found is kept with the trial (:class:`WarmupEnd`): how long the warm-up took,
whether the path settled or the bound ended it, and why.
"""

import time
from collections.abc import Callable

from tunnelbench.analysis.steadiness import settled
from tunnelbench.errors import LabError
from tunnelbench.traffic.base import PathSignals, StopReason, WarmupEnd

#: How often the watch samples.
POLL_S = 0.1


def namespace_bytes(pid: int) -> int:
    """Received plus sent bytes of every link but loopback in ``pid``'s namespace."""
    total = 0
    with open(f"/proc/{pid}/net/dev") as lines:
        for line in list(lines)[2:]:
            name, _, fields = line.partition(":")
            if name.strip() == "lo":
                continue
            values = fields.split()
            total += int(values[0]) + int(values[8])
    return total


def wait_steady(
    t0: float,
    *,
    bound_s: float,
    duration_s: float,
    server_pid: int,
    signals: PathSignals,
    running: Callable[[], str | None],
    stop_reason: StopReason,
) -> WarmupEnd:
    """Watch from ``t0`` (the traffic connected) until the path is steady or ``bound_s``
    has passed. ``running`` says why the traffic cannot go on (a client that ended)."""
    try:
        last_bytes, last_at = namespace_bytes(server_pid), time.monotonic()
    except (OSError, ValueError, IndexError) as exc:
        raise LabError(f"warm-up: cannot read the endpoints' counters ({exc})") from None
    rates: list[tuple[float, float]] = []
    while True:
        time.sleep(POLL_S)
        if (reason := stop_reason() or running()) is not None:
            raise LabError(reason)
        try:
            now_bytes, now = namespace_bytes(server_pid), time.monotonic()
        except (OSError, ValueError, IndexError) as exc:
            raise LabError(f"warm-up: cannot read the endpoints' counters ({exc})") from None
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
