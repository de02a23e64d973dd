"""CPU budgets as cgroups with a CPU quota: for userspace tunnel daemons
(``tunnel.cpu_budget``, one cgroup per daemon) and for whole roles (``lab.budget.<role>``,
one cgroup per role holding every process the role starts).

Each cgroup is named after its lab and role (``tunnelbench-<lab>-<role>``), directly
under the root of the hierarchy that has the ``cpu`` controller, with a quota of the
budget times one core per 100 ms period:

- cgroup v2 (``cpu.max``), when the v2 root delegates ``cpu`` to its children;
- else cgroup v1 (``cpu.cfs_period_us``, ``cpu.cfs_quota_us``).

A daemon is moved with ``cgroup.procs``, which moves every thread of it; threads it
starts later are born in the same cgroup. A role's processes enter its cgroup before they
execute (:meth:`tunnelbench.lab.host.NetnsHost.spawn_argv`), so none runs a moment free.

What a quota slows: the CPU time of the cgroup's tasks, which includes the kernel work
done in their context (a sender's system calls, the transmit path through the veth and
the stack). It cannot slow work that runs in no task of the role: the kernel's
forwarding of a router role without processes, its kernel tunnels' encryption, and
receive work in softirq, which runs on whatever core RPS or the sender chose. A VM
guest's vCPUs (``lab.vm.cpus``) are the way to give kernel work fewer cores.

Each directory is recorded in the lab's state before it is created, and teardown removes
it once its processes are gone. Nothing else is written: no other cgroup, and no
controller is enabled anywhere.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.lab.state import LabState, ProcessRecord, RoleLimitsRecord, is_alive
from tunnelbench.system import probing

log = logging.getLogger("tunnelbench.lab")

PERIOD_US = 100_000
#: The kernel refuses quotas below 1 ms.
MIN_QUOTA_US = 1_000


@dataclass(frozen=True)
class CpuController:
    """Where cgroups with a CPU quota can be made: the hierarchy's root and its version."""

    version: int  # 1 or 2
    root: Path


@dataclass
class CpuLimit:
    """What :func:`limit_cpu` did, for the trial's record."""

    version: int
    period_us: int
    quota_us: int
    cgroups: dict[str, str] = field(default_factory=dict)  # role -> cgroup directory


def controller(key: str = "tunnel.cpu_budget") -> CpuController:
    """This machine's CPU controller, as the capability probe found it; a
    :class:`LabError` naming the setting ``key`` when there is none."""
    found = probing.cgroup()
    if not found.ok or found.version is None or found.path is None:
        raise LabError(f"{key}: no cgroup CPU controller ({found.detail})")
    return CpuController(found.version, Path(found.path))


def quota_us(budget: float, period_us: int = PERIOD_US) -> int:
    """The quota per period for a budget given as a fraction of one core."""
    if budget <= 0:
        raise ValueError(f"a CPU budget must be positive, not {budget}")
    return max(MIN_QUOTA_US, round(budget * period_us))


def cgroup_name(lab_id: str, role: str) -> str:
    return f"tunnelbench-{lab_id}-{role}"


def limit_cpu(
    state: LabState,
    daemons: Mapping[str, ProcessRecord],
    budget: float,
    cpu: CpuController | None = None,
) -> CpuLimit:
    """Give each daemon (role -> process) its own cgroup capped at ``budget`` of one core.

    Each cgroup is recorded in ``state`` before it is created. A failed write is a
    :class:`LabError`; what was created is still recorded, and teardown removes it.
    """
    if not daemons:
        raise LabError("tunnel.cpu_budget: this tunnel has no userspace daemon to limit")
    cpu = cpu or controller()
    limit = CpuLimit(version=cpu.version, period_us=PERIOD_US, quota_us=quota_us(budget))
    for role, daemon in daemons.items():
        if not is_alive(daemon):
            raise LabError(f"tunnel daemon on {role} (pid {daemon.pid}) is not running")
        path = cpu.root / cgroup_name(state.lab_id, role)
        _make(state, path)
        _set_quota(cpu, path, budget)
        _write(path / "cgroup.procs", str(daemon.pid))
        if str(daemon.pid) not in _words(path / "cgroup.procs"):
            raise LabError(f"process {daemon.pid} did not move into cgroup {path}")
        limit.cgroups[role] = str(path)
    return limit


@dataclass
class RoleLimits:
    """What :func:`limit_roles` did, for the trial's record: role -> quota and cgroup."""

    version: int
    period_us: int
    quotas_us: dict[str, int] = field(default_factory=dict)
    cgroups: dict[str, str] = field(default_factory=dict)

    def resolved(self) -> RoleLimitsRecord:
        return RoleLimitsRecord(
            cgroup_version=self.version,
            cpu_period_us=self.period_us,
            role_quotas_us=dict(self.quotas_us),
            role_cgroups=dict(self.cgroups),
        )


def limit_roles(
    state: LabState, budgets: Mapping[str, float], cpu: CpuController | None = None
) -> RoleLimits:
    """A cgroup per role (role -> budget, a fraction of one core) for its processes to
    start in; each recorded in ``state`` before it is created. Made before the role
    starts anything, so it holds no process yet."""
    cpu = cpu or controller(key="lab.budget")
    limits = RoleLimits(version=cpu.version, period_us=PERIOD_US)
    for role, budget in budgets.items():
        path = cpu.root / cgroup_name(state.lab_id, role)
        _make(state, path)
        limits.quotas_us[role] = _set_quota(cpu, path, budget)
        limits.cgroups[role] = str(path)
    return limits


def _make(state: LabState, path: Path) -> None:
    state.add_cgroup(path)
    try:
        path.mkdir()
    except OSError as exc:
        # Not created, so not ours to remove (it may be another lab's, or a leftover).
        state.cgroups.remove(str(path))
        state.save()
        raise LabError(f"cannot create cgroup {path}: {exc.strerror}") from exc


def _set_quota(cpu: CpuController, path: Path, budget: float) -> int:
    quota = quota_us(budget)
    if cpu.version == 2:
        _write(path / "cpu.max", f"{quota} {PERIOD_US}")
    else:
        _write(path / "cpu.cfs_period_us", str(PERIOD_US))
        _write(path / "cpu.cfs_quota_us", str(quota))
    return quota


def _write(path: Path, value: str) -> None:
    log.debug("write %s: %s", path, value)
    try:
        with path.open("w") as f:
            f.write(value + "\n")
    except OSError as exc:
        raise LabError(f"cannot write {value!r} to {path}: {exc.strerror}") from exc


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []
