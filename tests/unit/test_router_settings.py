"""The router as the users have it, without a lab: per-role CPU budgets and NIC queues in
plans, their steering masks, the budget probe's reading of the kernel's counters, and the
verdicts and advice they lead to."""

import statistics
from dataclasses import replace

import pytest

from tunnelbench.analysis.advice import Sibling, advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose
from tunnelbench.bench import planfile
from tunnelbench.errors import LabError
from tunnelbench.kinds import Topology, WanEncapsulation
from tunnelbench.lab import netns
from tunnelbench.lab.host import NetnsHost
from tunnelbench.lab.topology import CHAINS
from tunnelbench.model.plan import LabSettings, LinkSettings, RoleBudgets, RoleCpus, TrialConfig
from tunnelbench.model.records import Resolved, WhereRan
from tunnelbench.probes.budget import budget_metrics, parse_stat
from tunnelbench.system import probing


def test_role_budgets_and_queues_are_plan_settings_and_axes():
    plan = planfile.parse(
        '[base.lab]\nqueues = 4\n[base.lab.budget]\ngw = "50%"\n'
        '[matrix]\n"lab.budget.client" = [0.25, "100%"]\n',
        "p.toml",
    )
    configs = plan.experiment.configs
    assert [c.lab.budget for c in configs] == [
        RoleBudgets(client=0.25, gw=0.5),
        RoleBudgets(client=1.0, gw=0.5),
    ]
    assert {c.lab.queues for c in configs} == {4}
    # Stored before these settings existed, a configuration keeps its key.
    old = TrialConfig().to_dict()
    del old["lab"]["budget"], old["lab"]["queues"]
    assert TrialConfig.from_dict(old).key() == TrialConfig().key()


def lab_of(settings: LabSettings, cpus: dict[str, tuple[int, ...]] | None = None) -> netns.Lab:
    chain = CHAINS[settings.topology]
    return netns.Lab("abc123", settings, None, chain, cpus=cpus or {})  # type: ignore[arg-type]


def test_n_queues_spread_the_receive_work_over_n_of_the_roles_cores():
    lab = lab_of(LabSettings(queues=2))
    assert netns.queue_masks(lab, [0, 1, 2, 3]) == {role: "3" for role in lab.chain.roles}
    # More queues than cores: every core; one queue: one core, the role's first.
    assert netns.queue_masks(lab_of(LabSettings(queues=8)), [0, 1])["gw"] == "3"
    assert netns.queue_masks(lab_of(LabSettings(queues=1)), [0, 1])["gw"] == "1"
    # A role held to its cores spreads over them only.
    pinned = lab_of(LabSettings(queues=2, topology=Topology.SITE_TO_SITE), {"gwa": (2, 3)})
    assert netns.queue_masks(pinned, [0, 1, 2, 3])["gwa"] == "c"
    assert netns.receive_masks(pinned) == netns.queue_masks(pinned, probing.cpus())


def test_veths_are_created_with_the_queues_asked_for():
    assert netns.queue_counts(LabSettings()) == []
    assert netns.queue_counts(LabSettings(queues=4)) == [
        "numtxqueues", "4", "numrxqueues", "4",
    ]  # fmt: skip


def test_a_role_budget_process_enters_its_cgroup_before_it_executes(tmp_path):
    host = NetnsHost("tb-x-client", None, "1", tmp_path / "cg")  # type: ignore[arg-type]
    argv = host.spawn_argv(["iperf3", "-c", "198.18.1.2"])
    # The shell moves itself, then becomes `ip netns exec`, which becomes the program.
    assert argv[:4] == ["sh", "-c", 'echo $$ >"$0" && exec "$@"', str(tmp_path / "cg/cgroup.procs")]
    assert argv[4:] == [
        "ip", "netns", "exec", "tb-x-client", "taskset", "-c", "1", "iperf3", "-c", "198.18.1.2",
    ]  # fmt: skip
    assert NetnsHost("tb-x-gw", None).spawn_argv(["sleep", "1"])[0] == "ip"  # type: ignore[arg-type]


V1 = "nr_periods {}\nnr_throttled {}\nthrottled_time {}\n"
V2 = "usage_usec 9\nuser_usec 1\nsystem_usec 8\nnr_periods {}\nnr_throttled {}\nthrottled_usec {}\n"


def test_the_budget_probe_reads_throttled_periods_and_time_from_either_cgroup_version():
    before, after = (
        parse_stat(V1.format(10, 2, 5_000_000)),
        parse_stat(V1.format(40, 29, 1_205_000_000)),
    )
    assert budget_metrics("client", before, after) == {
        "budget.client.throttled_pct": 90.0,
        "budget.client.throttled_s": 1.2,
    }
    before, after = parse_stat(V2.format(0, 0, 0)), parse_stat(V2.format(8, 0, 0))
    assert budget_metrics("gw", before, after)["budget.gw.throttled_pct"] == 0.0
    # A role that never had work in a period has no share to give, not a division by 0.
    idle = parse_stat(V2.format(3, 1, 10))
    assert budget_metrics("gw", idle, idle)["budget.gw.throttled_pct"] == 0.0
    with pytest.raises(LabError, match=r"lab.budget.gw: the cgroup's cpu.stat has no nr_periods"):
        budget_metrics("gw", {}, idle)


