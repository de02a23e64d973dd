"""A PPPoE session on the WAN link (``lab.wan.encapsulation = "pppoe"``): the router and
its WAN peer talk PPP over PPPoE (RFC 2516) as a DSL or fibre line's ISP runs it, with the
kernel's ``pppoe`` module carrying every data packet.

Each end of the WAN runs Debian's ``pppd`` with its ``pppoe.so`` plugin on its veth. Both
attach to session :data:`SESSION` with the other end's MAC (``rp_pppoe_sess``), the state
PPPoE's discovery stage (PADI, PADO, PADR, PADS) would leave them in: discovery only
picks a session number and a peer, and Debian's ``pppoe-server`` cannot hand a session
to the kernel (it was built without ``-k``). LCP and IPCP then run for real, and the
addresses are the WAN link's own (198.18.<wan>.1 and .2) on the ``ppp`` devices, so the
lab's routes and tunnels use the WAN as they would without PPPoE.

What it changes, and where to see it:

- every frame on the WAN carries 8 more bytes (PPPoE's 6, PPP's 2-byte protocol), so the
  IP MTU is ``lab.wan.mtu`` - 8 (1492 on a 1500 link) and the ceiling counts them;
- the shaper and the queue under test stay on the WAN veth, where they see PPPoE frames,
  as an ISP's line does;
- a NIC's RSS cannot hash inside PPPoE, so it puts every session frame into one receive
  queue: with ``lab.queues``, the WAN veths are steered to one core
  (:func:`tunnelbench.lab.netns.hold_session_to_one_core`), as on the APU2.

No compression of any kind (BSD, deflate, Van Jacobson, CCP), no authentication, no
default route, no DNS, no IPv6 (the lab over PPPoE is IPv4 only). Each pppd writes its
PID file under /run (named after its device, recorded for teardown) and ends on SIGTERM
after telling its peer (LCP Terminate, 1 s at most).
"""

import json
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tunnelbench.errors import LabError
from tunnelbench.lab.host import SAME_AS_STDOUT
from tunnelbench.lab.state import LabState
from tunnelbench.lab.topology import Chain, link_address
from tunnelbench.model.plan import LabSettings
from tunnelbench.system import programs

SESSION = 1
#: LCP and IPCP in an emulated guest took 3-5 s; a real one a fraction of that.
SETUP_TIMEOUT_S = 30.0
RUN = Path("/run")


class Lab(Protocol):
    """What of a lab (:class:`tunnelbench.lab.netns.Lab`, which builds the session while
    it builds itself) the session needs."""

    settings: LabSettings
    state: LabState
    chain: Chain

    @property
    def directory(self) -> Path: ...
    def ns(self, role: str) -> str: ...
    def ifname(self, suffix: str) -> str: ...
    def wan_device(self, role: str) -> str: ...
    def exec(
        self, role: str, argv: Sequence[str], *, check: bool = True
    ) -> subprocess.CompletedProcess[str]: ...
    def start(
        self,
        role: str,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | str | None = None,
    ) -> "subprocess.Popen[bytes]": ...


def device_names(lab: Lab) -> dict[str, str]:
    """role -> the ppp device of each WAN end: ``tb<lab>-ppp0`` (left), ``-ppp1``
    (right). Distinct, since pppd names its PID file after the device."""
    left, right = lab.chain.tunnel_ends
    return {left: lab.ifname("ppp0"), right: lab.ifname("ppp1")}


def pppd_argv(
    device: str, peer_mac: str, local: str, remote: str, mtu: int, ifname: str
) -> list[str]:
    """One end's pppd: on ``device``'s session :data:`SESSION` to ``peer_mac``, with the
    link's addresses, in the foreground (its PID is the one recorded)."""
    return [
        "pppd",
        "plugin", "pppoe.so", f"nic-{device}",
        "rp_pppoe_sess", f"{SESSION}:{peer_mac}",
        f"{local}:{remote}",
        "ifname", ifname,
        "mtu", str(mtu), "mru", str(mtu),
        "noauth", "nodefaultroute", "noproxyarp", "noipv6", "nodetach", "nopersist",
        "maxfail", "1",
        "nobsdcomp", "nodeflate", "noccp", "novj", "novjccomp", "noaccomp", "nopcomp",
        "default-asyncmap",
        # A dead peer is noticed in ~3 s, and SIGTERM ends a session in 1 s at most.
        "lcp-echo-interval", "1", "lcp-echo-failure", "3",
        "lcp-restart", "1", "lcp-max-terminate", "1",
        # Debian's hooks (DNS from the peer) and its /etc/ppp/options' "auth" are not ours.
        "ip-up-script", "/bin/true", "ip-down-script", "/bin/true",
    ]  # fmt: skip


