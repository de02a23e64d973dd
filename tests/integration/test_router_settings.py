"""The router's settings applied for real and read back from the kernel: each veth's
queues and each receive queue's steering mask (``lab.queues``), and a role's CPU budget
(``lab.budget``): its cgroup's quota, its processes inside it, the kernel's throttle
count, and nothing left after teardown."""

from pathlib import Path

from tests.integration.test_lab_settings import measure
from tunnelbench.kinds import Topology
from tunnelbench.lab import netns
from tunnelbench.model import cpulist
from tunnelbench.model.plan import LabSettings, RoleBudgets, RoleCpus, TrafficSettings, TrialConfig
from tunnelbench.system import probing


def queue_dirs(lab: netns.Lab, role: str, device: str) -> list[str]:
    return sorted(lab.exec(role, ["ls", f"/sys/class/net/{device}/queues"]).stdout.split())


def rps(lab: netns.Lab, role: str, device: str, queue: int) -> int:
    path = f"/sys/class/net/{device}/queues/rx-{queue}/rps_cpus"
    return int(lab.exec(role, ["cat", path]).stdout.replace(",", ""), 16)


def test_every_veth_has_the_queues_asked_for_and_each_steers_over_that_many_cores():
    online = probing.cpus()
    settings = LabSettings(topology=Topology.SITE_TO_SITE, queues=3, cpus=RoleCpus(gwb="0"))
    lab = netns.build(settings)
    try:
        assert len(lab.interfaces) == 6
        for (role, _), iface in lab.interfaces.items():
            found = queue_dirs(lab, role, iface.name)
            assert found == ["rx-0", "rx-1", "rx-2", "tx-0", "tx-1", "tx-2"], iface.name
            cores = (0,) if role == "gwb" else online[:3]
            for queue in range(3):
                assert rps(lab, role, iface.name, queue) == int(cpulist.mask(cores), 16)
        assert lab.state.facts.rps == netns.queue_masks(lab, online)
    finally:
        lab.teardown()
    # One queue: one core. Without the setting, one queue and no steering.
    for queues, mask in ((1, 1), (None, 0)):
        plain = netns.build(LabSettings(queues=queues))
        try:
            (role, _), iface = next(iter(plain.interfaces.items()))
            assert queue_dirs(plain, role, iface.name) == ["rx-0", "tx-0"]
            assert rps(plain, role, iface.name, 0) == mask
        finally:
            plain.teardown()


def test_a_role_budget_holds_the_roles_generator_and_the_kernel_counts_it_throttled():
    config = TrialConfig(
        lab=LabSettings(budget=RoleBudgets(client=0.2)),
        traffic=TrafficSettings(duration=1, warmup=0),
    )
    _, metrics, resolved = measure(config)
    assert resolved["role_quotas_us"] == {"client": 20_000}
    assert resolved["cpu_period_us"] == 100_000
    (path,) = resolved["role_cgroups"].values()
    assert Path(path).name.startswith("tunnelbench-") and Path(path).name.endswith("-client")
    # The kernel's count: held by its quota in most periods it had work...
    assert metrics["budget.client.throttled_pct"] >= 50, metrics
    assert metrics["budget.client.throttled_s"] > 0.3
    # ...and the sampler's: the client's iperf3 used about its fifth of a core.
    (client,) = [v for k, v in metrics.items() if k.startswith("proc.iperf3-client")]
    assert client <= 25, metrics
    # The server, unbudgeted, has no cgroup and no counters.
    assert not [k for k in metrics if k.startswith("budget.server")]
    assert metrics["goodput_bps"] > 0
    assert not Path(path).exists(), "teardown removes the role's cgroup"