def subject(config: TrialConfig, *runs: dict[str, float]) -> Subject:
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return Subject(config, Resolved.from_dict({}), medians, runs=runs)


# A core saturated by the lab's receive and forwarding work while the other idles.
HOT = {
    "goodput_bps": 9e9, "cpu0.idle": 0.0, "cpu0.user": 5.0, "cpu0.system": 25.0,
    "cpu0.softirq": 70.0, "cpu1.idle": 60.0, "cpu1.user": 20.0, "cpu1.system": 15.0,
    "cpu1.softirq": 5.0,
}  # fmt: skip


def test_one_queue_on_one_busy_core_is_the_verdict_and_more_queues_the_advice():
    one = TrialConfig(lab=LabSettings(queues=1))
    d = diagnose(subject(one, HOT, HOT, HOT))
    assert d.verdict.bound is Bound.SINGLE_QUEUE
    assert d.verdict.subject == "cpu0"
    assert d.verdict.summary.startswith("one queue, one core: cpu0 is 100% busy, 70% of it in")
    evidence = {e.name: e.value for e in d.verdict.evidence}
    assert evidence == {
        "cpu0 busy": 100.0, "cpu0 softirq": 70.0, "cpu1 idle": 60.0, "queues per link": 1,
    }  # fmt: skip
    # The run measured two queues, five runs a side: every run faster, so a gain.
    two = replace(one, lab=replace(one.lab, queues=2))
    runs = (9e9, 9.1e9, 8.9e9, 9.05e9, 8.95e9)
    sibling = Sibling(two, 1.4e10, (1.38e10, 1.4e10, 1.41e10, 1.39e10, 1.42e10))
    s = subject(one, *(HOT | {"goodput_bps": g} for g in runs))
    advice = advise(s, diagnose(s), [sibling])
    first = advice[0]
    assert first.setting == "lab.queues" and first.candidates == (2,)
    assert first.measured is not None and first.measured.outcome == "gain"
    # Two queues, or a core busy in user time (a process, not receive work): not this.
    assert diagnose(subject(two, HOT)).verdict.bound is not Bound.SINGLE_QUEUE
    user = HOT | {"cpu0.user": 70.0, "cpu0.softirq": 5.0}
    assert diagnose(subject(one, user)).verdict.bound is not Bound.SINGLE_QUEUE
    # Both cores full: nowhere to spread to.
    full = HOT | {"cpu1.idle": 5.0, "cpu1.user": 60.0}
    assert diagnose(subject(one, full)).verdict.bound is not Bound.SINGLE_QUEUE
    # Roles held to cores: the core is full of what the plan put there, not of a queue.
    pinned = replace(one, lab=replace(one.lab, cpus=RoleCpus(client="1", server="1")))
    assert diagnose(subject(pinned, HOT)).verdict.bound is not Bound.SINGLE_QUEUE
    # Where the work lands holds on an emulated CPU too; what the emulator's speed set
    # does not (the CPU finding behind it is dropped).
    emulated = Subject(one, Resolved(where=WhereRan(virtualization="tcg")), HOT, runs=(HOT,))
    d = diagnose(emulated)
    assert d.verdict.bound is Bound.SINGLE_QUEUE and d.others == ()


def test_a_pppoe_session_is_one_queue_however_many_the_links_have():
    wan = LinkSettings(encapsulation=WanEncapsulation.PPPOE)
    config = TrialConfig(lab=LabSettings(queues=2, wan=wan))
    d = diagnose(subject(config, HOT))
    assert d.verdict.bound is Bound.SINGLE_QUEUE
    assert "the WAN's PPPoE session is one queue" in d.verdict.summary
    assert {e.name: e.value for e in d.verdict.evidence}["queues per link"] == 1
    (advice,) = [a for a in advise(subject(config, HOT), d, []) if a.setting is None]
    assert "RPS on the ppp device" in advice.suggestion
    assert not [a for a in advise(subject(config, HOT), d, []) if a.setting == "lab.queues"]


def test_a_role_held_by_its_budget_is_named_by_the_kernels_throttle_count():
    config = TrialConfig(lab=LabSettings(budget=RoleBudgets(client=0.2)))
    held = {"goodput_bps": 6e9, "cpu0.idle": 50.0, "budget.client.throttled_pct": 96.8}
    d = diagnose(subject(config, held))
    assert d.verdict.bound is Bound.CPU and d.verdict.subject == "client"
    assert (
        "client's processes hit its CPU budget of 20% of a core in 97% of the" in d.verdict.summary
    )
    advice = advise(subject(config, held), d, [])
    # More flows would share the same quota: not advised.
    assert [(a.setting, a.candidates) for a in advice] == [("lab.budget.client", (0.4, None))]
    # Throttled in a few periods only: the budget is not what held it.
    light = held | {"budget.client.throttled_pct": 12.0}
    assert diagnose(subject(config, light)).verdict.bound is not Bound.CPU
