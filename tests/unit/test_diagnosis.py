"""Verdicts and advice on real recorded runs (tests/fixtures/runs/*.db)."""

from dataclasses import replace
from pathlib import Path

import pytest

from tests.report_fixtures import recorded as recorded_copy
from tunnelbench.analysis.advice import Sibling, advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose, medians
from tunnelbench.analysis.summary import ConfigSummary, summarize_run
from tunnelbench.analysis.verdicts import above_ceiling_pct, link_bound_pct
from tunnelbench.kinds import Direction, Queue, Shaper, Topology
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import LabSettings, LinkSettings, TrafficSettings, TrialConfig
from tunnelbench.model.records import Resolved, TrafficFound
from tunnelbench.model.wan import AGGREGATE_MAX_BYTES, burst_bytes, shaper_lead_bytes

# 1 Gbit/s shaped by tbf/htb, MTU 1500, IPv4, TCP timestamps: the shaper counts the L3
# packet + 14 bytes of Ethernet header; payload 1500 - 20 - 20 - 12 = 1448 bytes.
SHAPED_NONE_CEILING = 1448 / 1514 * 1e9  # 956.4 Mbit/s
# WireGuard at tunnel MTU 1420: payload 1420 - 52 = 1368; outer 1420 + 60 = 1480, + 14.
SHAPED_WG_CEILING = 1368 / 1494 * 1e9  # 915.7 Mbit/s


def recorded(name: str, tmp: Path) -> tuple[list[ConfigSummary], Environment]:
    store = recorded_copy(name, tmp)
    run = store.run("latest")
    summaries = summarize_run(store.trials(run.id))
    store.close()
    return summaries, run.environment


def subject(s: ConfigSummary, env: Environment, ceiling: float | None = None) -> Subject:
    ok = [t.metrics for t in s.trials if t.status == "ok"]
    return Subject(s.config, s.resolved, medians(ok), ceiling, env, runs=tuple(ok))


def test_shaped_links_are_link_bound_with_the_ceiling_as_evidence(tmp_path):
    summaries, env = recorded("queue-comparison", tmp_path)
    for s in [s for s in summaries if s.goodput]:  # fq_codel/cake were skipped here
        wg = s.config.tunnel.kind.value == "wireguard"
        ceiling = SHAPED_WG_CEILING if wg else SHAPED_NONE_CEILING
        d = diagnose(subject(s, env, ceiling))
        assert d.verdict.bound is Bound.LINK, d.verdict.summary
        share = {e.name: e.value for e in d.verdict.evidence}["share of ceiling"]
        assert 99.0 <= share <= 100.1  # recorded medians: 955.5-956.0 and 915.2-916.2


def test_without_a_ceiling_the_shaped_runs_are_undetermined_and_say_what_was_seen(tmp_path):
    summaries, env = recorded("queue-comparison", tmp_path)
    d = diagnose(subject(summaries[0], env))
    assert d.verdict.bound is Bound.UNDETERMINED
    assert d.verdict.summary.startswith("no limit identified: 955.9 Mbit/s, busiest core")
    assert "87 retransmits" in d.verdict.summary


def test_single_stream_sender_pegged_is_generator_bound_and_advice_cites_the_process(tmp_path):
    summaries, env = recorded("l2-tunnel-mtu", tmp_path)
    base = summaries[0]
    assert base.config.traffic.streams == 1
    d = diagnose(subject(base, env))
    assert d.verdict.bound is Bound.GENERATOR
    assert d.verdict.subject == "iperf3-client:5201"
    assert {e.name: e.value for e in d.verdict.evidence}["iperf3-client:5201 CPU"] >= 90.0
    advice = advise(subject(base, env), d, [])
    assert [a.setting for a in advice] == ["traffic.streams"]
    assert advice[0].measured is None  # this run never measured more streams