def up(lab: Lab) -> dict[str, dict[str, str | int]]:
    """Start both ends' pppd, wait until each ppp device has its address, and check with
    each end's kernel that its session is the one asked for; returns role -> its ppp
    device, session and peer MAC. A pppd that ends first is a :class:`LabError` with its
    log."""
    programs.require("pppd", "lab.wan.encapsulation = 'pppoe' (Debian ppp)")
    devices = device_names(lab)
    left, right = lab.chain.tunnel_ends
    wan = lab.chain.wan
    macs = {role: _mac(lab, role, lab.wan_device(role)) for role in (left, right)}
    ends = {left: (right, True), right: (left, False)}
    if not (RUN / "pppd2.tdb").exists():
        lab.state.add_file(RUN / "pppd2.tdb")  # pppd's own database, made by the first
    started = {}
    for role, (peer, is_left) in ends.items():
        local, remote = (link_address(wan, side, 4) for side in (is_left, not is_left))
        lab.state.add_file(RUN / f"{devices[role]}.pid")
        argv = pppd_argv(
            lab.wan_device(role), macs[peer], local, remote, lab.settings.wan.ip_mtu, devices[role]
        )
        log = lab.directory / f"pppd-{role}.log"
        started[role] = (lab.start(role, argv, stdout=log, stderr=SAME_AS_STDOUT), log)
    lab.state.save()
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    waiting = set(devices)
    while waiting:
        for role in sorted(waiting):
            proc, log = started[role]
            if proc.poll() is not None:
                raise LabError(
                    f"lab.wan.encapsulation: pppd in {lab.ns(role)} ended (exit code"
                    f" {proc.returncode}) before its session was up: {_tail(log)}"
                )
            if _has_address(lab, role, devices[role]):
                waiting.discard(role)
        if waiting and time.monotonic() > deadline:
            logs = "; ".join(f"{r}: {_tail(started[r][1])}" for r in sorted(waiting))
            raise LabError(
                f"lab.wan.encapsulation: the PPPoE session was not up in {SETUP_TIMEOUT_S:.0f} s"
                f" ({logs})"
            )
        if waiting:
            time.sleep(0.1)
    sessions: dict[str, dict[str, str | int]] = {}
    for role, (peer, _) in ends.items():
        found = parse_sessions(lab.exec(role, ["cat", "/proc/net/pppoe"]).stdout)
        expected = (SESSION, macs[peer], lab.wan_device(role))
        if expected not in found:
            raise LabError(
                f"lab.wan.encapsulation: {lab.ns(role)}'s kernel has no PPPoE session"
                f" {SESSION} to {macs[peer]} on {lab.wan_device(role)} (/proc/net/pppoe: {found})"
            )
        sessions[role] = {"device": devices[role], "session": SESSION, "peer": macs[peer]}
    return sessions


def parse_sessions(text: str) -> list[tuple[int, str, str]]:
    """(session, peer MAC, device) of each line of ``/proc/net/pppoe``. The kernel prints
    the session id as it holds it, in network byte order, as a hex integer."""
    found = []
    for line in text.splitlines()[1:]:  # after "Id       Address              Device"
        words = line.split()
        if len(words) == 3:
            found.append((socket.ntohs(int(words[0], 16) & 0xFFFF), words[1].lower(), words[2]))
    return found


def _mac(lab: Lab, role: str, device: str) -> str:
    shown = json.loads(lab.exec(role, ["ip", "-j", "link", "show", "dev", device]).stdout)
    return str(shown[0]["address"])


def _has_address(lab: Lab, role: str, device: str) -> bool:
    done = lab.exec(role, ["ip", "-j", "-4", "addr", "show", "dev", device], check=False)
    if done.returncode != 0:
        return False  # not created yet
    return any(info.get("local") for link in json.loads(done.stdout) for info in link["addr_info"])


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return " | ".join(text[-lines:]) or "no output"
