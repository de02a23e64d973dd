"""The seam between a tunnel kind and the machines its two ends run on.

A kind that acts only through a :class:`Site` (its ``build``) runs wherever a site can be
given: in the namespace lab (:class:`tunnelbench.lab.netns.Lab` is one) and on the hosts
of a hosts file (:class:`tunnelbench.remote.site.HostsSite`). What differs between them
is answered here, not by the kind: the two ends, the inner IP versions carried, device
names, the underlay (where each end's outer packets go), the inner addresses and which
destinations each end routes into the tunnel; and ``ip_batch``, which on real hosts
records how to reverse each change before making it.

A kind with a daemon (WireGuard's userspace implementations, OpenVPN, strongSwan's
charon) starts it on the end's
:class:`~tunnelbench.lab.host.Host` and waits for it through the site
(:meth:`Site.await_daemon`): the lab reads the daemon's own ``/proc`` entry, a host is
asked over its connection.

Contract: ``ip_batch`` runs ``ip`` commands on ``role`` in order, the first failure an
error (:class:`~tunnelbench.system.command.CommandError`); only ``link add``, ``link
set``, ``address add`` and ``route add`` are given, and whatever they create is removed
with the site. ``inner_address`` carries its prefix length; the routes are prefixes.
"""

import subprocess
from pathlib import Path
from typing import Protocol

from tunnelbench.lab.host import Host
from tunnelbench.lab.state import ProcessRecord
from tunnelbench.lab.topology import Underlay


class Site(Protocol):
    @property
    def tunnel_ends(self) -> tuple[str, str]:
        """The two roles the tunnel joins, the client's side first."""
        ...

    @property
    def families(self) -> tuple[int, ...]:
        """The inner IP versions the site's traffic may use."""
        ...

    def ifname(self, suffix: str) -> str:
        """A device name owned by this site (at most 15 characters)."""
        ...

    def wan_underlay(self, role: str) -> Underlay:
        """``role``'s underlay towards the other end: local and remote address, device."""
        ...

    def underlay_mtu(self) -> int:
        """The smaller of the two ends' underlay devices' MTUs."""
        ...

    def ip_batch(self, role: str, commands: list[list[str]]) -> None: ...

    def inner_address(self, role: str, family: int) -> str:
        """``role``'s address on the tunnel device, with its prefix length."""
        ...

    def inner_peer(self, role: str, family: int) -> str:
        """The other end's address on the tunnel (an L2 tunnel's next hop)."""
        ...

    def inner_routes(self, role: str, family: int) -> list[str]:
        """The prefixes ``role`` sends into the tunnel."""
        ...

    def selected(self, role: str, family: int) -> list[str]:
        """The prefixes behind ``role`` its peer routes into the tunnel, each widened to
        hold an address of ``role``'s own: an ESP traffic selector (strongSwan 5.9's
        userspace ESP routes each local selector's packets from an address of its own)."""
        ...

    def record_removal(self, role: str, command: list[str]) -> None:
        """Record ``command`` as what removes a change a daemon makes on ``role`` by
        itself, should the daemon not (killed): run as the site is removed."""
        ...

    def host(self, role: str) -> Host:
        """Where ``role`` runs commands, starts processes and keeps files."""
        ...

    def files(self, role: str) -> Path:
        """The directory for ``role``'s files (keys, logs), removed with the site."""
        ...

    def program(self, role: str, name: str, purpose: str) -> str:
        """How ``role`` runs program ``name``; a :class:`UserError` saying ``purpose``
        where it has none."""
        ...

    def can_create(self, role: str, link_type: str) -> bool:
        """Whether ``role``'s kernel creates links of ``link_type``."""
        ...

    def free_udp_port(self, role: str, ports: range) -> int:
        """A UDP port of ``ports`` nothing on ``role`` is bound to."""
        ...

    def await_daemon(
        self,
        role: str,
        proc: "subprocess.Popen[bytes]",
        name: str,
        log: Path,
        device: str | None,
        socket: Path | None = None,
    ) -> ProcessRecord | None:
        """Wait until the daemon ``proc`` started on ``role`` has created ``device``
        (unless None) and listens on ``socket`` (unless None), else a :class:`LabError`
        with its log's last lines; its record where the site samples its processes' CPU
        (the lab), else None."""
        ...
