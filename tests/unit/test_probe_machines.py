"""The trial probes' seam (``probes.trial.Machines``): what a probe does where a machine
lacks a program or a clock, the names a real host's devices get, and where a trial ran."""

from pathlib import Path

import pytest

from tests.unit.probe_fixtures import lab_like
from tunnelbench.errors import LabError
from tunnelbench.lab.host import Host
from tunnelbench.model.plan import LinkSettings, TrafficSettings
from tunnelbench.model.records import Resolved, Where
from tunnelbench.probes.devices import DeviceNames
from tunnelbench.probes.qdisc import QdiscProbe
from tunnelbench.probes.rtt import RttProbe
from tunnelbench.probes.trial import Machines, ProbeContext


class Bare:
    """Machines with no program and no clock to read: any host asked for is an error,
    so a probe that reads where it should not fails the test."""

    roles = ("client", "gw", "server")

    def host(self, role: str) -> Host:
        raise AssertionError(f"{role}'s host was asked for")

    def files(self, role: str) -> Path:
        return Path("/nonexistent")

    def server_address(self, family: int) -> str:
        return "198.18.1.2"

    def has(self, role: str, program: str) -> bool:
        return False

    def clock_offset(self, role: str) -> float:
        raise LabError(f"{role}: `date +%s.%N` said '1764000000': no sub-second clock")


def context(*, lenient: bool) -> ProbeContext:
    names = DeviceNames({}, None)
    return ProbeContext({}, TrafficSettings(), LinkSettings(), names, lenient=lenient)


def test_the_namespace_lab_is_the_probes_machines():
    lab: Machines = lab_like("pxtbf")
    assert lab.roles == ("client", "gw", "server")
    assert lab.has("gw", "tc") and lab.clock_offset("client") == 0.0


def test_a_lenient_trials_pings_record_why_they_were_not_measured():
    probe = RttProbe()
    probe.before(Bare(), context(lenient=True))
    assert probe.signals() is None  # the warm-up then has no round trips to read
    probe.started(100.0)
    reading = probe.after()
    assert reading.metrics == {}
    assert reading.raw == {
        "not_measured": "client: `date +%s.%N` said '1764000000': no sub-second clock"
    }


def test_the_labs_pings_that_cannot_run_fail_the_trial():
    with pytest.raises(LabError, match="no sub-second clock"):
        RttProbe().before(Bare(), context(lenient=False))


def test_a_machine_without_tc_has_its_queues_read_by_no_one():
    probe = QdiscProbe()
    probe.before(Bare(), context(lenient=True))
    reading = probe.after()
    assert (reading.metrics, reading.raw, probe.roots) == ({}, {"before": {}, "after": {}}, {})


def test_a_real_hosts_devices_keep_their_names_but_the_tunnel_and_the_wan():
    names = DeviceNames.hosts({"gw": {"eth1": "wan", "tbab12-wggw": "tunnel"}})
    assert names.name("gw", "eth1") == "wan"
    assert names.name("gw", "tbab12-wggw") == "tunnel"
    assert names.name("gw", "eth0") == "eth0"
    assert names.name("gw", "lo") is None
    assert names.name("client", "eth1") == "eth1"  # another host's eth1 is its own


def test_where_a_trial_ran_crosses_into_a_guest_and_back_into_its_record():
    where = Where("6.1.0-28-amd64", "tcg", "linux-image-6.1.0-28-amd64=6.1.119-1",
                  "a KVM guest did not start: no boot in 20 s", 2, 1024)  # fmt: skip
    sent = where.to_dict()
    assert Where.from_dict(sent | {"a key from a later version": 1}) == where
    resolved = Resolved()
    resolved.record_where(Where.from_dict(sent))
    stored = resolved.to_dict()
    assert stored["kernel_release"] == "6.1.0-28-amd64" and stored["virtualization"] == "tcg"
    assert stored["vm_cpus"] == 2 and stored["vm_memory_mib"] == 1024
    here = Where("6.18.44", "none")
    assert here.to_dict() == {"kernel_release": "6.18.44", "virtualization": "none"}
