"""Ending the warm-up on evidence: watch the running traffic until the path is in steady
state (:func:`tunnelbench.analysis.steadiness.judged`), at most ``traffic.warmup_max``.

A fixed warm-up is too long for a sub-millisecond path, which is steady within
milliseconds, and far too short for a bloated queue, which cubic fills over seconds.

The window opens on trial :data:`LEAD_S` after the traffic connected, and its own first
stretch (0.5 s, or ten round trips of a longer path) is the evidence: when neither the
round trip nor the rate rises over it, the window stands, and a fast path has paid a
tenth of a second of warm-up instead of the 0.6 s that judging the stretch before the
window took. When one rises (slow start, a queue filling), or the window ends before ten
round trips have passed, that window is dropped with its probes' readings, and the
window opens again once the stretch before it is steady (the rule before windows opened
on trial), or at ``traffic.warmup_max``, flagged. A change later in the window than its
first stretch (a single TCP stream across this 2-core lab sometimes steps from half its
rate to all of it a second or two in) is foreseen by neither rule: the window's own
thirds are held against each other afterwards, from the receivers' intervals, and such
a trial is flagged (:func:`~tunnelbench.analysis.steadiness.unsteady`). Watching the
whole window and dropping it on any rise was tried: the watch's own 0.1 s samples saw
rises that were not there, and the default run took longer than with the old rule.

The watch samples three things every :data:`POLL_S`, each read without starting a process:

- the WAN queues' backlog and drops, where the lab shapes its WAN
  (:class:`PathSignals.queues`, :mod:`tunnelbench.probes.backlog`): a queue that holds
  a backlog decides, still filling while it grows with no drop yet, steady once it
  dropped or stopped growing; only where none holds one do the next two judge;
- the loaded round trip, from the trial's ping (:class:`PathSignals.loaded_rtt`);
- the rate the server's host carries, from its ``/proc/net/dev`` (its links' received
  plus sent bytes, so upload, download and both alike): in a namespace of this machine
  read without starting a process, on a real host over its connection.

What it found is kept with the trial (:class:`WarmupEnd`): how long the warm-up took,
whether the path settled or the bound ended it, and why.
"""

import time
from collections.abc import Callable

from tunnelbench.analysis.steadiness import judged, settled
from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.system import interrupts
from tunnelbench.traffic.base import PathSignals, StopReason, WarmupEnd

#: How often the watch samples.
POLL_S = 0.1
#: How long after the traffic connected the window opens on trial: one sample of the
#: rate (a path under 10 ms has left slow start by then; a longer one is judged).
LEAD_S = POLL_S


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


def watch(
    t0: float,
    *,
    bound_s: float,
    duration_s: float,
    server: Host,
    signals: PathSignals,
    running: Callable[[], str | None],
    stop_reason: StopReason,
    open_window: Callable[[float], None],
) -> WarmupEnd:
    """Watch the traffic from ``t0`` (when it connected) until the measured window that
    stands is known, opening it with ``open_window(begin)``: on trial, and again where
    that one is dropped (see the module); at ``bound_s`` at the latest. ``running`` says
    why the traffic cannot go on (a client that ended)."""
    last_bytes, last_at = _read(server)
    rates: list[tuple[float, float]] = []
    begin: float | None = None  # the window opened on trial, while it is judged
    dropped = ""  # why it was dropped
    tick = time.monotonic()
    while True:
        # Every POLL_S, a read's own time included (over SSH it takes a round trip).
        tick += POLL_S
        interrupts.sleep(max(0.0, tick - time.monotonic()))
        if (reason := stop_reason() or running()) is not None:
            raise LabError(reason)
        now_bytes, now = _read(server)
        rates.append((now, 8 * (now_bytes - last_bytes) / (now - last_at)))
        last_bytes, last_at = now_bytes, now
        rtt, queues = signals.loaded_rtt(), signals.queues()
        if begin is not None:
            found = judged(rtt, rates, now=now, since=begin, duration_s=duration_s, queues=queues)
            if found is not None and found[0]:
                return WarmupEnd(begin, begin - t0, True, f"{found[1]} from the window's start")
            if found is not None or now - begin >= duration_s:
                # A rise, or no verdict in all of it (ten round trips outlast it).
                what = f"{found[1]} in it" if found is not None else "not judged in it"
                dropped = f"the window opened at {begin - t0:.1f} s was dropped ({what}); "
                begin = None
        elif not dropped and now - t0 >= LEAD_S:
            begin = now
            open_window(begin)
        elif dropped and (
            why := settled(rtt, rates, now=now, since=t0, duration_s=duration_s, queues=queues)
        ):
            open_window(now)
            return WarmupEnd(now, now - t0, True, dropped + why)
        if now - t0 >= bound_s:
            open_window(now)
            return WarmupEnd(
                now,
                now - t0,
                False,
                f"{dropped}not steady within traffic.warmup_max ({bound_s:g} s)",
            )
