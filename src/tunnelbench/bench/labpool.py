"""The labs a run keeps standing between its trials: one per distinct lab and tunnel.

Building and removing a lab takes about a second (most of it the kernel's link-watch
delay before a new veth reports carrier), which a 3 s trial pays on top of its warm-up.
A run's trials of one configuration, and of configurations that differ only in their
traffic, can share a lab instead: the pool keeps each lab standing after a successful
trial and hands it to the next trial with the same ``lab`` and ``tunnel`` settings.

A kept lab is handed out only when nothing of the last trial can reach the next:

- the TCP metrics cache of every role is empty (a cached ssthresh or RTT would start
  the next connection's congestion window where the last one ended; a fresh lab has
  none): the lab's namespaces save none (``net.ipv4.tcp_no_metrics_save``, set when it
  is built); the lab has no connection tracking (no rule of the lab uses it), so there
  is none to flush;
- the queues of every lab device hold no packet (a slow shaped link drains what the
  last trial left, at most its queue limit x MTU / rate);
- the tunnel daemons are alive, and no process other than those present when the lab
  was built lives in its namespaces (a generator that outlived its trial would load the
  next one): a lab that fails this is removed, and the next trial builds a fresh one.

Counters (qdisc, links, TCP) are read as differences over each trial's window, so their
running totals carry nothing. Each trial records whether its lab was fresh and which
trial of the lab it was (``lab_fresh``, ``lab_trial``). A pool made with ``keep=0``
(``fresh_labs``) builds a lab for every trial, as tunnelbench did before. A failed
trial's lab is always removed.
"""

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType

from tunnelbench.bench.session import LabSession
from tunnelbench.errors import LabError
from tunnelbench.lab.state import is_alive, namespace_processes
from tunnelbench.model.plan import TrafficSettings, TrialConfig
from tunnelbench.model.wan import longest_queue_wait_s, most_delay_s
from tunnelbench.probes import qdisc
from tunnelbench.probes.trial import read_each
from tunnelbench.system import interrupts
from tunnelbench.tunnels.base import TunnelSpec

log = logging.getLogger("tunnelbench.bench.labpool")

#: Labs kept standing at once. Idle labs cost no CPU worth the name, but each holds
#: namespaces, links and maybe a daemon. Which one goes first: :func:`farthest`.
KEEP = 8
#: Longest wait for a kept lab's queues to empty, beyond what its shaped rate needs.
DRAIN_MARGIN_S = 1.0


@dataclass
class Standing:
    """A lab with its tunnel up, and what the pool knows of it."""

    session: LabSession
    key: str
    trials: int = 0  # trials it has been handed to, this one included
    #: PIDs living in its namespaces once it was built: its own (daemons and their
    #: helpers); anything else found later is a leftover.
    residents: set[int] = field(default_factory=set)

    @property
    def fresh(self) -> bool:
        return self.trials == 1


def lab_key(config: TrialConfig) -> str:
    """What a lab is built from: the configuration without its traffic."""
    return replace(config, traffic=TrafficSettings()).key()


def farthest(idle: Sequence[str], upcoming: Sequence[str]) -> str:
    """The lab to remove from ``idle`` (oldest use first) when the pool is over its size:
    the one whose next use in ``upcoming`` comes last, one never used again first; among
    equals, the one used longest ago.

    A run knows its trials' order, so this is Belady's rule, which rebuilds the fewest
    labs. Removing the one used longest ago instead is the worst rule for a run's rounds:
    a round of more labs than the pool keeps (11 against 8) removed each lab just before
    its next use, and a merged plan built a lab for 40 of its 44 trials.
    """

    def next_use(key: str) -> int:
        return upcoming.index(key) if key in upcoming else len(upcoming)

    return max(idle, key=next_use)  # max keeps the first of equals: the oldest


