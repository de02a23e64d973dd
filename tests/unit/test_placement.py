"""Placement and kept labs without a lab: CPU lists, the pinned layout, the plan settings
and their errors, the command a pinned role runs, configuration keys across versions,
and the scheduler counters' parsing."""

from pathlib import Path

import pytest

from tunnelbench.bench import planfile, skips
from tunnelbench.bench.labpool import lab_key
from tunnelbench.bench.planfile import PlanError
from tunnelbench.kinds import Placement, TunnelKind
from tunnelbench.lab.host import NetnsHost
from tunnelbench.lab.placement import layout, role_cpus
from tunnelbench.lab.state import LabState
from tunnelbench.model import cpulist
from tunnelbench.model.plan import (
    Experiment,
    LabSettings,
    RoleCpus,
    TrafficSettings,
    TrialConfig,
    TunnelSettings,
)
from tunnelbench.probes import scheduling
from tunnelbench.system.probing import Capabilities, CgroupCpu, Check, Congestion

FIXTURES = Path(__file__).parent.parent / "fixtures" / "probes"
ROAD = ("client", "gw", "server")
S2S = ("client", "gwa", "gwb", "server")


@pytest.mark.parametrize(
    ("text", "cores", "canonical"),
    [
        ("0", (0,), "0"),
        ("0-1", (0, 1), "0-1"),
        ("3,1,2", (1, 2, 3), "1-3"),
        ("0-2,5", (0, 1, 2, 5), "0-2,5"),
    ],
)
def test_cpu_lists_parse_and_print_as_the_kernel_writes_them(text, cores, canonical):
    assert cpulist.parse(text) == cores
    assert cpulist.canonical(cores) == canonical


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "not a core number"), ("a", "not a core number"), ("3-1", "runs backwards"),
     ("0-5000", "beyond 1023"), ("1,", "not a core number")],
)  # fmt: skip
def test_bad_cpu_lists_say_what_is_wrong(text, problem):
    with pytest.raises(ValueError, match=problem):
        cpulist.parse(text)


def test_masks_are_what_rps_cpus_takes():
    assert cpulist.mask([0, 1]) == "3"
    assert cpulist.mask([1]) == "2"
    assert cpulist.mask([0, 40]) == "100,00000001"  # 32-bit groups beyond 32 cores


@pytest.mark.parametrize(
    ("cores", "road", "s2s"),
    [
        (1, [(0,), (0,), (0,)], [(0,), (0,), (0,), (0,)]),
        # Fewer cores than roles: the sender alone on the first, the rest share.
        (2, [(0,), (1,), (1,)], [(0,), (1,), (1,), (1,)]),
        (3, [(0,), (1,), (2,)], [(0,), (1,), (1,), (2,)]),
        (4, [(0,), (1, 2), (3,)], [(0,), (1,), (2,), (3,)]),
        (8, [(0, 1), (2, 3, 4), (5, 6, 7)], [(0, 1), (2, 3), (4, 5), (6, 7)]),
    ],
)
def test_the_pinned_layout(cores, road, s2s):
    assert list(layout(ROAD, range(cores)).values()) == road
    assert list(layout(S2S, range(cores)).values()) == s2s


def test_free_holds_no_role_and_a_roles_own_cores_win():
    assert role_cpus(LabSettings(), ROAD, (0, 1)) == {}
    own = LabSettings(cpus=RoleCpus(gw="0"))
    assert role_cpus(own, ROAD, (0, 1)) == {"gw": (0,)}
    pinned = LabSettings(placement=Placement.PINNED, cpus=RoleCpus(server="0-1"))
    assert role_cpus(pinned, ROAD, (0, 1)) == {"client": (0,), "gw": (1,), "server": (0, 1)}


def test_a_pinned_role_starts_its_processes_under_taskset(tmp_path):
    state = LabState(lab_id="abc", topology="road-warrior", owner={})
    assert NetnsHost("tb-abc-gw", state, "1").spawn_argv(["iperf3", "-s"]) == [
        "ip", "netns", "exec", "tb-abc-gw", "taskset", "-c", "1", "iperf3", "-s",
    ]  # fmt: skip
    assert NetnsHost("tb-abc-gw", state).spawn_argv(["iperf3", "-s"]) == [
        "ip", "netns", "exec", "tb-abc-gw", "iperf3", "-s",
    ]  # fmt: skip


def _plan(text: str) -> planfile.Plan:
    return planfile.parse(text, "test.toml")


