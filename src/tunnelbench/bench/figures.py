"""A trial's figures under the names every trial stores, on every testbed: what the
generator measured, the window's verdict, the raw output kept beside them, and what the
lab's in-process sampler read (a testbed's own window figures come from its module)."""

from typing import Any

from tunnelbench.analysis.steadiness import goodput_thirds, goodput_trend, window_rising
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import TrafficSettings
from tunnelbench.probes.sampler import ProbeResult
from tunnelbench.probes.trial import ProbeReadings
from tunnelbench.traffic import TrafficResult


def window_verdict(metrics: dict[str, float]) -> dict[str, float]:
    """The window's own verdict, stored: no trial is kept as steady that its window
    calls rising."""
    return {metric.WINDOW_STEADY.name: 0.0 if window_rising(metrics) else 1.0}


def warmup_fallback(settings: TrafficSettings, traffic: TrafficResult) -> dict[str, float]:
    """An "auto" warm-up the generator could not end on evidence: its fixed fallback."""
    if settings.warmup is None and traffic.warmup is None:
        return {metric.WARMUP_S.name: settings.fixed_warmup}
    return {}


def traffic_artifacts(settings: TrafficSettings, traffic: TrafficResult) -> dict[str, Any]:
    """The generator's raw output under its name ("iperf3": JSON documents, "iperf2":
    each process's command line and CSV output), its intervals and how its warm-up ended,
    as every trial stores them."""
    artifacts: dict[str, Any] = {
        settings.generator.value: traffic.raw,
        "intervals": traffic.intervals_bps,
    }
    if traffic.warmup is not None:
        artifacts["warmup"] = {
            "seconds": round(traffic.warmup.seconds, 3),
            "steady": traffic.warmup.steady,
            "reason": traffic.warmup.reason,
        }
    return artifacts


def trial_metrics(
    traffic: TrafficResult, probes: ProbeResult | None, readings: ProbeReadings
) -> dict[str, float]:
    """The numbers stored for one lab trial; names are stable, reports read them by
    name."""
    metrics = traffic_metrics(traffic) | readings.metrics
    if probes is not None:
        metrics |= probe_metrics(probes)
    return metrics | window_verdict(metrics)


def traffic_metrics(traffic: TrafficResult) -> dict[str, float]:
    """What the generator measured, under the names every trial stores."""
    metrics: dict[str, float] = {metric.GOODPUT.name: traffic.goodput_bps}
    metrics |= goodput_thirds(traffic.intervals_bps) | goodput_trend(traffic.fine_bps)
    if traffic.warmup is not None:
        metrics[metric.WARMUP_S.name] = round(traffic.warmup.seconds, 3)
        metrics[metric.WARMUP_STEADY.name] = 1.0 if traffic.warmup.steady else 0.0
    if traffic.upload_bps is not None:
        metrics[metric.UPLOAD.name] = traffic.upload_bps
    if traffic.download_bps is not None:
        metrics[metric.DOWNLOAD.name] = traffic.download_bps
    if traffic.retransmits is not None:
        metrics[metric.RETRANSMITS.name] = traffic.retransmits
    if traffic.lost_packets is not None:
        metrics[metric.UDP_LOST_PACKETS.name] = traffic.lost_packets
    if traffic.lost_pct is not None:
        metrics[metric.UDP_LOST_PCT.name] = traffic.lost_pct
    if traffic.jitter_ms is not None:
        metrics[metric.UDP_JITTER.name] = traffic.jitter_ms
    metrics[metric.GENERATOR_PROCESSES.name] = traffic.processes
    if traffic.window_s is not None:
        metrics[metric.GOODPUT_WINDOW.name] = round(traffic.window_s, 4)
    return metrics


def probe_metrics(probes: ProbeResult) -> dict[str, float]:
    """What the lab's in-process sampler measured over the window."""
    metrics: dict[str, float] = {}
    for core in probes.cores:
        for part in metric.CPU_PARTS:
            metrics[metric.cpu(core.core, part)] = round(getattr(core, part), 2)
    for label, percent in probes.processes.items():
        metrics[metric.process(label)] = percent
    metrics[metric.SAMPLER_CPU.name] = probes.sampler_cpu_pct
    metrics[metric.SAMPLER_SAMPLES.name] = probes.samples
    metrics[metric.SAMPLER_WINDOW.name] = probes.window_s
    if probes.open_lag_ms is not None and probes.close_lag_ms is not None:
        metrics[metric.SAMPLER_OPEN_LAG.name] = probes.open_lag_ms
        metrics[metric.SAMPLER_CLOSE_LAG.name] = probes.close_lag_ms
    metrics |= probes.tcp_metrics  # tcp.window.*: the endpoints' counters over the window
    if probes.cpu_load is not None:
        metrics[metric.LOAD_LAB.name] = probes.cpu_load.lab_pct
        metrics[metric.LOAD_OUTSIDE.name] = probes.cpu_load.outside_pct
    if probes.load_scan_ms is not None:
        metrics[metric.LOAD_SCAN.name] = probes.load_scan_ms
    for name, count in (probes.scheduling or {}).items():
        metrics[metric.scheduling(name)] = count
    for number, (mean, lowest) in probes.clocks.items():
        metrics[metric.cpu(number, "mhz")] = mean
        metrics[metric.cpu(number, "mhz_min")] = lowest
    for number, (median, slowest) in probes.speeds.items():
        metrics[metric.cpu(number, "speed")] = median
        metrics[metric.cpu(number, "speed_min")] = slowest
    if probes.speed_cost_ms is not None:
        metrics[metric.SPEED_COST.name] = probes.speed_cost_ms
    return metrics
