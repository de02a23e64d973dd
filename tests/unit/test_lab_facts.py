"""A lab's facts in its state file: typed records written by the steps that made them,
read back as the same records, and state files of before (``info``, a dict) still read."""

import json
from pathlib import Path

import pytest

from tunnelbench.lab import state as lab_state
from tunnelbench.lab.state import LabFacts, LabState, RoleLimitsRecord


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(lab_state, "STATE_ROOT", tmp_path)
    return tmp_path


def test_the_facts_come_back_as_the_records_they_were(root: Path) -> None:
    budgets = RoleLimitsRecord(2, 100000, {"gw": 50000}, {"gw": "/sys/fs/cgroup/tb-x-gw"})
    state = LabState("ab12cd", facts=LabFacts(rps={"gw": "3"}, role_budgets=budgets))
    state.facts.offloads = {"gw": {"gro": True, "tso": False}}
    state.save()
    loaded = LabState.load("ab12cd")
    assert loaded.facts == state.facts
    assert isinstance(loaded.facts.role_budgets, RoleLimitsRecord)


def test_a_state_file_of_before_is_read_and_unknown_keys_left_out(root: Path) -> None:
    (root / "old001").mkdir()
    recorded = {
        "lab_id": "old001", "namespaces": [], "processes": [], "files": [],
        "info": {"placement": {"gw": "1"}, "tunnel": "vxlan", "from_a_later_version": 1,
                 "role_budgets": {"cgroup_version": 2, "cpu_period_us": 100000,
                                  "role_quotas_us": {"gw": 50000}, "role_cgroups": {}}},
    }  # fmt: skip
    (root / "old001" / "state.json").write_text(json.dumps(recorded))
    facts = LabState.load("old001").facts
    assert (facts.placement, facts.tunnel) == ({"gw": "1"}, "vxlan")
    assert facts.role_budgets == RoleLimitsRecord(2, 100000, {"gw": 50000}, {})
