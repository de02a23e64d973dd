"""Plan files: golden expansions of valid plans, golden problems of invalid ones."""

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tunnelbench.bench import planfile
from tunnelbench.errors import UserError
from tunnelbench.kinds import Order, Protocol, StreamMode, TunnelKind
from tunnelbench.model.plan import (
    WARMUP_AUTO_ESTIMATE,
    WARMUP_FIXED_FALLBACK,
    WARMUP_SHAPED_ESTIMATE,
    AdaptiveRepetitions,
    Experiment,
    Settings,
    TrialConfig,
    expand,
    flatten,
    varying_paths,
)

ROOT = FIXTURES.parent.parent
EXPANSIONS = json.loads((FIXTURES / "plans" / "expansions.json").read_text())
INVALID = json.loads((FIXTURES / "plans" / "invalid.json").read_text())


def _summary(path: Path) -> list[str]:
    trials = expand(planfile.load(path).experiment)
    paths = varying_paths(dict.fromkeys(t.config for t in trials))
    lines = []
    for t in trials:
        flat = flatten(t.config.to_dict())
        lines.append(f"{t.seq} r{t.repetition} " + " ".join(f"{p}={flat[p]}" for p in paths))
    return lines


def test_every_scenario_and_valid_fixture_has_a_golden_expansion():
    files = sorted((FIXTURES / "plans" / "valid").glob("*.toml"))
    files += sorted((ROOT / "scenarios").glob("*.toml"))
    assert sorted(EXPANSIONS) == sorted(str(f.relative_to(ROOT)) for f in files)
    assert len(files) >= 8


@pytest.mark.parametrize("name", sorted(EXPANSIONS))
def test_expansion_matches_golden(name):
    assert _summary(ROOT / name) == EXPANSIONS[name]


@pytest.mark.parametrize("case", INVALID, ids=[c["case"] for c in INVALID])
def test_invalid_plan_reports_exactly_these_problems(case):
    with pytest.raises(planfile.PlanError) as caught:
        planfile.parse(case["plan"], "plan.toml")
    assert caught.value.problems == case["problems"]
    assert caught.value.exit_code == 2
    lines = str(caught.value).splitlines()
    count = len(case["problems"])
    assert lines[0] == f"plan.toml: {count} problem{'s' if count > 1 else ''}:"
    assert lines[1:] == [f"  {p}" for p in case["problems"]]


def test_all_problems_are_reported_together():
    several = next(c for c in INVALID if c["case"] == "several problems at once")
    assert len(several["problems"]) == 5


def test_linked_axis_varies_settings_together():
    plan = planfile.parse(
        '[base.tunnel]\nkind = "vxlan"\n[matrix]\n'
        'mtu = [{ "tunnel.mtu" = 1500, "lab.wan.mtu" = 1550 },'
        ' { "tunnel.mtu" = 9000, "lab.wan.mtu" = 9050 }]\n',
        "p.toml",
    )
    pairs = {(c.tunnel.mtu, c.lab.wan.mtu) for c in plan.experiment.configs}
    assert pairs == {(1500, 1550), (9000, 9050)}
    assert [a.name for a in plan.axes] == ["mtu"]


def test_excluded_combinations_are_counted_and_absent():
    plan = planfile.load(FIXTURES / "plans" / "valid" / "queues-and-excludes.toml")
    assert plan.excluded == 2  # mtu 1280 x 4 streams, for both queues
    assert not [
        c for c in plan.experiment.configs if c.tunnel.mtu == 1280 and c.traffic.streams == 4
    ]
    assert len(plan.experiment.configs) == 2 * 2 * 2 - 2


def test_equivalent_combinations_run_once():
    plan = planfile.parse(
        '[matrix]\n"traffic.streams" = [1, 8]\n"traffic.stream_mode" = ["single", "processes"]\n'
        '"tunnel.kind" = ["none", "wireguard"]\n"tunnel.mtu" = [1420, 1280]\n',
        "p.toml",
    )
    configs = plan.experiment.configs
    assert len(configs) == len(set(configs))
    # One stream: single and processes are the same trial. A baseline has no tunnel MTU.
    one_stream = [c for c in configs if c.traffic.streams == 1]
    assert {c.traffic.stream_mode for c in one_stream} == {StreamMode.AUTO}
    baselines = [c for c in configs if c.tunnel.kind is TunnelKind.NONE]
    assert len(baselines) == 3 and all(c.tunnel.mtu is None for c in baselines)
    assert len(configs) == 3 + 3 * 2