def test_cpu_saturation_names_the_core_split_and_process(tmp_path):
    summaries, env = recorded("queue-comparison", tmp_path)
    wg = next(s for s in summaries if s.config.tunnel.kind.value == "wireguard")
    s = subject(wg, env)
    # The recorded wireguard-go trial, with its busiest core driven to saturation.
    hot = max(s.cores, key=s.busy)
    metrics = dict(s.metrics) | {f"cpu{hot}.idle": 3.0}
    d = diagnose(Subject(s.config, s.resolved, metrics, None, env))
    assert d.verdict.bound is Bound.CPU
    assert d.verdict.subject is not None and d.verdict.subject.startswith("wireguard-go@")
    assert f"cpu{hot} at 97%" in d.verdict.summary


@pytest.mark.parametrize(
    ("idle", "loaded", "fires"),
    [(0.05, 30.06, True), (0.05, 30.04, False), (40.0, 79.9, False), (40.0, 80.0, True)],
)
def test_bufferbloat_needs_30_ms_extra_and_twice_the_idle_rtt(idle, loaded, fires, tmp_path):
    summaries, env = recorded("queue-comparison", tmp_path)
    s = subject(summaries[0], env)
    metrics = dict(s.metrics) | {"rtt.idle_ms": idle, "rtt.loaded_ms": loaded}
    d = diagnose(Subject(s.config, s.resolved, metrics, None, env))
    assert (Bound.LATENCY in {f.bound for f in d.findings}) is fires


@pytest.mark.parametrize(
    ("pings", "fires"),
    [
        ([(18, 0)], True),  # every ping of the window lost: no loaded RTT at all
        ([(10, 8), (12, 6), (0, 18)], True),  # most runs lost most of theirs
        ([(10, 8), (0, 18), (1, 17)], False),  # one run of three
        ([(2, 0)], False),  # two pings are any path's noise
        ([(5, 6)], False),  # fewer lost than came back
    ],
)
def test_a_probe_whose_pings_a_full_queue_dropped_is_named(pings, fires, tmp_path):
    summaries, env = recorded("queue-comparison", tmp_path)
    s = subject(summaries[0], env)
    runs = tuple(
        {k: v for k, v in s.metrics.items() if not k.startswith("rtt.loaded")}
        | {"rtt.lost": lost, "rtt.samples": answered}
        | ({"rtt.loaded_ms": 40.0} if answered else {})
        for lost, answered in pings
    )
    metrics = medians(list(runs))
    d = diagnose(Subject(s.config, s.resolved, metrics, None, env, runs=runs))
    named = [f for f in d.findings if f.summary.startswith("the round-trip probe lost")]
    assert bool(named) is fires, [f.summary for f in d.findings]
    if fires:
        (finding,) = named
        assert finding.bound is Bound.LATENCY
        worst = max(pings, key=lambda p: p[0] / (p[0] + p[1]))
        assert f"lost {worst[0]} of its {sum(worst)} pings" in finding.summary
        if "rtt.loaded_ms" not in metrics:
            assert finding.summary.endswith("could not be read from them")


def test_measured_alternative_replaces_the_generic_hint(tmp_path):
    summaries, env = recorded("l2-tunnel-mtu", tmp_path)
    siblings = [Sibling(s.config, s.goodput.median) for s in summaries if s.goodput]
    base = summaries[0]
    d = diagnose(subject(base, env))
    advice = advise(subject(base, env), d, siblings)
    # l2-tunnel-mtu varies MTUs only, so no sibling differs in traffic.streams alone.
    assert all(a.measured is None for a in advice)


def test_a_core_busy_with_someone_elses_user_time_is_not_the_labs_limit(tmp_path):
    summaries, env = recorded("queue-comparison", tmp_path)
    s = subject(summaries[0], env)  # shaped, no tunnel: lab processes use 1-2% of a core
    hot = max(s.cores, key=s.busy)
    outside = dict(s.metrics) | {f"cpu{hot}.idle": 4.0, f"cpu{hot}.user": 87.0}
    d = diagnose(Subject(s.config, s.resolved, outside, None, env))
    assert Bound.CPU not in {f.bound for f in d.findings}
    kernel = dict(s.metrics) | {f"cpu{hot}.idle": 4.0, f"cpu{hot}.user": 5.0}
    d = diagnose(Subject(s.config, s.resolved, kernel, None, env))
    assert d.verdict.bound is Bound.CPU  # system/softirq time is the lab's kernel work


