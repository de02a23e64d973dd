"""``tunnelbench hosts check FILE``: connect to every host of a hosts file and say what
each has (kernel, cores, traffic generators, tunnel tools, the kernel's WireGuard and
each tunnel daemon's version, busybox or not, clock offset, thermal zones, clocks, crypto
drivers), changing nothing on any of them."""

import argparse
import time
from pathlib import Path

from tunnelbench.cli.parsing import Verbs
from tunnelbench.kinds import TunnelKind, TunnelMode
from tunnelbench.remote import hostsfile, probes, software
from tunnelbench.remote.session import BlackBox, Session, can_build, missing


def register(verbs: Verbs) -> None:
    hosts = verbs.add_parser("hosts", help="real hosts over SSH: check a hosts file")
    sub = hosts.add_subparsers(dest="hosts_verb", required=True, metavar="VERB")
    what = (
        "connect to each host of the file over SSH (its ssh = destination, with your SSH"
        " configuration and keys) and report what it has: kernel, cores, generators, tunnel"
        " tools and their versions, clock offset; a router without ssh is read over SNMP."
        " Read-only: it starts no daemon, creates no link or file and changes nothing on any"
        " host"
    )
    checked = sub.add_parser(
        "check",
        help="over SSH, report what each host has; changes nothing on any host",
        description=what,
    )
    checked.add_argument("file", help="a hosts file (TOML); see docs/remote.md")
    checked.set_defaults(func=check)


def check(args: argparse.Namespace) -> int:
    hosts = hostsfile.load(Path(args.file))
    began = time.monotonic()
    with Session(hosts, begin=False) as session:
        connected = time.monotonic() - began
        now = time.time()
        lines = [f"{hosts.path}: {hosts.layout}, DUT {hosts.dut}, tunnel {_tunnel(hosts)}"]
        for role in hosts.roles:
            destination = hosts.hosts[role].destination
            if destination is None:
                lines += describe_black_box(session.black_boxes[role], hosts, role == hosts.dut)
                continue
            lines += describe(role, destination, session.facts[role], now, role == hosts.dut)
        problems = missing(hosts, session.facts)
    logins = len(hosts.logins)
    lines.append(
        f"connected to {logins} host{'s' if logins != 1 else ''} in {connected:.1f} s;"
        " changed nothing on any host"
    )
    lines += [f"problem: {p}" for p in problems]
    print("\n".join(lines))
    return 1 if problems else 0


def _tunnel(hosts: hostsfile.HostsFile) -> str:
    plan = hosts.tunnel
    if plan.mode is TunnelMode.NONE:
        return "none"
    if plan.mode is TunnelMode.EXISTING:
        return f"{plan.kind}, already up (traffic to {plan.address})"
    return f"{plan.kind} built by tunnelbench between {plan.ends[0]} and {plan.ends[1]}"


def describe(role: str, destination: str, facts: probes.Facts, now: float, dut: bool) -> list[str]:
    tools = ", ".join(
        f"{name} {'yes' if name in facts.programs else 'no'}"
        for name in ("wg", "wireguard-go", "openvpn", "ip", "tc")
    )
    offset = facts.clock - now
    lines = [
        f"{role}{' (DUT)' if dut else ''}: ssh {destination}",
        f"  kernel {facts.kernel} {facts.machine}, {facts.cores} cores,"
        f" busybox {'yes' if facts.busybox else 'no'}",
        f"  iperf3: {facts.iperf3 or 'not installed'}; iperf2: {facts.iperf2 or 'not installed'}",
        f"  tools: {tools}; IPv4 forwarding {_onoff(facts.forwarding)}",
        f"  clock offset {_offset(offset)}",
    ]
    if facts.zones:
        zones = ", ".join(f"{z} ({t})" for z, t in sorted(facts.zones.items()))
        lines.append(f"  thermal zones: {zones}")
    else:
        lines.append("  thermal zones: none exposed (/sys/class/thermal)")
    if facts.governors:
        clocks = ", ".join(
            f"cpu{c} {g} up to {facts.max_mhz.get(c, 0):,.0f} MHz"
            for c, g in sorted(facts.governors.items())
        )
        lines.append(f"  cpufreq: {clocks}")
    else:
        lines.append("  cpufreq: none exposed (no frequency scaling driver)")
    lines.append(f"  kernel WireGuard: {facts.software.kernel_wireguard()}")
    lines.append("  tunnel kinds tunnelbench builds here:")
    for kind in hostsfile.BUILDABLE:
        able, why = can_build(TunnelKind(kind), facts)
        verdict = {True: "yes", False: "no", None: "perhaps"}[able]
        lines.append(f"    {kind}: {verdict} ({why})")
    for name in software.PROGRAMS:
        if (described := facts.software.describe(name)) is not None:
            lines.append(f"  {name}: {described}")
    drivers = facts.cipher_drivers()
    if drivers:
        shown = "; ".join(f"{n}: {d} ({p})" for n, (d, p) in drivers.items())
        lines.append(f"  crypto drivers: {shown}")
    else:
        lines.append("  crypto drivers: no cipher registered in /proc/crypto yet")
    return lines


def describe_black_box(box: BlackBox, hosts: hostsfile.HostsFile, dut: bool) -> list[str]:
    """A router without a login: what its SNMP agent serves, or that nothing is read."""
    role, remote = box.role, hosts.hosts[box.role]
    lines = [
        f"{role}{' (DUT)' if dut else ''}: no ssh: measured as a black box between the"
        " client and the server (its cores, processes and queues cannot be seen)"
    ]
    if box.reader is None or box.device is None:
        lines.append("  SNMP: none given (snmp and community): its interface counters are not read")
        return lines
    device = box.device
    target = remote.snmp.target if remote.snmp else "?"
    lines.append(f"  SNMP {target}: {device.description or 'no sysDescr'}")
    names = ", ".join(device.interfaces.values()) or "none"
    lines.append(f"  interfaces up: {names}")
    if device.cpu_counters:
        cores = f"{device.cores} cores" if device.cores else "cores not given"
        lines.append(
            f"  CPU: the whole box's time (UCD-SNMP-MIB ssCpuRaw*, {cores}); one core's"
            " saturation is not visible in it"
        )
    else:
        lines.append("  CPU: not served (no UCD-SNMP-MIB ssCpuRaw*): no CPU figure for it")
    return lines


def _offset(seconds: float) -> str:
    """The host's clock against this machine's, read to the second (busybox's ``date``
    has no fractions) over a connection that takes a fraction of one."""
    if abs(seconds) <= 1.5:
        return "within 1 s of this machine's"
    return f"{seconds:+.0f} s against this machine's (to 1 s)"


def _onoff(value: bool | None) -> str:
    return "unknown" if value is None else ("on" if value else "off")
