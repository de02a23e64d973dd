"""A hosts file's client and server as a generator's ends and its hosts as the trial
probes' machines (:class:`HostsEnds`): the lab's generator and probes run on them over
SSH with the same code as in the lab; and each host's clock as ping's timestamps need it.
"""

import random
import re
import time
from dataclasses import dataclass, field

from tunnelbench.errors import LabError
from tunnelbench.remote.host import SshHost
from tunnelbench.remote.session import Session, SessionRoles
from tunnelbench.traffic import waiting


@dataclass(frozen=True)
class HostsEnds(SessionRoles):
    """A hosts file's client and server as a generator's
    :class:`~tunnelbench.traffic.base.Ends`, and its hosts as the trial probes'
    :class:`~tunnelbench.probes.trial.Machines`: the generator and the probes run on them
    as they run in the lab, their programs as each host's PATH finds them, their files in
    the run's directory there."""

    session: Session
    tunnelled: bool
    #: The ports :meth:`free_ports` handed out, in order.
    taken: list[int] = field(default_factory=list)
    #: role -> whether its ``tc`` prints JSON.
    tc_json: dict[str, bool] = field(default_factory=dict)

    def server_address(self, family: int) -> str:
        return self.session.file.target(self.tunnelled, family)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.session.hosts)

    def has(self, role: str, program: str) -> bool:
        """In the host's PATH; ``tc`` only where it prints JSON (OpenWrt's tc-tiny may
        not), asked once a trial."""
        if program not in self.session.facts[role].programs:
            return False
        if program == "tc" and role not in self.tc_json:
            done = self.session.hosts[role].run(["tc", "-j", "qdisc", "show"], check=False)
            self.tc_json[role] = done.returncode == 0 and done.stdout.lstrip().startswith("[")
        return self.tc_json.get(role, True)

    def clock_offset(self, role: str) -> float:
        return clock_offset(self.session.hosts[role])

    def free_ports(self, role: str, ports: range, count: int) -> list[int]:
        """Chosen at random among the free ones: another program (or another run) on a
        real host may take ports as this one does."""
        used = waiting.bound_ports(self.session.hosts[role])
        free = [port for port in ports if port not in used]
        if len(free) < count:
            raise LabError(
                f"{role}: {len(free)} free port(s) in {ports.start}-{ports.stop - 1},"
                f" {count} needed"
            )
        ports_now = sorted(random.sample(free, count))
        self.taken.extend(ports_now)
        return ports_now


def clock_offset(host: SshHost) -> float:
    """The host's wall clock minus this machine's, in seconds: its ``date`` read halfway
    through one command over SSH (off by at most half that command's round trip). ping
    stamps its replies with the host's clock; the window is this machine's."""
    before = time.time()
    text = host.run(["date", "+%s.%N"]).stdout.strip()
    after = time.time()
    if not re.fullmatch(r"\d+\.\d{9}", text):
        raise LabError(
            f"{host.name}: `date +%s.%N` said {text[:40]!r}: no sub-second clock to place"
            " ping's timestamps in the window"
        )
    return float(text) - (before + after) / 2
