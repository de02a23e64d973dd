"""Where a tuning session measures: the namespace lab on this kernel, or a hosts file's
machines. A bench says which candidate changes its testbed can apply (a refused one is
listed in the session's path with the reason, never measured) and how each candidate's
configuration runs there.

On real hosts only what ``run --hosts`` may vary can be tried
(:mod:`tunnelbench.bench.testbeds.hosts_plan`): the traffic and ``lab.wan``'s shaper,
queue and impairments on the real WAN link. A change of a lab-only setting (the lab's
queues, rates, MTUs, cores, CPU budgets) is refused with the hosts' own refusal.
"""

import dataclasses
from typing import Any

from tunnelbench.bench import planfile, runner
from tunnelbench.bench.labpool import LabPool
from tunnelbench.bench.testbed import Resolution, Testbed
from tunnelbench.bench.testbeds import hosts_plan
from tunnelbench.bench.testbeds.hosts import HostsTestbed
from tunnelbench.bench.testbeds.lab import LabTestbed
from tunnelbench.errors import UserError
from tunnelbench.model.plan import LabSettings, Trial, TrialConfig
from tunnelbench.remote import wan
from tunnelbench.remote.hostsfile import HostsFile
from tunnelbench.remote.session import Session


class Bench:
    """The lab's bench: every candidate the lab on this kernel can run."""

    def __init__(self) -> None:
        self.testbed: Testbed = LabTestbed(LabPool())  # the session's labs, kept between trials

    def derive(self, best: TrialConfig, setting: str, value: Any) -> TrialConfig:
        """``best`` with ``setting`` changed to ``value``; a :class:`UserError` says why
        that change cannot be tried here."""
        return planfile.derive(best, {setting: value})

    def admit(self, config: TrialConfig) -> Resolution | None:
        """How ``config`` runs here (None: the testbed resolves it per trial); a
        :class:`UserError` says why it cannot."""
        resolutions, skipped = runner.check([Trial(0, 0, config)])
        if skipped:
            raise UserError(next(iter(skipped.values())))
        return resolutions[config.key()]


class HostsBench(Bench):
    """A connected hosts file's machines (see the module's text)."""

    def __init__(self, session: Session, start: TrialConfig) -> None:
        """``start``: the session's start as the hosts run it (with the real path's MTUs
        when it sets ``lab.wan``: the link was checked for it then)."""
        self.session = session
        self.testbed = HostsTestbed(session)
        self._mtus: tuple[int, int] | None = None
        if wan.is_set(start.lab.wan):
            self._mtus = start.lab.wan.mtu, start.lab.lan_mtu

    def derive(self, best: TrialConfig, setting: str, value: Any) -> TrialConfig:
        config = planned_change(best, setting, value, self.session.file)
        return self._fitted(config)

    def admit(self, config: TrialConfig) -> Resolution | None:
        return None  # the hosts testbed resolves each trial on the hosts

    def _fitted(self, config: TrialConfig) -> TrialConfig:
        if not wan.is_set(config.lab.wan):
            return config
        if self._mtus is None:
            # Checked once, before any change of the session's stands on the link.
            if problems := wan.problems(self.session):
                raise UserError("; ".join(problems))
            self._mtus = wan.mtus(self.session)
        wan_mtu, lan_mtu = self._mtus
        lab = config.lab
        fitted = dataclasses.replace(
            lab, lan_mtu=lan_mtu, wan=dataclasses.replace(lab.wan, mtu=wan_mtu)
        )
        return dataclasses.replace(config, lab=fitted)


def planned_change(best: TrialConfig, setting: str, value: Any, hosts: HostsFile) -> TrialConfig:
    """``best`` (as the hosts ran it) with ``setting`` changed to ``value``, as a plan
    for ``hosts`` gives it (the real path's MTUs not yet fitted back); a
    :class:`UserError` names what the hosts cannot take. The change is checked on the
    configuration as a plan gives it: the MTUs the hosts recorded are theirs, not the
    plan's."""
    config = planfile.derive(_as_planned(best), {setting: value})
    if (refused := hosts_plan.refusal(config, hosts)) is not None:
        raise UserError(refused)
    return config


def _as_planned(config: TrialConfig) -> TrialConfig:
    """``config`` with the MTUs a hosts run records (the real path's) back at a plan's
    defaults."""
    default = LabSettings()
    lab = config.lab
    planned = dataclasses.replace(
        lab, lan_mtu=default.lan_mtu, wan=dataclasses.replace(lab.wan, mtu=default.wan.mtu)
    )
    return dataclasses.replace(config, lab=planned)