class LabPool:
    """``with LabPool() as labs``: :meth:`acquire` a lab for a trial, then
    :meth:`release` it after success or :meth:`discard` it after a failure; every lab
    still standing is removed when the block ends, however it ends."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._idle: OrderedDict[str, Standing] = OrderedDict()
        #: The lab keys of the trials still to come, in order (:meth:`expect`).
        self._upcoming: list[str] = []
        #: Labs handed out and not yet released or discarded: removed by :meth:`close`
        #: too, so a caller that fails between acquire and release leaks nothing.
        self._out: list[Standing] = []

    def expect(self, keys: Sequence[str]) -> None:
        """The lab keys (:func:`lab_key`) of the trials about to run, in order: what the
        pool keeps when it is full (:func:`farthest`)."""
        self._upcoming = list(keys)

    def acquire(self, config: TrialConfig, spec: TunnelSpec) -> Standing:
        """A lab for ``config``: a kept one made ready, or a new one built with its
        tunnel up. A kept lab that cannot be made ready is a :class:`LabError` (the
        trial fails with the cause, and the lab is removed)."""
        key = lab_key(config)
        if key in self._upcoming:
            self._upcoming.remove(key)
        # A lab is listed as handed out before anything is done to it, and leaves the
        # list only once it is kept or removed: a Ctrl-C at any instant finds it there.
        standing = self._idle.get(key)
        if standing is None:
            standing = Standing(LabSession(config, spec), key)
            self._out.append(standing)
            try:
                _bring_up(standing)
            except BaseException:
                self._remove(standing)
                raise
        else:
            self._out.append(standing)
            del self._idle[key]
            try:
                ready(standing)
            except BaseException:
                self._remove(standing)
                raise
        standing.trials += 1
        return standing

    def release(self, standing: Standing) -> None:
        """After a successful trial: keep the lab for the next trial of its settings, or
        remove it (a pool that keeps none, or a process of the trial still inside)."""
        if self.keep == 0:
            self._remove(standing)
            return
        if stray := leftovers(standing):
            log.info("lab %s not kept: %s", standing.session.lab.lab_id, stray)
            self._remove(standing)
            return
        self._idle[standing.key] = standing
        self._out.remove(standing)
        while len(self._idle) > self.keep:
            gone = self._idle.pop(farthest(list(self._idle), self._upcoming))
            gone.session.teardown()

    def discard(self, standing: Standing) -> None:
        """After a failed trial: the lab is removed."""
        self._remove(standing)

    def _remove(self, standing: Standing) -> None:
        standing.session.teardown()
        self._out.remove(standing)

    def close(self) -> None:
        """Remove every kept lab and every lab still handed out; the first teardown
        failure is raised after all ran, and a Ctrl-C during one after all ran too."""
        failure: BaseException | None = None
        while self._out or self._idle:
            standing = self._out[-1] if self._out else next(iter(self._idle.values()))
            try:
                standing.session.teardown()
            except BaseException as exc:  # the others still go first
                if failure is None or isinstance(exc, KeyboardInterrupt):
                    failure = exc
            if self._out and self._out[-1] is standing:
                self._out.pop()
            else:
                self._idle.pop(standing.key, None)
        if failure is not None:
            raise failure

    def __enter__(self) -> "LabPool":
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _bring_up(standing: Standing) -> None:
    """Build the lab with its tunnel up, and note who lives in it."""
    session = standing.session
    session.build()
    session.tunnel_up()
    standing.residents = _living(session)


def _living(session: LabSession) -> set[int]:
    lab = session.lab
    return {pid for role in lab.chain.roles for pid in namespace_processes(lab.ns(role))}


def leftovers(standing: Standing) -> str | None:
    """What keeps a lab from being handed on: a process of the last trial still inside
    it (named), or None."""
    extra = _living(standing.session) - standing.residents
    return f"processes still inside after the trial: {sorted(extra)}" if extra else None


def ready(standing: Standing) -> None:
    """Make a kept lab ready for its next trial (see the module's notes)."""
    session = standing.session
    lab = session.lab
    for role, daemon in session.handle.daemons.items():
        if not is_alive(daemon):
            raise LabError(
                f"tunnel daemon {session.handle.implementation} on {role} (pid {daemon.pid})"
                f" died while lab {lab.lab_id} stood between trials"
            )
    if stray := leftovers(standing):
        raise LabError(f"lab {lab.lab_id} is not clean: {stray}")
    wait_drained(standing)


def wait_drained(standing: Standing) -> None:
    """Wait until no qdisc of the lab holds a packet: at most the time the WAN's shaper
    needs to send a full queue (of the largest aggregates it may hold) after netem's
    delay line has let its last packet go (delay + jitter), plus :data:`DRAIN_MARGIN_S`."""
    lab = standing.session.lab
    wan = lab.settings.wan
    bound = DRAIN_MARGIN_S + longest_queue_wait_s(wan) + most_delay_s(wan)
    deadline = time.monotonic() + bound
    while True:
        shown = read_each(lab.chain.roles, lambda role: qdisc.read(lab.host(role)))
        held = {role: backlog for role, text in shown.items() if (backlog := _backlog(text))}
        if not held:
            return
        if time.monotonic() > deadline:
            raise LabError(
                f"lab {lab.lab_id}: queues still hold packets {bound:.1f} s after the last"
                f" trial ({', '.join(f'{r}: {n}' for r, n in sorted(held.items()))})"
            )
        interrupts.sleep(0.02)


def _backlog(text: str) -> int:
    """Packets held by all the qdiscs of one ``tc -s -j qdisc show``."""
    return sum(int(q.get("qlen", 0)) for q in json.loads(text or "[]"))