# --- B.3: a link-bound verdict weighs drops, retransmits and the spread of the runs ---
# tests/fixtures/runs/shaped-small-fifo.db: `tunnelbench run --tunnels none --streams 4
# --stream-mode single --rate 1gbit --queue-limit 20 --runs 5 --duration 2 --warmup 1`:
# every run at the ceiling, the client's WAN queue dropping 0-181 packets per run.


def test_a_link_bound_verdict_names_the_drops_per_run_and_the_spread(tmp_path):
    summaries, env = recorded("shaped-small-fifo", tmp_path)
    (none,) = summaries
    drops = [t.metrics.get("qdisc.client.wan.drops", 0.0) for t in none.trials]
    assert sorted(drops) == [0.0, 0.0, 119.0, 121.0, 181.0]
    d = diagnose(subject(none, env, SHAPED_NONE_CEILING))
    assert d.verdict.bound is Bound.LINK, d.verdict.summary
    assert "the queues dropped 119 (0-181) packets per run" in d.verdict.summary
    assert "runs span 100.0-100.0% of the ceiling" in d.verdict.summary
    evidence = {e.name: e.value for e in d.verdict.evidence}
    assert evidence["queue and interface drops per run"] == 119.0
    assert evidence["slowest run, share of ceiling"] > 99.9


def test_runs_below_the_links_limit_with_loss_are_link_bound_lossy(tmp_path):
    # The audit's case: a median at 96.4% of the ceiling, runs spanning 90.9-98.0% with
    # 104-216 retransmits. Here: the recorded shaped runs of queue-comparison (pfifo 50,
    # iperf3 counted 177, 4 and 87 retransmits) against a ceiling at which the slowest
    # run reaches 94.9% and the median 95.4%.
    summaries, env = recorded("queue-comparison", tmp_path)
    none = summaries[0]
    goodputs = sorted(t.metrics["goodput_bps"] for t in none.trials if t.status == "ok")
    ceiling = goodputs[0] / 0.949
    d = diagnose(subject(none, env, ceiling))
    assert d.verdict.bound is Bound.LINK_LOSSY, d.verdict.summary
    assert "the slowest run reached only 94.9%" in d.verdict.summary
    assert "TCP retransmitted 87 (4-177) segments per run (iperf3's count)" in d.verdict.summary
    advice = advise(subject(none, env, ceiling), d, [])
    # A fair queue, but no larger one: 50 packets hold what 4 flows need over the lab's
    # sub-millisecond round trip (4 segments each), as the 98.8% row showed.
    assert {a.setting for a in advice} == {"lab.wan.queue"}
    # The same runs without a retransmit or drop: the spread alone is not loss.
    lossless = Subject(
        none.config,
        none.resolved,
        {k: v for k, v in medians(t.metrics for t in none.trials).items() if k != "retransmits"},
        ceiling,
        env,
        runs=tuple({k: v for k, v in t.metrics.items() if k != "retransmits"} for t in none.trials),
    )
    assert diagnose(lossless).verdict.bound is Bound.LINK


# --- B.6: busy cores are attributed to the lab's work or to outside processes ---


def loaded(s: ConfigSummary, env: Environment, lab: float, outside: float) -> Subject:
    """The recorded runs with the load probes' two figures, as a run with them stores."""
    runs = tuple(
        t.metrics | {"load.lab_pct": lab, "load.outside_pct": outside}
        for t in s.trials
        if t.status == "ok"
    )
    return Subject(s.config, s.resolved, medians(runs), None, env, runs=runs)