def test_plans_set_placement_per_run_and_cores_per_role():
    plan = _plan(
        '[base.lab]\nplacement = "pinned"\n[base.lab.cpus]\nserver = "1,0"\n'
        '[matrix]\n"lab.placement" = ["free", "pinned"]\n'
    )
    configs = plan.experiment.configs
    assert [c.lab.placement for c in configs] == [Placement.FREE, Placement.PINNED]
    assert {c.lab.cpus.server for c in configs} == {"0-1"}  # canonical: equal sets, one key
    assert not plan.experiment.fresh_labs
    assert _plan("fresh_labs = true\n").experiment.fresh_labs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[base.lab]\nplacement = "pined"', "lab.placement: unknown value 'pined'"),
        ('[base.lab.cpus]\nclient = "x"', "base.lab.cpus.client: 'x' is not a CPU list"),
        ("[base.lab.cpus]\nclient = 1", "base.lab.cpus.client: 1 is not a CPU list"),
        ('[base.lab.cpus]\nrouter = "0"', "router"),
        ('[base.lab.cpus]\ngwa = "0"', "lab.cpus.gwa: 'gwa' is not a role of road-warrior"),
        ('[base.lab]\nrps_cpus = "3"\nplacement = "pinned"', "lab.rps_cpus: cannot go with"),
        ('fresh_labs = "yes"', "fresh_labs: 'yes' is not true or false"),
    ],
)
def test_bad_placement_settings_are_named(text, message):
    with pytest.raises(PlanError) as caught:
        _plan(text)
    assert message in str(caught.value)


TWO_CORES = Capabilities(
    kernel="6.18",
    euid=0,
    netns=Check(True),
    links={},
    qdiscs={},
    esp={},
    congestion=Congestion(True, "cubic", ("cubic",), (), "cubic"),
    cgroup=CgroupCpu(True, "v1", version=1, path="/sys/fs/cgroup/cpu"),
    cpus=(0, 1),
)


def test_cores_this_machine_lacks_are_a_skip_naming_them():
    lacking = TrialConfig(lab=LabSettings(cpus=RoleCpus(gw="1-3")))
    assert skips.unmet(lacking, TWO_CORES) == (
        "lab.cpus.gw: core 2-3 is not online here (cores 0-1)"
    )
    assert skips.unmet(TrialConfig(lab=LabSettings(cpus=RoleCpus(gw="1"))), TWO_CORES) is None


def test_a_configuration_stored_before_placement_keeps_its_key_and_runs_free():
    old = TrialConfig().to_dict()
    for name in ("placement", "cpus"):
        del old["lab"][name]
    read = TrialConfig.from_dict(old)
    assert read.lab.placement is Placement.FREE and read.lab.cpus == RoleCpus()
    assert '"placement"' not in read.key() and '"cpus"' not in read.key()
    pinned = TrialConfig(lab=LabSettings(placement=Placement.PINNED))
    assert '"placement":"pinned"' in pinned.key() and pinned.key() != read.key()


def test_an_experiment_stored_before_kept_labs_had_fresh_ones():
    data = Experiment((TrialConfig(),)).to_dict()
    assert data["fresh_labs"] is False
    del data["fresh_labs"]
    assert Experiment.from_dict(data).fresh_labs is True


def test_trials_share_a_lab_when_only_their_traffic_differs():
    one = TrialConfig(traffic=TrafficSettings(streams=1))
    four = TrialConfig(traffic=TrafficSettings(streams=4, duration=9))
    vxlan = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN))
    pinned = TrialConfig(lab=LabSettings(placement=Placement.PINNED))
    assert lab_key(one) == lab_key(four)
    assert len({lab_key(one), lab_key(vxlan), lab_key(pinned)}) == 3


def test_sched_counters_parse_from_a_real_file():
    counters = scheduling.parse((FIXTURES / "sched-pid1.txt").read_text())
    assert counters == {"migrations": 56, "involuntary_switches": 28, "voluntary_switches": 339}


def test_sched_counters_over_the_window_count_threads_born_within_and_miss_ended_ones():
    before = {10: {"migrations": 5, "involuntary_switches": 1}, 11: {"migrations": 7}}
    after = {10: {"migrations": 9, "involuntary_switches": 4}, 12: {"migrations": 2}}
    assert scheduling.over_window(before, after) == {
        "migrations": 4 + 2,
        "involuntary_switches": 3,
        "voluntary_switches": 0,
    }


def test_sched_counters_read_every_thread_of_the_processes(tmp_path):
    text = (FIXTURES / "sched-pid1.txt").read_text()
    for tid in (7, 8):
        task = tmp_path / "7" / "task" / str(tid)
        task.mkdir(parents=True)
        (task / "sched").write_text(text)
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "sched").write_text(text)
    threads = scheduling.read([7, 99], proc=tmp_path)  # 99: ended before it was read
    assert threads is not None and set(threads) == {7, 8}


def test_sched_counters_are_absent_not_zero_without_sched_files(tmp_path):
    (tmp_path / "7" / "task" / "7").mkdir(parents=True)
    (tmp_path / "self").mkdir()
    assert scheduling.read([7], proc=tmp_path) is None
