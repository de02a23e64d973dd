"""The rate search: the highest rate of one frame size a path forwards without loss
(NDR) and with a small loss (PDR, 0.5% by default), found by MLRsearch.

MLRsearch (draft-ietf-bmwg-mlrsearch; FD.io CSIT's, from PyPI) asks for trials: a rate
and a duration each, lengthening them as its bounds narrow, and finds both rates in one
search. Each trial here is one trafgen run (:mod:`tunnelbench.traffic.trafgen`) of
``rate x duration`` frames from the sender, and the loss is what the receiver's device
did not count: the kernel's own counter, never the generator's.

A sender held back by its own device's queue (trafgen writes a refused frame again)
takes longer than the trial: what it wrote past the trial's duration, at its own pace,
counts as not offered, which MLRsearch counts as lost. So a path that cannot take a rate
fails the trial whether it drops frames or holds the sender back.

Work in progress (issue 44): the search runs on a lab's hosts from Python; the verb,
its storage and reports come next (docs/rate-search.md).
"""

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from MLRsearch import (  # type: ignore[import-untyped]
    AbstractMeasurer,
    Config,
    MeasurementResult,
    MultipleLossRatioSearch,
    SearchGoal,
)

from tunnelbench.errors import LabError, UserError
from tunnelbench.lab.host import Host
from tunnelbench.probes.links import parse_links
from tunnelbench.system import programs
from tunnelbench.traffic import trafgen

#: A trial's duration may run over by this share before the frames it wrote late count
#: as not offered: trafgen's start and the scheduler's jitter.
LATE_SHARE = 0.02
#: How long the receiver's counter must stand still before a trial's frames count as
#: all arrived, and the longest wait for it.
SETTLE_S, DRAIN_MAX_S = 0.05, 3.0


@dataclass(frozen=True)
class SearchSettings:
    """What one search looks for. Loss ratios are fractions (0.005 is 0.5%)."""

    frame: int
    max_pps: float
    min_pps: float = 100.0
    family: int = 4
    ndr_loss: float = 0.0
    pdr_loss: float = 0.005
    #: RFC 2544 asks for 60 s at the end; a quick search takes less.
    final_duration: float = 1.0
    initial_duration: float = 0.5
    relative_width: float = 0.01
    time_limit_s: float = 600.0

    def check(self) -> None:
        if not 0 < self.min_pps < self.max_pps:
            raise UserError(f"rate search: min {self.min_pps} pps must be below max {self.max_pps}")
        if not 0 <= self.ndr_loss < self.pdr_loss < 1:
            raise UserError(
                f"rate search: loss ratios {self.ndr_loss} (NDR) < {self.pdr_loss} (PDR) < 1"
            )
        if not 0 < self.initial_duration <= self.final_duration:
            raise UserError("rate search: initial trial duration must be positive and at most"
                            " the final one")  # fmt: skip


@dataclass(frozen=True)
class SearchTrial:
    """One trial of a search, as measured."""

    rate_pps: float  # asked
    duration: float  # asked
    intended: int  # frames asked
    sent: int  # frames trafgen wrote
    seconds: float  # how long it took to write them
    offered: int  # of them, within the duration
    received: int  # the receiver's device's count over the trial

    @property
    def forwarded(self) -> int:
        """Frames offered in time that arrived: frames written late and still forwarded
        do not count, nor does anything the receiver counted beyond what was sent (a
        neighbour probe)."""
        return max(0, min(self.received - (self.sent - self.offered), self.offered))

    @property
    def loss_ratio(self) -> float:
        return (self.intended - self.forwarded) / self.intended


@dataclass
class SearchResult:
    """Both rates (frames a second; None where the search found no lower bound) and
    every trial behind them."""

    ndr_pps: float | None
    pdr_pps: float | None
    trials: list[SearchTrial] = field(default_factory=list)
    seconds: float = 0.0