def test_cores_saturated_by_an_outside_process_are_not_the_labs_limit(tmp_path):
    # The audit's case: "all 2 cores at 90% or more" while the lab's processes used
    # 8-11% of a core; here the recorded none/4-stream runs (both cores >= 90% busy)
    # with the outside processes taking all but 10% of a core.
    summaries, env = recorded("streams-5-runs", tmp_path)
    s = next(s for s in summaries if s.config.traffic.streams == 4 and s.label == "none")
    busy = sum(subject(s, env).busy(c) for c in subject(s, env).cores)
    d = diagnose(loaded(s, env, lab=10.0, outside=busy - 10.0))
    assert Bound.CPU not in {f.bound for f in d.findings}, d.verdict.summary
    assert d.verdict.bound is Bound.OUTSIDE_LOAD
    assert "this figure is not trustworthy" in d.verdict.summary
    assert f"up to {busy - 10.0:.0f}% of a core in 5 of 5 runs" in d.verdict.summary


def test_cores_the_lab_fills_stay_cpu_bound_and_outside_load_is_told(tmp_path):
    summaries, env = recorded("streams-5-runs", tmp_path)
    s = next(s for s in summaries if s.config.traffic.streams == 4 and s.label == "none")
    quiet = diagnose(loaded(s, env, lab=120.0, outside=2.0))
    assert quiet.verdict.bound is Bound.CPU
    assert quiet.verdict.summary.startswith("all 2 cores at 90% or more")
    assert Bound.OUTSIDE_LOAD not in {f.bound for f in quiet.findings}
    # One core's worth of outside work: the lab still fills one core, not both.
    busy = sum(subject(s, env).busy(c) for c in subject(s, env).cores)
    shared = diagnose(loaded(s, env, lab=60.0, outside=busy - 100.0))
    assert shared.verdict.bound is Bound.OUTSIDE_LOAD
    (cpu,) = [f for f in shared.others if f.bound is Bound.CPU]
    assert not cpu.summary.startswith("all 2 cores")
    assert f"outside processes {busy - 100.0:.0f}%" in cpu.summary


def test_without_the_load_probes_the_verdict_says_attribution_was_not_recorded(tmp_path):
    summaries, env = recorded("streams-5-runs", tmp_path)
    s = next(s for s in summaries if s.config.traffic.streams == 4 and s.label == "none")
    d = diagnose(subject(s, env))
    assert d.verdict.bound is Bound.CPU
    assert d.verdict.summary.endswith("; outside load not recorded in this run")


def test_a_generator_whose_limiting_end_changes_between_runs_is_still_the_limit(tmp_path):
    """One iperf3 process a side, 8 streams: recorded on the reference VM, the sender was
    at 100% in some runs and the receiver at 99% in the others. Each side's median alone
    (60% and 82% here) is under 90%, yet in every run one of them held the traffic back."""
    summaries, env = recorded("l2-tunnel-mtu", tmp_path)
    base = summaries[0]
    client, server = "proc.iperf3-client:5201", "proc.iperf3-server:5201"
    shares = [(99.99, 64.4), (99.99, 47.8), (99.9, 50.0), (21.1, 99.99), (18.9, 98.9), (21.0, 99.6)]
    recorded_run = next(t.metrics for t in base.trials if t.status == "ok")
    runs = [recorded_run | {client: sender, server: receiver} for sender, receiver in shares]
    alternating = Subject(base.config, base.resolved, medians(runs), None, env, runs=tuple(runs))
    assert alternating.metrics[client] < 90 and alternating.metrics[server] < 90
    d = diagnose(alternating)
    assert d.verdict.bound is Bound.GENERATOR, d.verdict.summary
    busiest = {e.name: e.value for e in d.verdict.evidence}["busiest generator process CPU"]
    assert busiest >= 99.0
    assert "busiest process (iperf3-client:5201 in " in d.verdict.summary
    # A run where neither side reached 90% pulls the median down like any other.
    calm = [run | {client: 50.0, server: 60.0} for run in runs]
    quiet = Subject(base.config, base.resolved, medians(calm), None, env, runs=tuple(calm))
    assert diagnose(quiet).verdict.bound is not Bound.GENERATOR


