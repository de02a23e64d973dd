"""``plan show --hosts``: a hosts run's estimate (its own overheads: a trial whose tunnel
is built over SSH, any other, the session), learned from a real SQLite store of runs on
the same hosts file, and the hosts' refusals before any host is contacted."""

import json
import sqlite3
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests import cli_process
from tunnelbench.bench import learned, planfile
from tunnelbench.bench.planfile import REPORT_PER_CONFIG_S, REPORT_S
from tunnelbench.bench.store import Store
from tunnelbench.bench.testbeds import hosts_estimate, hosts_plan
from tunnelbench.bench.testbeds.hosts_estimate import REFERENCE, estimate_seconds, tunnels_built
from tunnelbench.cli.plan import OnHosts, render, to_json
from tunnelbench.errors import UserError
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.environment import Environment
from tunnelbench.model.hostsrecord import Controller, RemoteRecord
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.model.records import Resolved, TrialStatus
from tunnelbench.model.remotefacts import RemoteFacts
from tunnelbench.remote import hostsfile

# Hosts no test can reach: a command that contacted one would fail.
HOSTS = """
connect_timeout = 1
[client]
ssh = "root@client.invalid"
[gw]
ssh = "root@gw.invalid"
address = "198.18.0.2"
[server]
ssh = "root@server.invalid"
address = "198.18.1.2"
[tunnel]
mode = "build"
kind = "vxlan"
via = "198.18.1.1"
"""
PLAN = """
name = "mtus"
repetitions = 2
[base.tunnel]
kind = "vxlan"
[base.traffic]
duration = 2
warmup = 0
[matrix]
"tunnel.mtu" = [1400, 1300]
"""


def _hosts(text: str = HOSTS) -> hostsfile.HostsFile:
    return hostsfile.parse(text, Path("/tmp/hosts.toml"))


def _trials(plan: str = PLAN, hosts: hostsfile.HostsFile | None = None) -> list:
    experiment = planfile.parse(plan, "p.toml").experiment
    return hosts_plan.plan(experiment, hosts or _hosts()).trials


def test_a_tunnel_is_counted_built_where_the_hosts_build_it_again():
    """The hosts' rule: a built tunnel is removed before a trial without it and before one
    asking another MTU, so in rounds of none, 1400 and 1300 every tunnel trial builds
    one; a tunnel asked again as it stands is kept; the user's own is never built."""
    trials = _trials()
    assert [t.config.tunnel.mtu for t in trials] == [None, 1400, 1300] * 2
    assert tunnels_built(trials, _hosts()) == [False, True, True] * 2
    one = _trials(PLAN.replace('[matrix]\n"tunnel.mtu" = [1400, 1300]', ""))
    assert [t.config.tunnel.kind.value for t in one] == ["none", "vxlan"] * 2
    kept = [t for t in one if t.config.tunnel.kind.value == "vxlan"]
    assert tunnels_built(kept, _hosts()) == [True, False]
    existing = _hosts(
        HOSTS.replace('mode = "build"', 'mode = "existing"').replace(
            'via = "198.18.1.1"', 'address = "198.18.9.2"'
        )
    )
    plain = PLAN.replace('[matrix]\n"tunnel.mtu" = [1400, 1300]', "")
    assert tunnels_built(_trials(plain, existing), existing) == [False, False] * 2
    # Another kind at the same MTU is another tunnel.
    vxlan, wireguard = TunnelSettings(TunnelKind.VXLAN, mtu=1400), TunnelSettings(mtu=1400)
    wireguard = replace(wireguard, kind=TunnelKind.WIREGUARD)
    assert hosts_estimate.builds(vxlan, wireguard, existing=False)
    assert not hosts_estimate.builds(vxlan, vxlan, existing=False)


def test_the_estimate_counts_the_hosts_overheads_not_the_labs():
    trials = _trials()
    expected = (
        REFERENCE.session_s
        + 6 * 2  # each trial's traffic: 2 s, no warm-up
        + 4 * REFERENCE.built_s
        + 2 * REFERENCE.kept_s
        + REPORT_S
        + 3 * REPORT_PER_CONFIG_S
    )
    assert estimate_seconds(trials, _hosts()) == pytest.approx(expected)
    # The lab's figures would be a third of it: a trial there is built in half a second.
    assert planfile.estimate_seconds(trials) < expected - 15


def _store_hosts_run(store: Store, hosts: hostsfile.HostsFile, extras: list[float]) -> None:
    """A hosts run of PLAN's trials in order, each ``extra`` seconds besides its traffic."""
    remote = RemoteRecord(hosts.record(), {}, Controller("6.1.0", 1))
    env = Environment(kernel="6.1.0", remote=remote)
    experiment = planfile.parse(PLAN, "p.toml").experiment
    run_id = store.start_run("tunnelbench run --hosts", experiment, env)
    at = time.time() - 10_000
    ended = []
    for trial, extra in zip(_trials(hosts=hosts), extras, strict=True):
        config = trial.config
        trial_id = store.add_trial(
            run_id, seq=trial.seq, repetition=trial.repetition, config_key=config.key(),
            config=config, resolved=Resolved(remote=RemoteFacts(dut="gw")),
            status=TrialStatus.OK, error=None, started_at=at,
            metrics={"goodput_bps": 1e6}, artifacts={},
        )  # fmt: skip
        at += config.traffic.duration + extra
        ended.append((at, trial_id))
    with sqlite3.connect(store.path) as db:  # the store stamps a trial's end itself
        db.executemany("UPDATE trials SET ended_at = ? WHERE id = ?", ended)


