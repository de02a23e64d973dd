"""What a run on real hosts takes: ``plan show --hosts``'s estimate, before any host is
contacted.

A hosts trial costs what the lab's does not: every edge of its window is read over SSH,
a busybox sampler is started on every host, and the tunnel is built by commands over SSH
(removed before a trial without it and built again after, as
:func:`tunnelbench.remote.tunnel.for_trial` does). A lab's figures would be a third of
it, so a hosts run has overheads of its own (:class:`HostsOverheads`): a trial whose
tunnel tunnelbench builds for it, any other trial, and the session (the logins, the
hosts' facts and checks before the first trial, their cleanup after the last).

The reference figures were measured on the test rig (tests/sshd.py: three sshd
"machines" in namespaces, the server on busybox) on the 2-core reference machine, shared
with other work (load average 1.3-2.4), 2026-11-28: ``run --hosts`` of no tunnel and a
built VXLAN or wireguard-go, 2 s trials without warm-up, 3 runs. A trial whose tunnel
was built took 3.4-3.6 s besides its traffic (VXLAN and wireguard-go alike), one without
a tunnel or with a kept one 0.8-1.4 s; the session 3.9-4.1 s in all (from the command
to the first trial 3.3-3.6 s, of which Python's start and imports 1.1-1.8 s, and 0.5-0.65 s
of cleanup after the last). Real hosts further away add their round trips to each, so a
figure is learned from the stored trials of runs on the same hosts file
(:func:`learn`), as the lab's are (:mod:`tunnelbench.bench.learned`); the session's
cannot be (the run is stored once the hosts are checked) and stays the reference's.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.bench.learned import RECENT, traffic_seconds, with_medians
from tunnelbench.bench.planfile import REPORT_PER_CONFIG_S, REPORT_S
from tunnelbench.bench.store import Store
from tunnelbench.kinds import TunnelKind, TunnelMode
from tunnelbench.model.plan import Trial, TunnelSettings
from tunnelbench.model.records import RunRecord, TimedTrial
from tunnelbench.remote.hostsfile import HostsFile

#: The reference figures (see the module's text), seconds.
BUILT_S = 3.5
KEPT_S = 1.2
SESSION_S = 2.8


@dataclass(frozen=True)
class HostsOverheads:
    """What a hosts trial costs besides its traffic, where its tunnel is built for it
    (``built_s``) or not (``kept_s``), and the session's logins, checks and cleanup
    (``session_s``): the reference figures, or those the stored trials of runs on the
    same hosts file tell (``learned``: each learned field and how many trials)."""

    built_s: float = BUILT_S
    kept_s: float = KEPT_S
    session_s: float = SESSION_S
    learned: tuple[tuple[str, int], ...] = ()


REFERENCE = HostsOverheads()


def builds(previous: TunnelSettings | None, tunnel: TunnelSettings, *, existing: bool) -> bool:
    """Whether a trial asking for ``tunnel`` has it built, after a trial that asked for
    ``previous`` (None: the run's first): the rule of
    :func:`tunnelbench.remote.tunnel.for_trial`. The user's own tunnel is never built."""
    if tunnel.kind is TunnelKind.NONE or existing:
        return False
    if previous is None or previous.kind is TunnelKind.NONE:
        return True
    asked = (tunnel.kind, tunnel.implementation, tunnel.mtu)
    return (previous.kind, previous.implementation, previous.mtu) != asked


def tunnels_built(trials: Iterable[Trial], hosts: HostsFile) -> list[bool]:
    """For each trial in order, whether its tunnel is built for it."""
    existing = hosts.tunnel.mode is TunnelMode.EXISTING
    built, previous = [], None
    for trial in trials:
        tunnel = trial.config.tunnel
        built.append(builds(previous, tunnel, existing=existing))
        previous = tunnel
    return built


def estimate_seconds(
    trials: list[Trial], hosts: HostsFile, overheads: HostsOverheads = REFERENCE
) -> float:
    """A hosts run's expected wall time: the session, each trial's traffic and overhead,
    and the reports at its end."""
    if not trials:
        return 0.0
    seconds = sum(
        t.config.traffic.duration
        + t.config.expected_warmup
        + (overheads.built_s if built else overheads.kept_s)
        for t, built in zip(trials, tunnels_built(trials, hosts), strict=True)
    )
    configs = len({t.config for t in trials})
    return overheads.session_s + seconds + REPORT_S + REPORT_PER_CONFIG_S * configs


def ran_on(run: RunRecord, hosts: HostsFile) -> bool:
    """Whether ``run`` measured the machines, layout and tunnel of ``hosts``, wherever
    the file lies now."""
    remote = run.environment.remote
    return remote is not None and remote.hosts.same_hosts(hosts.record())


def overheads(db: Path, hosts: HostsFile) -> HostsOverheads:
    """The figures the database at ``db`` teaches for ``hosts``; the reference's where it
    does not exist or holds too few trials of a kind."""
    if not db.is_file():
        return REFERENCE
    store = Store.read(db)
    try:
        return learn(store.runs(), store.timed_trials(RECENT), hosts)
    finally:
        store.close()


def learn(runs: list[RunRecord], timed: list[TimedTrial], hosts: HostsFile) -> HostsOverheads:
    """The medians of the trials of ``runs`` on ``hosts``. Whether a trial's tunnel was
    built is told by the trial before it in its run (:func:`builds`): a trial whose
    predecessor is not among ``timed`` (it failed, or is older) is left out."""
    here = {r.id for r in runs if ran_on(r, hosts)}
    existing = hosts.tunnel.mode is TunnelMode.EXISTING
    found = {(t.run_id, t.seq): (t, t.tunnel) for t in timed if t.run_id in here}
    samples: dict[str, list[float]] = {"built_s": [], "kept_s": []}
    for (run_id, seq), (trial, tunnel) in found.items():
        before = found.get((run_id, seq - 1))
        if tunnel is None or (seq > 1 and before is None):
            continue
        previous = before[1] if before is not None else None
        field = "built_s" if builds(previous, tunnel, existing=existing) else "kept_s"
        samples[field].append(max(0.0, trial.seconds - traffic_seconds(trial)))
    return with_medians(REFERENCE, samples)