def test_above_the_ceiling_means_beyond_what_the_shapers_bucket_lets_through(tmp_path):
    """Goodput ≤ ceiling + one full token bucket over the window: at 1 Gbit/s over 10 s the
    bucket is nothing, at 3 Mbit/s over 2 s its ten frames are 2% (a guest's vxlan in ESP
    read 101.2%), so 102% there is the link and 103.5% is a false number."""
    summaries, env = recorded("queue-comparison", tmp_path)
    s = summaries[0]
    fast = replace(s.config.lab.wan, rate=10**9, shaper=Shaper.TBF)
    ten = replace(s.config, lab=replace(s.config.lab, wan=fast))
    ten = replace(ten, traffic=replace(ten.traffic, duration=10))
    assert above_ceiling_pct(ten) == pytest.approx(101.01)
    slow = replace(s.config.lab.wan, rate=3 * 10**6, mtu=1500, shaper=Shaper.TBF)
    two = replace(s.config, lab=replace(s.config.lab, wan=slow))
    two = replace(two, traffic=replace(two.traffic, duration=2))
    assert above_ceiling_pct(two) == pytest.approx(101 + 100 * 15_140 / 750_000)
    goodput = subject(s, env).goodput_bps
    for pct, bound in ((102.0, Bound.LINK), (103.5, Bound.ABOVE_CEILING)):
        seen = replace(subject(s, env, goodput / pct * 100), config=two)
        assert diagnose(seen).verdict.bound is bound, (pct, diagnose(seen).verdict.summary)
    seen = replace(subject(s, env, goodput / 102.0 * 100), config=ten)
    assert diagnose(seen).verdict.bound is Bound.ABOVE_CEILING


def test_htb_may_send_one_aggregate_ahead_of_its_rate_and_tbf_may_not():
    """htb sends a packet while its tokens are not negative and pays after, so with
    offloads on a 64 KiB GSO aggregate can lead the rate on top of the bucket (a guest's
    plain TCP through htb at 3 Mbit/s read 107% over 2 s); tbf segments what its bucket
    does not cover. An impaired link hands the shaper wire packets: one frame more."""
    wan = LinkSettings(rate=3 * 10**6, mtu=1500)
    assert shaper_lead_bytes(wan) == burst_bytes(3 * 10**6, 1500) == 15_140
    htb = replace(wan, shaper=Shaper.HTB)
    assert shaper_lead_bytes(htb) == 15_140 + AGGREGATE_MAX_BYTES
    assert shaper_lead_bytes(replace(htb, delay=10_000)) == 15_140 + 1514
    assert shaper_lead_bytes(replace(htb, rate=None)) == 0
    config = TrialConfig(lab=LabSettings(wan=htb), traffic=TrafficSettings(duration=2))
    assert above_ceiling_pct(config) == pytest.approx(101 + 100 * (15_140 + 65_550) / 750_000)
    assert above_ceiling_pct(config) > 107.0
    assert above_ceiling_pct(replace(config, lab=LabSettings(wan=wan))) < 107.0


def test_bbr_below_95_percent_by_its_drain_round_trip_is_still_the_link():
    """BBR paces at 0.75 of its estimate for one round trip in every eight: a 2 s window
    under TCG, whose loaded RTT read 396 ms, held that round trip alone and read 94% of a
    3 Mbit/s link (a kernel-suite run). The link is still the limit: the share asked of a
    BBR trial is lower by what that round trip takes of the window (90.05% here); cubic's
    stays 95%, and BBR's too where its round trip is short."""
    wan = LinkSettings(rate=3 * 10**6, mtu=1500)
    config = TrialConfig(
        lab=LabSettings(wan=wan), traffic=TrafficSettings(duration=2, congestion="bbr")
    )
    ceiling = 2.86e6
    seen = {
        "goodput_bps": 0.94 * ceiling, "rtt.loaded_ms": 396.0, "rtt.idle_ms": 0.34,
        "rtt.loaded_p95_ms": 516.9, "goodput.window_s": 2.0,
    }  # fmt: skip
    bbr = Subject(config, Resolved(traffic=TrafficFound(congestion="bbr")), seen, ceiling)
    assert link_bound_pct(bbr) == pytest.approx(95 - 25 * 0.396 / 2)
    assert diagnose(bbr).verdict.bound is Bound.LINK, diagnose(bbr).verdict.summary
    cubic = replace(
        bbr,
        resolved=Resolved(traffic=TrafficFound(congestion="cubic")),
        config=TrialConfig(lab=config.lab),
    )
    assert link_bound_pct(cubic) == 95.0
    assert diagnose(cubic).verdict.bound is not Bound.LINK
    short = replace(bbr, metrics=seen | {"rtt.loaded_ms": 4.0})
    assert link_bound_pct(short) == pytest.approx(94.95)
    assert diagnose(short).verdict.bound is not Bound.LINK