def test_the_overheads_are_learned_from_runs_on_the_same_hosts_only(tmp_path: Path):
    store = Store(tmp_path / "r.db")
    hosts = _hosts()
    # Two runs of PLAN on these hosts: none 1.0-1.4 s, a tunnel built 4.0-5.0 s.
    _store_hosts_run(store, hosts, [1.0, 4.0, 4.2, 1.2, 4.4, 4.6])
    _store_hosts_run(store, replace(hosts, path=Path("/elsewhere/h.toml")),
                     [1.4, 4.8, 5.0, 1.3, 4.5, 4.3])  # fmt: skip
    # Hosts far away: slower, and not these.
    far = _hosts(HOSTS.replace("root@gw.invalid", "root@far.invalid"))
    _store_hosts_run(store, far, [9.0] * 6)
    _store_hosts_run(store, far, [9.0] * 6)
    store.close()
    found = hosts_estimate.overheads(tmp_path / "r.db", hosts)
    assert found.built_s == pytest.approx(4.45)  # the median of 8 built
    assert dict(found.learned) == {"built_s": 8}  # 4 without a tunnel: too few
    assert (found.kept_s, found.session_s) == (REFERENCE.kept_s, REFERENCE.session_s)
    assert hosts_estimate.overheads(tmp_path / "r.db", far).built_s == pytest.approx(9.0)
    # The lab's figures are not taught by hosts trials.
    assert learned.overheads(tmp_path / "r.db") == planfile.REFERENCE
    shown = to_json(planfile.parse(PLAN, "p.toml"), hosts=OnHosts(hosts, found))
    assert shown["overheads"]["built_s"] == {"seconds": 4.45, "learned_from": 8}
    assert shown["overheads"]["kept_s"] == {"seconds": REFERENCE.kept_s, "learned_from": None}
    text = render(planfile.parse(PLAN, "p.toml"), hosts=OnHosts(hosts, found))
    assert "partly medians of 8 trials stored here on these hosts" in text


def test_plan_show_hosts_shows_the_trials_as_the_hosts_run_them():
    plan = planfile.parse(PLAN, "p.toml")
    text = render(plan, hosts=OnHosts(_hosts()))
    assert (
        "on hosts: /tmp/hosts.toml (road-warrior, DUT gw, tunnel vxlan built by tunnelbench)"
        in text
    )
    assert f"~{REFERENCE.built_s:g} s where tunnelbench builds its tunnel on the hosts" in text
    shown = to_json(plan, hosts=OnHosts(_hosts()))
    assert shown["estimated_seconds"]["min"] == pytest.approx(
        estimate_seconds(_trials(), _hosts()), abs=0.1
    )
    # The trials as the hosts record them: their layout as the topology.
    assert {t["settings"]["lab.topology"] for t in shown["trials"]} == {"road-warrior"}
    # A baseline that would cross the user's tunnel is skipped, with the reason.
    through = _hosts(
        HOSTS.replace('mode = "build"', 'mode = "existing"').replace(
            'via = "198.18.1.1"', 'address = "198.18.1.2"'
        )
    )
    plain = planfile.parse(PLAN.replace('"tunnel.mtu" = [1400, 1300]', ""), "p.toml")
    shown = to_json(plain, hosts=OnHosts(through))
    assert [t["skipped"] for t in shown["trials"]] == [hosts_plan.NO_PLAIN_PATH, None] * 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('"lab.wan.mtu" = 9000', "lab.wan.mtu: cannot be set for real hosts"),
        ('"lab.queues" = 2', "lab.queues: cannot be set for real hosts"),
        ("fresh_labs = true", "fresh_labs: cannot be set for real hosts"),
    ],
)
def test_what_hosts_cannot_take_is_refused_by_name(change, message):
    text = PLAN.replace("[matrix]", f"[base]\n{change}\n[matrix]")
    if change.startswith("fresh_labs"):
        text = change + "\n" + PLAN
    with pytest.raises(UserError, match=f"^{message}"):
        render(planfile.parse(text, "p.toml"), hosts=OnHosts(_hosts()))


def _tunnelbench(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli_process.run(args, cwd=cwd, timeout=60)


def test_plan_show_hosts_contacts_no_host_and_refuses_with_exit_2(tmp_path: Path):
    """The hosts cannot be reached (.invalid): an answer at all means none was asked."""
    (tmp_path / "hosts.toml").write_text(HOSTS)
    (tmp_path / "plan.toml").write_text(PLAN)
    done = _tunnelbench(["plan", "show", "plan.toml", "--hosts", "hosts.toml", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hosts"] == "hosts.toml"
    (tmp_path / "bad.toml").write_text(
        PLAN.replace("[matrix]", '[base]\n"lab.wan.mtu" = 9000\n[matrix]')
    )
    done = _tunnelbench(["plan", "show", "bad.toml", "--hosts", "hosts.toml"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("tunnelbench: error: lab.wan.mtu: cannot be set for real hosts")
    assert done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "hosts.toml", "plan.toml"]