def test_udp_rate_is_dropped_for_tcp_and_kept_for_udp():
    plan = planfile.parse(
        '[base.traffic]\nudp_rate = "100mbit"\n[matrix]\n"traffic.protocol" = ["tcp", "udp"]\n',
        "p.toml",
    )
    rates = {c.traffic.protocol: c.traffic.udp_rate for c in plan.experiment.configs}
    assert rates == {Protocol.TCP: None, Protocol.UDP: 100_000_000}


def test_shuffled_order_is_reproducible_from_its_seed_and_keeps_rounds():
    path = FIXTURES / "plans" / "valid" / "shuffled-udp.toml"
    experiment = planfile.load(path).experiment
    assert experiment.order is Order.SHUFFLED and experiment.seed == 7
    first, again = expand(experiment), expand(experiment)
    assert [t.config for t in first] == [t.config for t in again]
    other = expand(replace(experiment, seed=8))
    assert [t.config for t in other] != [t.config for t in first]
    rounds = Counter((t.repetition, t.config.key()) for t in first)
    assert set(rounds.values()) == {1}  # every configuration once per round
    interleaved = expand(replace(experiment, order=Order.INTERLEAVED))
    assert sorted(t.config.key() for t in first) == sorted(t.config.key() for t in interleaved)


def test_shuffled_without_seed_cannot_expand():
    experiment = Experiment((TrialConfig(),), order=Order.SHUFFLED)
    with pytest.raises(ValueError, match="seed"):
        expand(experiment)


def test_quick_keeps_the_matrix_and_shortens_everything():
    path = ROOT / "scenarios" / "tunnel-vs-baseline.toml"
    full, quick = planfile.load(path).experiment, planfile.load(path, quick=True).experiment
    assert len(quick.configs) == len(full.configs) == 12
    assert quick.repetitions == 1 and full.repetitions == 5
    assert {(c.traffic.duration, c.traffic.warmup) for c in quick.configs} == {(1, 1)}


def test_estimate_counts_traffic_the_labs_built_and_kept_and_the_reports():
    path = ROOT / "scenarios" / "l2-tunnel-mtu.toml"
    trials = expand(planfile.load(path).experiment)
    assert len(trials) == 30  # (none, vxlan, gretap) x 2 MTUs x 5 repetitions
    # Six labs (the MTU is the lab's), each built by its first trial and kept after.
    assert planfile.labs_built(trials) == [True] * 6 + [False] * 24
    reports = planfile.REPORT_S + 6 * planfile.REPORT_PER_CONFIG_S
    assert planfile.estimate_seconds(trials) == pytest.approx(
        planfile.RUN_START_S
        + 6 * (3 + 1 + planfile.TRIAL_OVERHEAD_S)
        + 24 * (3 + 1 + planfile.KEPT_TRIAL_OVERHEAD_S)
        + reports
    )
    assert planfile.estimate_seconds(trials, fresh_labs=True) == pytest.approx(
        planfile.RUN_START_S + 30 * (3 + 1 + planfile.TRIAL_OVERHEAD_S) + reports
    )
    assert planfile.estimate_seconds([]) == 0


def test_an_auto_warm_up_is_expected_longer_behind_a_shaped_wan_and_fixed_for_iperf2():
    auto = TrialConfig()
    assert auto.expected_warmup == WARMUP_AUTO_ESTIMATE  # the window kept at 0.1 s, mostly
    shaped = TrialConfig.from_settings({"lab.wan.rate": "20mbit"})
    assert shaped.expected_warmup == WARMUP_SHAPED_ESTIMATE  # a queue fills first
    bounded: Settings = {"lab.wan.rate": "20mbit", "traffic.warmup_max": 1}
    assert TrialConfig.from_settings(bounded).expected_warmup == 1
    assert TrialConfig.from_settings({"traffic.warmup": 2}).expected_warmup == 2
    # iperf2 cannot end it on evidence: "auto" is its fixed fallback.
    iperf2 = TrialConfig.from_settings({"traffic.generator": "iperf2"})
    assert iperf2.expected_warmup == WARMUP_FIXED_FALLBACK


