"""A black box's SNMP agent as an instrument with a delay, from a real agent's polls
(net-snmp 5.9.3's snmpd just started, polled every 0.5 s by ``snmp_watch.Watch``): its
refreshes placed between polls, its intervals measured, the closing counts from the
first refresh after the traffic, and a CPU span checked against where its refreshes were
placed (an agent's first CPU values are zeros, the next since boot: a span from those is
the host's uptime, never the window's)."""

import json
from pathlib import Path

from tunnelbench.remote import snmp, snmp_watch

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "remote"


def load(name: str) -> tuple[snmp.Device, list[snmp_watch.Poll]]:
    data = json.loads((FIXTURE / name).read_text())
    d = data["device"]
    device = snmp.Device(d["description"], d["interfaces"], d["cpu_counters"], d["cores"])
    polls = [
        snmp_watch.Poll(p["asked"], snmp.Snapshot(p["at"], p["counters"], p["cpu"]))
        for p in data["polls"]
    ]
    return device, polls


DEVICE, POLLS = load("snmp-polls-agent-start.json")


def test_the_agents_refreshes_are_placed_between_polls_and_their_intervals_measured():
    interfaces = snmp_watch.refreshes(POLLS, snmp_watch._interfaces)
    cpu = snmp_watch.refreshes(POLLS, snmp_watch._cpu)
    assert [round(s.at, 2) for s in interfaces] == [2.62, 5.94, 9.13, 11.77, 15.03, 17.68, 20.83]
    # the first CPU values (zeros until its first load) are no refresh; the load is one
    assert POLLS[0].snapshot.cpu["idle"] == 0
    assert [round(s.at, 2) for s in cpu] == [4.89, 9.65, 15.03, 19.78]
    assert all(s.after < s.at for s in interfaces + cpu)
    # net-snmp: its interface table every 3 s, its CPU counters every 5 s (+ a poll)
    assert snmp_watch.interval(interfaces) == 3.17
    assert snmp_watch.interval(cpu) == 4.76
    assert snmp_watch.interval(cpu[:2]) == round(9.65 - 4.89, 2)
    assert snmp_watch.interval(cpu[:1]) is None


def test_the_closing_counts_come_from_the_first_refresh_after_the_traffic():
    seen = snmp_watch.closed(POLLS, ended=10.0)
    assert seen is not None and round(seen.at, 2) == 11.77 and seen.after >= 10.0
    assert snmp_watch.closed(POLLS, ended=21.0) is None  # not yet: poll on


def test_a_trials_figures_from_the_agent():
    found = snmp_watch.figures(
        "gw", DEVICE, POLLS, traffic_from=1.0, begin=6.0, end=18.0, ended=18.0
    )
    m = found.metrics
    assert m["snmp.gw.if_refresh_s"] == 3.17 and m["snmp.gw.cpu_refresh_s"] == 4.76
    assert m["snmp.gw.close_delay_s"] == round(20.83 - 18.0, 2)
    assert m["snmp.gw.window_s"] == 12.0
    # the CPU between the refresh nearest the window's start (4.89) and the last by its
    # end (15.03): every core's ticks over 10 s, within a refresh of the 12 s window
    assert 9.9 <= m["snmp.gw.cpu_covered_s"] <= 10.3, m
    assert 0 <= m["snmp.gw.cpu_busy_pct"] <= 100
    # the pings out of va over the whole trial, from the first poll to the closing refresh
    assert m["link.gw.va.tx_packets"] > 0 and m["link.gw.va.tx_bytes"] > 0
    assert "snmp.gw.discarded_refreshes" not in m
    assert found.notes == []
    assert found.record["cpu_refreshes"] == [-1.11, 3.65, 9.03, 13.78]


def test_a_cpu_span_far_longer_than_the_window_is_never_stored():
    """The old reading: the agent's values at the window's two edges, the first its
    zeros: 2,500-odd seconds of the host's uptime for a 15 s span."""
    old = snmp.cpu_metrics("gw", DEVICE, POLLS[0].snapshot, POLLS[-1].snapshot)
    assert old["snmp.gw.cpu_covered_s"] > 2000
    first = POLLS[0]
    at_start = snmp_watch.Seen(first.asked - 0.5, first.at, first.snapshot)
    later = snmp_watch.refreshes(POLLS, snmp_watch._cpu)
    metrics, why = snmp_watch._cpu_span("gw", DEVICE, [at_start, *later], 0.0 - 1, 0.0, 20.0)
    assert metrics == {}
    assert why.startswith("gw's SNMP CPU counters covered ") and "not the window's" in why


def test_a_window_too_short_for_two_cpu_refreshes_gives_no_share_and_says_why():
    found = snmp_watch.figures("gw", DEVICE, POLLS, traffic_from=5.5, begin=6.5, end=8.5, ended=8.5)
    assert "snmp.gw.cpu_busy_pct" not in found.metrics
    assert "snmp.gw.cpu_covered_s" not in found.metrics
    assert found.notes == [
        "gw's SNMP CPU counters refreshed 0 time(s) while the traffic ran: no CPU share"
        " for the window (a longer traffic.duration gives one)"
    ]


def test_refreshes_that_added_packets_and_no_bytes_are_discarded_ones():
    """net-snmp's 32-bit wrap check at ~30 Gbit/s (the issue's trial: the agent's
    ifHCOutOctets rose 6.0 GB where the kernel's rose 51.0 GB): a 3 s refresh carrying
    11 GB raised the counter's high word by 2 and was dropped, its packets kept. Built
    by that rule from the agent's values, not captured: this machine's lab reached 9 Gbit/s
    while these were written."""
    device = snmp.Device("Linux gw", {"3": "eth1"}, cpu_counters=False, cores=None)
    seen = [(0.0, 1_000, 100), (3.0, 6_000_000_000, 520_000), (6.0, 6_000_000_000, 1_900_000),
            (9.0, 6_000_000_000, 3_300_000), (11.5, 6_000_000_000, 3_300_000),
            (12.0, 6_000_300_000, 3_300_400)]  # fmt: skip
    polls = [
        snmp_watch.Poll(at - 0.4, snmp.Snapshot(at, {"3": {"tx_bytes": b, "tx_packets": p}}))
        for at, b, p in seen
    ]
    found = snmp_watch.figures(
        "gw", device, polls, traffic_from=0.5, begin=1.0, end=11.0, ended=11.0
    )
    assert found.metrics["snmp.gw.discarded_refreshes"] == 2
    assert "link.gw.eth1.tx_bytes" not in found.metrics
    assert found.metrics["link.gw.eth1.tx_packets"] == 3_300_300
    assert found.metrics["snmp.gw.close_delay_s"] == 1.0
    assert found.notes == [
        "gw's SNMP agent discarded 2 refresh(es) of eth1.tx_bytes (its packets rose, its"
        " bytes did not: net-snmp drops an update of more than 4 GiB, taking it for a 32-bit"
        " counter's wrap; at its 3 s refresh, above 11.5 Gbit/s): those byte counts are not"
        " stored"
    ]
