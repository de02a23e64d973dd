"""A hosts run's window turned into the figures every trial stores, and held against
the hosts' own counters.

The DUT's cores are the trial's ``cpu<N>.*`` metrics (the machine the verdict is about);
the endpoints' busiest core and the processes the trial started on them (the generator
named as the lab names its own), every host's sampler cost, the DUT's temperatures and
clocks are stored beside them.
"""

import logging

from tunnelbench.errors import LabError
from tunnelbench.kinds import Generator
from tunnelbench.model import metrics as metric
from tunnelbench.probes import links
from tunnelbench.remote import probes
from tunnelbench.remote.session import Session

log = logging.getLogger(__name__)

#: The most bytes one counted packet can carry: Linux's largest GSO/GRO aggregate (BIG
#: TCP's 512 KiB), so a packet count times this bounds the bytes it can stand for.
LARGEST_PACKET = 512 * 1024
#: The generators as a host's PATH names them (iperf2's program is ``iperf``).
IPERF3, IPERF2 = "iperf3", "iperf"
#: The ends' processes are read this long before the window's end: the generator's test
#: ends with the window, and its processes exit with it (their CPU is read from /proc).
PROCESS_LEAD_S = 0.3


def generator_metrics(
    marks: dict[str, dict[str, tuple[float, probes.Processes]]], generator: Generator
) -> dict[str, float]:
    """The CPU of the processes the trial started on the client and the server over the
    window (up to :data:`PROCESS_LEAD_S` before its end), as the lab names its own: the
    generator as ``iperf3-client@client`` (its labels' prefix is the generator's, so the
    rules know it), any other (a tunnel's daemon at an end) as ``comm@role``."""
    programs = {IPERF3, IPERF2}
    metrics: dict[str, float] = {}
    for role, (t0, first) in marks["begin"].items():
        if role not in marks["last"]:
            continue
        t1, last = marks["last"][role]
        for comm, pct in probes.process_cpu(first, last, t1 - t0).items():
            label = f"{generator.value}-{role}@{role}" if comm in programs else f"{comm}@{role}"
            metrics[metric.process(label)] = pct
    return metrics


def host_metrics(
    session: Session, results: dict[str, probes.SamplerResult], begin: float, end: float
) -> dict[str, float]:
    metrics: dict[str, float] = {}
    dut = session.file.dut
    for role, result in results.items():
        if result.cost_pct is not None:
            metrics[metric.remote(role, "sampler_cpu_pct")] = round(result.cost_pct, 2)
        figures = probes.window(result.samples, begin, end)
        if figures is None:
            raise LabError(
                f"{role}: the CPU sampler sent {len(result.samples)} samples, too few for the"
                " measured window (a slow or lost SSH connection)"
            )
        metrics[metric.remote(role, "samples")] = figures.samples
        busiest = max(figures.cores.values(), key=lambda parts: -parts["idle"])
        metrics[metric.remote(role, "busiest_core_pct")] = round(100.0 - busiest["idle"], 2)
        if role != dut:
            continue
        for core, parts in figures.cores.items():
            for part, value in parts.items():
                metrics[metric.cpu(core, part)] = round(value, 2)
        for core, mhz in figures.mhz_mean.items():
            metrics[metric.cpu(core, "mhz")] = mhz
            metrics[metric.cpu(core, "mhz_min")] = figures.mhz_min[core]
        for zone, celsius in figures.temp_max_c.items():
            metrics[metric.thermal_max(role, zone)] = celsius
        metrics[metric.SAMPLER_SAMPLES.name] = figures.samples
        metrics[metric.SAMPLER_WINDOW.name] = round(end - begin, 3)
        if result.cost_pct is not None:
            metrics[metric.SAMPLER_CPU.name] = round(result.cost_pct, 2)
    return metrics


def check_counters(session: Session, metrics: dict[str, float], duration: int) -> None:
    """The second instrument (:func:`tunnelbench.probes.links.check_forwarded`): the DUT
    forwarded at least what the generator says arrived. A black box is checked from
    outside first (the receiving ends' interfaces received at least what the generator
    reports arrived there), then by its SNMP agent where one was read. Each refusal names
    the instruments that disagree; an agent whose byte count alone falls short, while its
    packets show the traffic crossed the box, fails nothing: its byte counts are dropped
    from ``metrics`` and a warning says so."""
    dut = session.file.dut
    if dut not in session.black_boxes:
        links.check_forwarded(metrics, [dut], duration)
        return
    for receiver, name in (("server", metric.UPLOAD.name), ("client", metric.DOWNLOAD.name)):
        arrived = metrics.get(name, 0.0) * links.counted_seconds(metrics, duration) / 8
        received = links.busiest(metrics, receiver, "rx_bytes") or 0
        if arrived and received < arrived:
            raise LabError(
                f"the {receiver}'s kernel counted {received:,.0f} bytes received on its busiest"
                f" interface, fewer than the {arrived:,.0f} the generator reports arrived there"
            )
    packets = links.busiest(metrics, dut, "tx_packets")
    if packets is None:  # its agent's counters were not read
        return
    arrived = links.arrived_bytes(metrics, duration)
    sent = links.busiest(metrics, dut, "tx_bytes")
    # Refreshes it discarded: the bytes of those interfaces are already left out.
    discarded = bool(metrics.get(metric.snmp(dut, metric.SNMP_DISCARDED)))
    if sent is not None and sent >= arrived and not discarded:
        return
    agent = f"{dut}'s SNMP agent"
    if packets * LARGEST_PACKET < arrived:
        raise LabError(
            f"{agent} counted {packets:,.0f} packets out of {dut}'s busiest interface, too few"
            f" for the {arrived:,.0f} bytes the generator reports arrived (and the ends'"
            f" kernels received) even as {LARGEST_PACKET // 1024} KiB aggregates: the"
            f" traffic did not cross {dut}, or its agent miscounts (check the route from the"
            " client to the server's address)"
        )
    if discarded:  # said with the agent's figures (snmp_watch)
        return
    for name in list(metrics):
        device = metric.parse_device(name, "link")
        if device is not None and device[0].startswith(f"{dut}.") and device[1].endswith("_bytes"):
            del metrics[name]
    log.warning(
        "%s counted %s bytes out of %s's busiest interface, fewer than the %s the generator"
        " reports arrived (and the ends' kernels received), while its packets show the"
        " traffic crossed: the agent's byte counts are not stored",
        agent, f"{sent or 0:,.0f}", dut, f"{arrived:,.0f}",
    )  # fmt: skip
