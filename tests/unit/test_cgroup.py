"""CPU budgets: the quota, and the cgroup's life cycle (finding the controller is
tested with the capability probes).

The cgroup file system is imitated by a temporary directory: the same files are written,
and teardown removes the same directories. Real cgroups are in tests/integration.
"""

import os

import pytest

from tunnelbench.errors import LabError
from tunnelbench.lab import cgroup
from tunnelbench.lab import state as lab_state
from tunnelbench.lab.state import LabState, ProcessRecord, process_start_time
from tunnelbench.model.records import Resolved


@pytest.fixture
def state_root(tmp_path, monkeypatch):
    monkeypatch.setattr(lab_state, "STATE_ROOT", tmp_path / "labs")
    return tmp_path / "labs"


def me() -> ProcessRecord:
    pid = os.getpid()
    return ProcessRecord(pid=pid, start_time=process_start_time(pid) or 0, argv=["python"])


def test_quota_is_the_budget_of_one_core_per_period():
    assert cgroup.quota_us(0.25) == 25_000
    assert cgroup.quota_us(1.5) == 150_000
    assert cgroup.quota_us(0.001) == 1_000  # the kernel's minimum
    with pytest.raises(ValueError):
        cgroup.quota_us(0)


@pytest.mark.parametrize("version", [1, 2])
def test_each_daemon_gets_its_own_recorded_cgroup(tmp_path, state_root, version):
    state = LabState(lab_id="ab12cd")
    state.save()
    cpu = cgroup.CpuController(version, tmp_path)
    limit = cgroup.limit_cpu(state, {"client": me(), "gw": me()}, 0.25, cpu)
    paths = [tmp_path / "tunnelbench-ab12cd-client", tmp_path / "tunnelbench-ab12cd-gw"]
    assert limit.cgroups == {"client": str(paths[0]), "gw": str(paths[1])}
    assert LabState.load("ab12cd").cgroups == [str(p) for p in paths]
    for path in paths:
        assert (path / "cgroup.procs").read_text() == f"{os.getpid()}\n"
        if version == 2:
            assert (path / "cpu.max").read_text() == "25000 100000\n"
        else:
            assert (path / "cpu.cfs_period_us").read_text() == "100000\n"
            assert (path / "cpu.cfs_quota_us").read_text() == "25000\n"
    resolved = Resolved()
    resolved.record_cpu_limit(limit.version, limit.period_us, limit.quota_us, limit.cgroups)
    assert {k: v for k, v in resolved.to_dict().items() if "cgroup" in k or "cpu_" in k} == {
        "cgroup_version": version,
        "cpu_period_us": 100_000,
        "cpu_quota_us": 25_000,
        "cgroups": {"client": str(paths[0]), "gw": str(paths[1])},
    }


def test_no_daemon_is_an_error(tmp_path, state_root):
    state = LabState(lab_id="ab12cd")
    with pytest.raises(LabError, match="no userspace daemon"):
        cgroup.limit_cpu(state, {}, 0.25, cgroup.CpuController(1, tmp_path))


def test_an_existing_directory_is_not_taken_over(tmp_path, state_root):
    (tmp_path / "tunnelbench-ab12cd-gw").mkdir()
    state = LabState(lab_id="ab12cd")
    with pytest.raises(LabError, match=r"cannot create cgroup .*tunnelbench-ab12cd-gw"):
        cgroup.limit_cpu(state, {"gw": me()}, 0.25, cgroup.CpuController(1, tmp_path))
    assert state.cgroups == []  # not created by this lab: teardown leaves it alone


def test_teardown_removes_the_cgroups_and_reports_one_it_cannot(tmp_path, state_root):
    state = LabState(lab_id="ab12cd")
    gone, stuck = tmp_path / "tunnelbench-ab12cd-client", tmp_path / "tunnelbench-ab12cd-gw"
    for path in (gone, stuck):
        state.add_cgroup(path)
        path.mkdir()
    (stuck / "left").write_text("")  # a real cgroup would refuse with EBUSY
    problems = lab_state.teardown(state)
    assert not gone.exists()
    assert problems == [f"cgroup {stuck}: Directory not empty"]
    assert state.path.exists(), "the record stays while something is left"


def test_state_files_written_before_cgroups_existed_still_load(state_root):
    state = LabState(lab_id="old001", namespaces=["tb-old001-client"])
    state.save()
    text = state.path.read_text().replace('"cgroups": [],', "").replace(',\n "cgroups": []', "")
    state.path.write_text(text)
    assert "cgroups" not in state.path.read_text()
    loaded = LabState.load("old001")
    assert loaded.cgroups == [] and loaded.namespaces == ["tb-old001-client"]