def test_the_pool_keeps_the_labs_a_round_needs_soonest():
    """Nine labs in turn through a pool of eight: the one needed last goes (the round's
    last), so each later round builds one lab again, not nine (removing the one used
    longest ago removed each lab just before its turn: 45 of 45 built)."""
    from tunnelbench.bench.labpool import KEEP

    plan = '[matrix]\n"lab.wan.mtu" = [' + ", ".join(str(1400 + n) for n in range(KEEP + 1))
    trials = expand(planfile.parse(plan + "]\n", "p.toml").experiment)
    assert len(trials) == 5 * (KEEP + 1)
    round_ = KEEP + 1
    assert planfile.labs_built(trials) == [True] * round_ + ([False] * KEEP + [True]) * 4
    eight = expand(planfile.parse(plan.replace(", 1408", "") + "]\n", "p.toml").experiment)
    assert planfile.labs_built(eight) == [True] * KEEP + [False] * 4 * KEEP


def test_the_lab_removed_is_the_one_needed_last_and_one_never_needed_first():
    from tunnelbench.bench.labpool import farthest

    assert farthest(["a", "b", "c"], ["a", "c", "b"]) == "b"
    assert farthest(["a", "b", "c"], ["c", "a"]) == "b"  # never again
    assert farthest(["a", "b", "c"], []) == "a"  # none needed: the oldest
    assert farthest(["a", "b", "c"], ["b"]) == "a"  # of the two never needed, the oldest


def test_experiment_round_trips_through_its_stored_form():
    for name in EXPANSIONS:
        experiment = planfile.load(ROOT / name).experiment
        stored = json.loads(json.dumps(experiment.to_dict()))
        assert Experiment.from_dict(stored) == experiment


def test_a_configuration_stored_before_new_settings_existed_loads_with_defaults():
    old = TrialConfig().to_dict()
    del old["lab"]["offloads"], old["lab"]["rps_cpus"], old["lab"]["wan"]["queue"]
    del old["tunnel"]["cpu_budget"], old["traffic"]["protocol"], old["traffic"]["congestion"]
    assert TrialConfig.from_dict(old) == TrialConfig()


def test_unreadable_plan_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        planfile.load(tmp_path / "missing.toml")


def test_adaptive_repetitions_parse_with_their_defaults_and_either_spelling():
    plan = planfile.parse('repetitions = { target = "2.5%", min = 4, max = 12 }\n', "p.toml")
    experiment = plan.experiment
    assert experiment.repetitions == 4  # the minimum; expand() gives those rounds
    assert experiment.adaptive == AdaptiveRepetitions(target_pct=2.5, max_repetitions=12)
    assert len(expand(experiment)) == 4  # one configuration, the no-tunnel default
    # A number is a percentage too (2 means ±2%, not 200%); min and max default to 3, 10.
    for spelling in ("2", "2.0", '"2%"'):
        plan = planfile.parse(f"repetitions = {{ target = {spelling} }}\n", "p.toml")
        assert plan.experiment.repetitions == 3
        assert plan.experiment.adaptive == AdaptiveRepetitions(2.0, 10)


def test_quick_makes_an_adaptive_plan_one_fixed_repetition():
    path = FIXTURES / "plans" / "valid" / "adaptive-shuffled.toml"
    full, quick = planfile.load(path).experiment, planfile.load(path, quick=True).experiment
    assert full.adaptive == AdaptiveRepetitions(2.5, 6) and full.repetitions == 2
    assert quick.adaptive is None and quick.repetitions == 1


def test_an_experiment_stored_before_adaptive_repetitions_loads_without_them():
    path = FIXTURES / "plans" / "valid" / "adaptive-shuffled.toml"
    experiment = planfile.load(path).experiment
    stored = json.loads(json.dumps(experiment.to_dict()))
    assert stored["adaptive"] == {"target_pct": 2.5, "max_repetitions": 6}
    assert Experiment.from_dict(stored) == experiment
    del stored["adaptive"]
    assert Experiment.from_dict(stored) == replace(experiment, adaptive=None)