#: A 700 kB FIFO at 20 Mbit/s, one cubic stream uploading (this machine, 3 runs each):
#: road-warrior, where it is the client's own egress (the first run's figures), and
#: site-to-site, on gwa's WAN (its first run's).
OWN_FIFO = {
    "rtt.idle_ms": 0.065,
    "rtt.loaded_ms": 49.8,
    "qdisc.client.wan.drops": 0.0,
    "qdisc.client.wan.window_last_bytes": 120969.0,
    "qdisc.client.wan.sent_bytes": 11459892.0,
    "link.client.wan.tx_packets": 7572.0,
}
ROUTER_FIFO = {
    "rtt.idle_ms": 0.088,
    "rtt.loaded_ms": 235.5,
    "qdisc.gwa.wan.drops": 4.0,
    "qdisc.gwa.wan.window_last_bytes": 630372.0,
}


def _fifo_subject(tmp_path: Path, topology: Topology, metrics: dict[str, float],
                  direction: Direction = Direction.UPLOAD) -> Subject:  # fmt: skip
    summaries, env = recorded("queue-comparison", tmp_path)
    s = subject(summaries[0], env)
    wan = replace(s.config.lab.wan, rate=20_000_000, queue=Queue.BFIFO, queue_bytes=700_000)
    config = replace(
        s.config,
        lab=replace(s.config.lab, topology=topology, wan=wan),
        traffic=replace(s.config.traffic, direction=direction),
    )
    return Subject(config, s.resolved, metrics, None, env)


def test_a_fifo_in_the_senders_own_host_that_never_filled_is_said_to_be_theirs(tmp_path):
    """TCP Small Queues holds a sender's bytes in its own host's qdiscs: the latency
    finding says the FIFO held 121 of its 700 kB there, where a router's fills."""
    d = diagnose(_fifo_subject(tmp_path, Topology.ROAD_WARRIOR, OWN_FIFO))
    (latency,) = [f for f in d.findings if f.bound is Bound.LATENCY]
    assert latency.summary.endswith(
        "packets wait in a queue (bufferbloat); the queue is the sender's own (the client's"
        " egress in road-warrior: its TCP Small Queues keeps each stream's bytes there to"
        " about two aggregates), so the FIFO held 121 kB of its 700 kB with no drop; a"
        " router's FIFO fills (site-to-site, or the download direction)"
    )
    held = {e.name: e.value for e in latency.evidence}
    assert held["client.wan queue capacity"] == 700_000


@pytest.mark.parametrize(
    ("topology", "metrics", "direction"),
    [
        (Topology.SITE_TO_SITE, ROUTER_FIFO, Direction.UPLOAD),  # a router's queue
        (Topology.ROAD_WARRIOR, OWN_FIFO, Direction.DOWNLOAD),  # gw's egress: a router's
        (Topology.ROAD_WARRIOR, OWN_FIFO | {"qdisc.client.wan.drops": 3.0}, Direction.UPLOAD),
        (Topology.ROAD_WARRIOR,
         OWN_FIFO | {"qdisc.client.wan.window_last_bytes": 360_000.0}, Direction.UPLOAD),
    ],
)  # fmt: skip
def test_a_routers_fifo_or_one_that_dropped_or_filled_is_not_the_senders(
    topology, metrics, direction, tmp_path
):
    d = diagnose(_fifo_subject(tmp_path, topology, metrics, direction))
    (latency,) = [f for f in d.findings if f.bound is Bound.LATENCY]
    assert latency.summary.endswith("packets wait in a queue (bufferbloat)")
