"""Every configuration of a run has its own name in every report: a setting that varies
shows as a column and in the names of the verdicts and advice. A run that varied
``lab.placement`` once showed two rows ``none, 1 stream`` and two verdicts by the same
name, because the tables knew no heading for it and left the setting out."""

from dataclasses import replace

from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.kinds import Placement
from tunnelbench.model.plan import LabSettings, RoleCpus, TrialConfig, flatten
from tunnelbench.model.records import Resolved
from tunnelbench.report.findings import named
from tunnelbench.report.table import AXIS_HEADINGS, table_axes


def summary(config: TrialConfig) -> ConfigSummary:
    return ConfigSummary(config.key(), config, Resolved(), [], None, None, None)


def test_every_setting_has_a_heading():
    """The kind is the row's label; every other setting a plan can vary has a heading."""
    paths = set(flatten(TrialConfig().to_dict())) - {"tunnel.kind"}
    assert sorted(paths - set(AXIS_HEADINGS)) == []


def test_configurations_that_differ_only_in_placement_have_their_own_names():
    free = TrialConfig()
    pinned = replace(free, lab=LabSettings(placement=Placement.PINNED))
    summaries = [summary(free), summary(pinned)]
    assert table_axes(summaries) == ["lab.placement"]
    names = [name for name, _ in named(summaries)]
    assert names == ["none, placement free", "none, placement pinned"]


def test_a_roles_cores_are_named_when_they_vary():
    one = TrialConfig(lab=LabSettings(cpus=RoleCpus(gw="1")))
    other = TrialConfig(lab=LabSettings(cpus=RoleCpus(gw="0-1")))
    names = [name for name, _ in named([summary(one), summary(other)])]
    assert names == ["none, gw cores 1", "none, gw cores 0-1"]
