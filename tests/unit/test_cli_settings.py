"""The common settings as ``run`` and ``tune`` options (the queue discipline and its size,
UDP at a rate, TCP's congestion control, a CPU budget per role) give the configuration
the same settings give in a plan file; bad values are refused in the golden error cases
(tests/fixtures/golden/cli-errors.json)."""

from collections.abc import Sequence

import pytest

from tunnelbench.bench import planfile
from tunnelbench.cli.main import parser
from tunnelbench.cli.options import build_experiment
from tunnelbench.cli.tune import _start
from tunnelbench.kinds import Protocol, Queue
from tunnelbench.model.plan import RoleBudgets, TrialConfig

PLAN = """
name = "p"
repetitions = 1
[base.lab]
topology = "site-to-site"
budget = { gwa = "50%", client = 0.25 }
[base.lab.wan]
rate = "100mbit"
queue = "bfifo"
queue_bytes = 75000
[base.traffic]
streams = 1
{traffic}
[matrix]
"tunnel.kind" = ["none", "wireguard"]
"""


def _keys(configs: Sequence[TrialConfig]) -> set[tuple]:
    """What the options set, configuration by configuration."""
    return {
        (
            c.tunnel.kind,
            c.lab.wan.queue,
            c.lab.wan.queue_bytes,
            c.lab.budget,
            c.traffic.protocol,
            c.traffic.udp_rate,
            c.traffic.congestion,
        )
        for c in configs
    }


@pytest.mark.parametrize(
    ("options", "traffic"),
    [
        (["--congestion", "bbr"], 'congestion = "bbr"'),
        (["--udp", "50mbit"], 'protocol = "udp"\nudp_rate = "50mbit"'),
    ],
)
def test_the_options_give_what_the_plan_settings_give(options, traffic):
    args = parser().parse_args(
        ["run", "--tunnels", "none,wireguard", "--streams", "1", "--runs", "1",
         "--topology", "site-to-site", "--rate", "100mbit", "--queue", "bfifo",
         "--queue-bytes", "75000", "--cpu-budget", "gwa=50%,client=0.25", *options]
    )  # fmt: skip
    from_options = build_experiment(args).configs
    from_plan = planfile.parse(PLAN.replace("{traffic}", traffic), "p.toml").experiment.configs
    assert _keys(from_options) == _keys(from_plan)
    (first, *_) = from_options
    assert first.lab.wan.queue is Queue.BFIFO and first.lab.wan.queue_bytes == 75000
    assert first.lab.budget == RoleBudgets(client=0.25, gwa=0.5)
    assert (first.traffic.protocol is Protocol.UDP) == ("--udp" in options)


def test_tune_starts_from_them_too():
    args = parser().parse_args(
        ["tune", "--tunnel", "none", "--rate", "100mbit", "--queue", "fq_codel",
         "--congestion", "bbr", "--cpu-budget", "gw=0.5"]
    )  # fmt: skip
    config = _start(args)
    assert config.lab.wan.queue is Queue.FQ_CODEL
    assert config.traffic.congestion == "bbr"
    assert config.lab.budget == RoleBudgets(gw=0.5)
