"""netsniff-ng's trafgen as a packet generator: UDP frames of one size at a set rate.

iperf3 sends UDP through a socket: each datagram costs a system call and the whole IP
stack, and on this machine one iperf3 process sent 189 kpps of 64-byte frames with its
core at 99% (``benchmarks/generator_pps.py``). trafgen writes crafted frames straight
into a device's ring (``PF_PACKET``, memory-mapped), several times that from one core, so
that the path, not the generator, is what a rate search finds.

What it sends: one UDP packet, repeated, from the client's address to the server's,
framed for the client's next hop (the first router on the route to the server, or the
server itself on a shared link: its MAC address, read from the neighbour table after a
ping), written to the device that route leaves by. So the frames leave the client as
its own packets would, through the device's queue discipline (``--qdisc-path``: trafgen
bypasses it by default, which would skip the lab's shaper), but not through the
client's routing: a tunnel *on the client* never sees them. Through a tunnel, the
generator must sit behind the tunnel's gateway (a site-to-site lab), which then forwards
them into the tunnel as a router does.

A frame the device's queue refuses is written again until it is taken (the queue's drop
count rises by every refusal: 1.2 million for 2,000 frames into a full 10 Mbit/s shaper
here), so trafgen loses no frame at its own device: it slows to what the queue takes. A
run's offered rate is therefore its frames over its own time (:attr:`Sent.pps`), which
the caller holds against the rate it asked for; the loss a rate search counts is
downstream, at the receiver's counters.

Each run is bounded by its packet count (``-n``) and a timeout; trafgen reports what it
wrote (``N packets outgoing``, ``B bytes outgoing``: the frames without their FCS), which
is held against the device's own transmit counter by the caller.
"""

import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunnelbench.errors import LabError, UserError
from tunnelbench.lab.host import Host
from tunnelbench.model import frames

PROGRAM = "trafgen"
PURPOSE = "the packet generator of rate searches (Debian package netsniff-ng)"
#: The UDP ports of the packets: discard (9), which nothing in a lab listens on, so the
#: receiver's kernel counts and drops each one without waking a process.
PORT = 9
#: Seconds a run may take beyond its packets' time at the set rate.
SLACK_S = 10.0

_COUNT = re.compile(r"^\s*(\d+) (packets|bytes) outgoing\s*$", re.MULTILINE)


@dataclass(frozen=True)
class NextHop:
    """Where the client's packets to an address leave it, and whom they are framed for."""

    device: str
    source: str  # the client's address on that route
    source_mac: str
    mac: str  # the next hop's


@dataclass(frozen=True)
class Sent:
    """What trafgen says it wrote, and how long the run took (from its start to its
    exit, on this machine's monotonic clock)."""

    packets: int
    bytes: int  # without the FCS
    seconds: float = 0.0

    @property
    def pps(self) -> float:
        """The rate it offered: its frames over its time."""
        return self.packets / self.seconds if self.seconds > 0 else 0.0


def next_hop(host: Host, address: str, family: int) -> NextHop:
    """The route from ``host`` to ``address``: its device, source address and the next
    hop's MAC address (resolved by one ping when the neighbour table has none yet)."""
    route = _json(host, ["ip", f"-{family}", "-j", "route", "get", address])
    if not route or "dev" not in route[0]:
        raise LabError(f"{host.name}: no route to {address}")
    device, via = route[0]["dev"], route[0].get("gateway", address)
    source = route[0].get("prefsrc")
    if source is None:
        raise LabError(f"{host.name}: the route to {address} has no source address")
    mac = _neighbour(host, via, device)
    if mac is None:
        host.run(["ping", f"-{family}", "-n", "-c", "1", "-W", "1", address], check=False)
        mac = _neighbour(host, via, device)
    if mac is None:
        raise LabError(f"{host.name}: {via} on {device} did not answer for its MAC address")
    link = _json(host, ["ip", "-j", "link", "show", "dev", device])
    return NextHop(device, source, link[0]["address"], mac)


def _neighbour(host: Host, address: str, device: str) -> str | None:
    for entry in _json(host, ["ip", "-j", "neigh", "show", address, "dev", device]):
        if entry.get("lladdr") and "FAILED" not in entry.get("state", []):
            return str(entry["lladdr"])
    return None


def _json(host: Host, argv: list[str]) -> list[dict[str, Any]]:
    done = host.run(argv, check=False)
    if done.returncode != 0:
        raise LabError(f"{host.name}: {' '.join(argv)}: {done.stderr.strip()}")
    return list(json.loads(done.stdout or "[]"))


def packet(hop: NextHop, destination: str, family: int, frame: int) -> str:
    """trafgen's description of one ``frame``-byte frame (FCS included) carrying a UDP
    packet to ``destination``; its checksums are computed by trafgen."""
    payload = frames.udp_payload(frame, family)
    # Both set: left to trafgen, the TTL is one no router forwards (a lab's gateway
    # forwarded none of 20,000 frames) and an IPv6 frame's EtherType is 0.
    ip, hops, ethertype = ("ipv4", "ttl", "0x0800") if family == 4 else ("ipv6", "hl", "0x86dd")
    return (
        f"{{ eth(da={hop.mac}, sa={hop.source_mac}, type={ethertype}),"
        f" {ip}(saddr={hop.source}, daddr={destination}, {hops}=64),"
        f" udp(sp={PORT}, dp={PORT}), fill(0x00, {payload}) }}"
    )


def argv(binary: str, device: str, config: Path, count: int, rate_pps: int) -> list[str]:
    """One process (``-P 1``) writing ``count`` frames of ``config`` to ``device`` at
    ``rate_pps``, through its queue discipline; no CPU statistics, and no change to the
    host's socket memory limits (``--no-sock-mem``: a namespace cannot change them)."""
    if count < 1 or rate_pps < 1:
        raise UserError(f"trafgen: count {count} and rate {rate_pps} pps must be positive")
    return [
        binary, "--dev", device, "--conf", str(config), "--num", str(count),
        "--rate", f"{rate_pps}pps", "--cpus", "1", "--qdisc-path", "--no-cpu-stats",
        "--no-sock-mem",
    ]  # fmt: skip


def parse(stdout: str) -> Sent:
    """The counts trafgen prints on leaving."""
    counts = {kind: int(number) for number, kind in _COUNT.findall(stdout)}
    if set(counts) != {"packets", "bytes"}:
        raise LabError(f"trafgen printed no packet and byte counts: {stdout.strip()[-300:]!r}")
    return Sent(counts["packets"], counts["bytes"])


def send(host: Host, binary: str, hop: NextHop, config: Path, count: int, rate_pps: int) -> Sent:
    """Run trafgen on ``host`` until it has written ``count`` frames of ``config``;
    what it wrote, checked to be all it was asked."""
    timeout = count / rate_pps + SLACK_S
    began = time.monotonic()
    done = host.run(argv(binary, hop.device, config, count, rate_pps), check=False, timeout=timeout)
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise LabError(f"trafgen on {host.name} (exit status {done.returncode}): "
                       f"{done.stderr.strip()[-300:]}")  # fmt: skip
    sent = replace(parse(done.stdout), seconds=seconds)
    if sent.packets != count:
        raise LabError(f"trafgen on {host.name} wrote {sent.packets} of {count} frames")
    return sent