class _Trials(AbstractMeasurer):  # type: ignore[misc]
    """MLRsearch's measurer: one trafgen run a trial, the loss read at the receiver."""

    def __init__(
        self,
        sender: Host,
        binary: str,
        hop: trafgen.NextHop,
        config: Path,
        receiver: Host,
        device: str,
    ) -> None:
        self.sender, self.binary, self.hop, self.config = sender, binary, hop, config
        self.receiver, self.device = receiver, device
        self.trials: list[SearchTrial] = []

    def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
        intended = max(1, math.ceil(intended_duration * intended_load))
        before = received(self.receiver, self.device)
        sent = trafgen.send(
            self.sender, self.binary, self.hop, self.config, intended, math.ceil(intended_load)
        )
        after = settled(self.receiver, self.device)
        offered = offered_in_time(sent.packets, sent.seconds, intended_duration)
        trial = SearchTrial(
            intended_load, intended_duration, intended, sent.packets, sent.seconds, offered,
            after - before,
        )  # fmt: skip
        self.trials.append(trial)
        return MeasurementResult(
            intended_duration=intended_duration,
            intended_load=intended_load,
            offered_count=offered,
            forwarding_count=trial.forwarded,
            intended_count=intended,
            offered_duration=sent.seconds,
        )


def offered_in_time(sent: int, seconds: float, duration: float) -> int:
    """Of ``sent`` frames written over ``seconds``, those offered within ``duration``
    at the sender's own pace: all of them unless it ran over by more than
    :data:`LATE_SHARE`."""
    if seconds <= duration * (1 + LATE_SHARE):
        return sent
    return math.floor(sent * duration / seconds)


def received(host: Host, device: str) -> int:
    """Frames ``device`` of ``host`` has received, by the kernel's counter (read as the
    link probe reads it: in this process where the host allows, no command started)."""
    links = parse_links(host.read_net(["dev"]))
    if device not in links:
        raise LabError(f"{host.name}: no device {device}")
    return links[device]["rx_packets"]


def settled(host: Host, device: str) -> int:
    """The receiver's count once it has stood still for :data:`SETTLE_S` (the frames
    still queued on the way have arrived), waiting at most :data:`DRAIN_MAX_S`."""
    deadline = time.monotonic() + DRAIN_MAX_S
    last, since = received(host, device), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S / 2)
        now = received(host, device)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLE_S:
            break
    return last


def search(
    sender: Host, receiver: Host, destination: str, settings: SearchSettings, config: Path
) -> SearchResult:
    """NDR and PDR of ``settings.frame``-byte frames from ``sender`` to ``destination``
    (an address of ``receiver``); ``config`` is where the packet description is written
    on the sender."""
    settings.check()
    binary = programs.require(trafgen.PROGRAM, trafgen.PURPOSE)
    hop = trafgen.next_hop(sender, destination, settings.family)
    arriving = trafgen.next_hop(receiver, hop.source, settings.family).device
    sender.write(config, trafgen.packet(hop, destination, settings.family, settings.frame) + "\n")
    trials = _Trials(sender, binary, hop, config, receiver, arriving)
    ndr = SearchGoal(
        loss_ratio=settings.ndr_loss,
        exceed_ratio=0.5,
        relative_width=settings.relative_width,
        initial_trial_duration=settings.initial_duration,
        final_trial_duration=settings.final_duration,
        duration_sum=settings.final_duration,
        preceding_targets=2,
        expansion_coefficient=2,
        # A path that loses even at the lowest rate has no NDR: None, not an exception.
        fail_fast=False,
    )
    pdr = replace(ndr, loss_ratio=settings.pdr_loss)
    began = time.monotonic()
    found = MultipleLossRatioSearch(
        config=Config(
            goals=[ndr, pdr],
            min_load=settings.min_pps,
            max_load=settings.max_pps,
            search_duration_max=settings.time_limit_s,
            warmup_duration=None,
        )
    ).search(measurer=trials, debug=lambda _: None)

    def rate(goal: SearchGoal) -> float | None:
        bound = found[goal].relevant_lower_bound
        return None if bound is None else float(bound)

    return SearchResult(rate(ndr), rate(pdr), trials.trials, time.monotonic() - began)
