"""``tune --hosts``: which candidate changes a hosts file's machines can take (the
others listed with the hosts' refusal, never measured), the advice a hosts run keeps,
and the command's refusals (exit code 2, nothing created, no host contacted)."""

import dataclasses
import subprocess
from pathlib import Path

import pytest

from tests import cli_process
from tunnelbench.analysis.advice import applies_on_hosts
from tunnelbench.bench import planfile
from tunnelbench.bench import tune as tuning
from tunnelbench.bench.store import Store
from tunnelbench.bench.testbeds import hosts_plan
from tunnelbench.bench.tune_benches import planned_change
from tunnelbench.errors import UserError
from tunnelbench.model.environment import Environment
from tunnelbench.model.hostsrecord import Controller, RemoteRecord
from tunnelbench.model.plan import LinkSettings, TrialConfig
from tunnelbench.model.records import RunStatus
from tunnelbench.remote import hostsfile

HOSTS = """
[client]
ssh = "client"
[gw]
ssh = "root@192.168.1.1"
address = "192.168.1.1"
[server]
ssh = "server"
address = "198.18.1.2"
[tunnel]
mode = "build"
kind = "vxlan"
via = "198.18.1.1"
"""
TINY_FIFO = """
[base.tunnel]
kind = "none"
[base.lab.wan]
rate = "100mbit"
queue = "pfifo"
queue_limit = 4
"""


def _hosts() -> hostsfile.HostsFile:
    return hostsfile.parse(HOSTS, Path("/tmp/hosts.toml"))


def _best() -> TrialConfig:
    """The tiny FIFO as the hosts ran it: their layout, and their real path's MTUs
    (1400 here) recorded as the trials' ``lab.wan.mtu`` and ``lab.lan_mtu``."""
    experiment = planfile.parse(TINY_FIFO, "p.toml").experiment
    (start,) = hosts_plan.plan(experiment, _hosts()).experiment.configs
    lab = start.lab
    fitted = dataclasses.replace(lab, lan_mtu=1400, wan=dataclasses.replace(lab.wan, mtu=1400))
    return dataclasses.replace(start, lab=fitted)


def test_a_queue_change_is_checked_on_the_plans_mtus_not_the_hosts_recorded_ones():
    best = _best()
    assert hosts_plan.refusal(best, _hosts()) is not None  # the recorded MTUs, as a plan's
    changed = planned_change(best, "lab.wan.queue_limit", 24, _hosts())
    assert changed.lab.wan.queue_limit == 24 and changed.lab.wan.rate == best.lab.wan.rate
    assert (changed.lab.wan.mtu, changed.lab.lan_mtu) == (1500, 1500)  # fitted again later
    assert changed.lab.topology == best.lab.topology
    fair = planned_change(best, "lab.wan.queue", "fq_codel", _hosts())
    assert fair.lab.wan.queue is not None and fair.lab.wan.queue.value == "fq_codel"
    more = planned_change(best, "traffic.streams", 8, _hosts())
    assert more.traffic.streams == 8


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("lab.wan.mtu", 9000, r"^lab\.wan\.mtu: cannot be set for real hosts"),
        ("lab.lan_mtu", 9000, r"^lab\.lan_mtu: cannot be set for real hosts"),
        ("lab.queues", 2, r"^lab\.queues: cannot be set for real hosts"),
        ("lab.placement", "pinned", r"^lab\.placement: cannot be set for real hosts"),
    ],
)
def test_a_change_real_hosts_cannot_take_is_refused_by_name(setting, value, message):
    with pytest.raises(UserError, match=message):
        planned_change(_best(), setting, value, _hosts())


def test_a_cpu_budget_on_the_hosts_tunnel_daemon_is_refused_by_name():
    hosts = hostsfile.parse(HOSTS.replace("vxlan", "wireguard"), Path("/tmp/hosts.toml"))
    plan = '[base.tunnel]\nkind = "wireguard"\nimplementation = "wireguard-go"\n'
    (start,) = hosts_plan.plan(planfile.parse(plan, "p.toml").experiment, hosts).experiment.configs
    with pytest.raises(UserError, match=r"^tunnel\.cpu_budget: cannot be set for real hosts"):
        planned_change(start, "tunnel.cpu_budget", 0.2, hosts)


def test_a_hosts_runs_advice_keeps_lab_wan_tc_settings_only_where_the_run_set_them():
    shaped, unset = _best().lab.wan, LinkSettings()
    assert applies_on_hosts("lab.wan.queue_limit", shaped)
    assert applies_on_hosts("lab.wan.queue", shaped)
    assert not applies_on_hosts("lab.wan.queue_limit", unset)  # the hosts' own queue
    assert not applies_on_hosts("lab.wan.mtu", shaped)
    assert not applies_on_hosts("lab.queues", shaped)
    assert applies_on_hosts("traffic.streams", unset) and applies_on_hosts(None, unset)


def _tunnelbench(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli_process.run(args, cwd=cwd, timeout=60)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["tune", "plan.toml", "--hosts", "hosts.toml"],
            "lab.queues: cannot be set for real hosts",
        ),
        (
            ["tune", "--resume", "1", "--hosts", "elsewhere.toml"],
            "elsewhere.toml: no such hosts file",
        ),
    ],
)
def test_tune_hosts_refuses_before_any_host_is_contacted(args, error, tmp_path):
    (tmp_path / "hosts.toml").write_text(HOSTS)
    (tmp_path / "plan.toml").write_text(TINY_FIFO + "[base.lab]\nqueues = 2\n")
    done = _tunnelbench(args, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tunnelbench: error: {error}"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts.toml", "plan.toml"]


def test_a_stopped_hosts_tuning_session_resumes_on_the_hosts_it_ran_on_only(tmp_path):
    """Stored as a tune --hosts session stores itself (the hosts' environment), then
    interrupted: it goes on with the hosts file it ran with (wherever that lies now),
    and is refused by name without one, with another, and for a lab session."""
    request = tuning.Request(start=planfile.parse(TINY_FIFO, "p.toml").experiment.configs[0])
    prepared = tuning.prepare_hosts(request, _hosts())
    store = Store(tmp_path / "t.db")
    facts = Environment(remote=RemoteRecord(_hosts().record(), {}, Controller("6.1.0", 1)))
    run_id, record = tuning.begin(
        request, prepared, store, command_line="tune", lock=None, facts=facts
    )
    store.finish_run(run_id, RunStatus.INTERRUPTED)
    moved = dataclasses.replace(_hosts(), path=Path("/elsewhere/hosts.toml"))
    assert tuning.resumable(store, str(run_id), moved) == (run_id, record)
    with pytest.raises(UserError, match=rf"^--resume: run {run_id} tuned real hosts; resume it"):
        tuning.resumable(store, str(run_id))
    other = hostsfile.parse(HOSTS.replace("root@192.168.1.1", "root@192.168.9.1"), Path("o.toml"))
    with pytest.raises(UserError, match=r"^--hosts: o.toml is not the hosts file run 1 ran with"):
        tuning.resumable(store, str(run_id), other)
    lab_id, _ = tuning.begin(request, prepared, store, command_line="tune", lock=None)
    store.finish_run(lab_id, RunStatus.INTERRUPTED)
    with pytest.raises(UserError, match=rf"^--hosts: run {lab_id} ran in the lab; resume it"):
        tuning.resumable(store, str(lab_id), _hosts())
    store.close()
