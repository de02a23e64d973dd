"""Advice where the load generator, or one flow, held the traffic: more streams, a process
per stream, several flows."""

from tunnelbench.analysis.cpu_advice import BUDGETS
from tunnelbench.analysis.diagnosis import (
    SATURATED_PCT,
    Bound,
    generator_cores,
    threaded_generator,
)
from tunnelbench.analysis.suggestion import (
    Advice,
    Context,
    more_streams,
)
from tunnelbench.kinds import StreamMode


def generator_processes(c: Context) -> Advice | None:
    generator = c.finding(Bound.GENERATOR)
    s = c.subject
    if generator is None:
        return None
    if threaded_generator(s):
        if generator_cores(s) >= len(s.cores):
            return None  # its threads already keep every core busy: more of them cannot help
        return _more_streams(
            c, "spread the load over more streams (iperf2 runs each in a thread of its own)"
        )
    if s.config.traffic.streams > 1 and s.resolved.single_process:
        return Advice(
            "traffic.stream_mode",
            "run one generator process per stream (stream_mode = processes)",
            generator.summary,
            c.measured("traffic.stream_mode", lambda v: v == StreamMode.PROCESSES.value),
            candidates=(StreamMode.PROCESSES.value,),
        )
    return _more_streams(
        c, "spread the load over several streams, each in its own generator process"
    )


def _more_streams(c: Context, suggestion: str) -> Advice:
    """More streams than the trial ran, for a generator-bound one."""
    generator, streams = c.finding(Bound.GENERATOR), c.subject.config.traffic.streams
    assert generator is not None
    return Advice(
        "traffic.streams",
        suggestion,
        generator.summary,
        c.measured("traffic.streams", lambda v: v > streams),
        candidates=more_streams(streams),
    )


def several_flows(c: Context) -> Advice | None:
    """One flow on a saturated core: a flow's packets are processed on one core at a
    time, so several flows can use more of them. That reason is given only where a core
    was saturated (:data:`SATURATED_PCT`): cake with one flow and its busiest core at 34%
    was told so, and an undetermined UDP stream at 1%. Without one, only a gain this run
    measured advises more flows (an unshaped baseline at 69% measured +64% with 4)."""
    s = c.subject
    if s.config.traffic.streams != 1 or c.diagnosis.verdict.bound not in (
        Bound.CPU,
        Bound.UNDETERMINED,
    ):
        return None
    if c.diagnosis.verdict.lab_setting is not None:
        return None  # the lab's limit: lab_offloads advises it
    if any(e.name.startswith(BUDGETS) for e in c.diagnosis.verdict.evidence):
        return None  # a CPU budget caps every flow of what it holds together
    measured = c.measured("traffic.streams", lambda v: v > 1)
    if any(s.busy(core) >= SATURATED_PCT for core in s.cores):
        why = "one flow is processed on one core at a time"
    elif measured is not None and measured.outcome == "gain":
        why = "this run measured more flows faster, with no core saturated"
    else:
        return None
    return Advice(
        "traffic.streams",
        f"use several flows: {why}",
        c.diagnosis.verdict.summary,
        measured,
        candidates=more_streams(1),
    )
