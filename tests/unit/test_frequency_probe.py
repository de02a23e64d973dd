"""The cores' clock over the window (probes/frequency): read where cpufreq exists, absent
where it does not. The reference VM has no cpufreq, so the files here are a stand-in
sysfs tree in a temporary folder, laid out as the kernel lays them out
(``cpuN/cpufreq/scaling_cur_freq`` in kHz); the sampler that reads them is the real one.
"""

import time
from pathlib import Path

import pytest

from tunnelbench.model import metrics as metric
from tunnelbench.probes import frequency
from tunnelbench.probes.sampler import Sampler


def sysfs(root: Path, khz: dict[str, str]) -> Path:
    for core, value in khz.items():
        folder = root / core / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_cur_freq").write_text(value + "\n")
    (root / "cpufreq").mkdir(exist_ok=True)  # the policy folder is not a core
    return root


def test_each_core_is_read_in_mhz_and_an_unreadable_one_is_left_out(tmp_path):
    root = sysfs(tmp_path, {"cpu0": "1800000", "cpu1": "800000", "cpu10": "garbage"})
    clocks = frequency.Clocks(root)
    assert sorted(clocks.files) == [0, 1, 10]
    assert clocks.read() == {0: 1800.0, 1: 800.0}


def test_without_cpufreq_nothing_is_read(tmp_path):
    (tmp_path / "cpu0").mkdir()
    assert frequency.Clocks(tmp_path).files == {}
    assert frequency.over_window([]) == {}


def test_the_window_gives_the_mean_and_the_lowest_clock_per_core():
    readings = [{0: 2000.0, 1: 1000.0}, {0: 1000.0}, {0: 1500.0, 1: 1200.0}]
    assert frequency.over_window(readings) == {0: (1500.0, 1000.0), 1: (1100.0, 1000.0)}


def test_the_sampler_records_the_clock_with_its_cpu_samples(tmp_path):
    clocks = frequency.Clocks(sysfs(tmp_path, {"cpu0": "1200000", "cpu1": "2400000"}))
    sampler = Sampler(hz=20, clocks=clocks)
    sampler.start()
    now = time.monotonic()
    sampler.watch({}, now, now + 0.3)
    time.sleep(0.5)
    result = sampler.result()
    assert result is not None and result.samples >= 2
    assert result.clocks == {0: (1200.0, 1200.0), 1: (2400.0, 2400.0)}
    assert metric.parse_cpu(metric.cpu(1, "mhz_min")) == (1, "mhz_min")


@pytest.mark.skipif(bool(frequency.Clocks().files), reason="this machine has cpufreq")
def test_on_this_vm_no_clock_is_recorded():
    """The reference VM has no cpufreq: the probe records nothing rather than a zero."""
    sampler = Sampler(hz=20)
    sampler.start()
    now = time.monotonic()
    sampler.watch({}, now, now + 0.2)
    time.sleep(0.4)
    result = sampler.result()
    assert result is not None and result.clocks == {}
