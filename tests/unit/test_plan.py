"""Expansion of an experiment into trials (golden), and configuration identity."""

import json

from tests.conftest import FIXTURES
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import Experiment, TrialConfig, TunnelSettings, expand, product_configs

GOLDEN = FIXTURES / "golden" / "default-expansion.json"


def _default() -> Experiment:
    kinds = [TunnelKind.NONE, TunnelKind.WIREGUARD, TunnelKind.VXLAN]
    tunnels = [TunnelSettings(kind=k) for k in kinds]
    return Experiment(product_configs(TrialConfig(), tunnels, [1, 4]), repetitions=3)


def _summary(experiment: Experiment) -> list[str]:
    return [
        f"{t.seq} r{t.repetition} {t.config.tunnel.kind.value} x{t.config.traffic.streams}"
        for t in expand(experiment)
    ]


def test_default_expansion_matches_golden():
    assert _summary(_default()) == json.loads(GOLDEN.read_text())


def test_configurations_are_interleaved_across_repetitions():
    trials = expand(_default())
    assert [t.repetition for t in trials[:6]] == [1] * 6
    assert trials[0].config == trials[6].config == trials[12].config


def test_missing_baselines_are_added_before_the_tunnel_that_needs_them():
    wg = TunnelSettings(kind=TunnelKind.WIREGUARD, implementation="wireguard-go", mtu=1280)
    only_wg = Experiment(product_configs(TrialConfig(), [wg], [2]), repetitions=1)
    trials = expand(only_wg)
    assert [t.config.tunnel.kind for t in trials] == [TunnelKind.NONE, TunnelKind.WIREGUARD]
    assert trials[0].config == trials[1].config.baseline()
    assert trials[0].config.traffic.streams == 2
    assert trials[1].config.tunnel == wg


def test_baseline_of_a_tunnel_with_settings_is_the_plain_baseline():
    config = TrialConfig(tunnel=TunnelSettings(TunnelKind.WIREGUARD, "wireguard-go", 1280))
    assert config.baseline() == TrialConfig()
    assert config.baseline().key() != config.key()


def test_config_round_trips_through_its_dict():
    config = _default().configs[3]
    assert TrialConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
