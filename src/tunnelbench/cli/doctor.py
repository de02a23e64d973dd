"""``tunnelbench doctor``: what this machine can benchmark, and why not the rest.

Users' kernels differ from one another and from CI's; before a long run they want to
know which tunnels, queue disciplines, ciphers and generators they will get, and a run
skips configurations with the same reasons. The report is data (:func:`collect`, also
printed as JSON) rendered as a plain table (:func:`render`). What is missing carries a
``hint``: the module to load or the package to install, as the kind, generator or
:data:`~tunnelbench.bench.capabilities.KERNEL_MODULES` declares it. On a kernel that
cannot load modules (built without them, or loading disabled) no ``modprobe`` is hinted:
one row says so and names what is missing.
"""

import argparse
import json
from dataclasses import replace
from pathlib import Path

from tunnelbench.bench import capabilities, guest_trials, skips
from tunnelbench.bench.doctor_report import Fact, Report, Row, VmRun
from tunnelbench.bench.runner import require_root
from tunnelbench.cli.options import add_kernel_arguments, lab_settings
from tunnelbench.cli.parsing import Verbs
from tunnelbench.kinds import Generator as GeneratorKind
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import HOST_KERNEL, TunnelSettings, VmSettings
from tunnelbench.report import fit
from tunnelbench.report.fit import wrap
from tunnelbench.system import probing, programs
from tunnelbench.system.probing import Capabilities, Check, Program
from tunnelbench.traffic.iperf3 import THREADED_SINCE
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.openvpn import dco_choice
from tunnelbench.tunnels.wireguard import KERNEL, USERSPACE, WIREGUARD_GO, describe_version
from tunnelbench.vm import kernels

# Sections in the order they are printed, with the word that labels their rows.
SECTIONS = {
    "privileges": "privilege",
    "modules": "kernel",
    "tunnels": "link",
    "wireguard": "wg",
    "implementations": "userspace",
    "qdiscs": "qdisc",
    "congestion": "tcp cc",
    "esp": "esp",
    "wan": "wan",
    "cgroup": "cgroup",
    "generators": "generator",
    "cpus": "cpus",
}
IPERF2_NOTE = "traffic.generator = iperf2: multi-threaded, all streams in one process"
#: The narrowest the detail column is wrapped to.
MIN_DETAIL = 24
NOT_PROBED_NOTE = (
    "not probed: tunnelbench could not test this here. Configurations that need it are\n"
    "not skipped; a run that uses it reports the real error."
)


def _entry(check: Check, detail: str | None = None, hint: str | None = None, **facts: Fact) -> Row:
    """A capability's row; ``hint`` (how to get it) is kept only when it is missing."""
    kept = hint if check.ok is False else None
    return Row(check.status, check.detail if detail is None else detail, kept, facts)


def _program(found: Program, name: str, **extra: Fact) -> Row:
    """A program's row; ``name``: as the kind or generator names it, for the hint."""
    hint = capabilities.install_hint(name)
    facts: dict[str, Fact] = {"path": found.path, "version": found.version or None}
    detail = extra.pop("detail", None)
    return _entry(found, None if detail is None else str(detail), hint, **(facts | extra))


def _module(found: Check, name: str) -> Row:
    """A kernel capability's row (a link type, queue discipline, ESP algorithm)."""
    return _entry(found, hint=capabilities.module_hint(name))


def _pppoe(caps: Capabilities) -> Row:
    """``lab.wan.encapsulation = "pppoe"``: the kernel's part, then pppd."""
    if caps.pppoe.ok is False:
        return _module(caps.pppoe, "pppoe")
    pppd = caps.programs.get("pppd", Program(None, "not probed"))
    if not pppd.ok:
        return _program(pppd, "pppd", detail=f"pppd: {pppd.detail}; kernel: {caps.pppoe.detail}")
    return _entry(caps.pppoe, f"{caps.pppoe.detail}; {pppd.version} ({pppd.path})")


def _tunnels(caps: Capabilities) -> dict[str, Row]:
    entries = {kind: _module(found, kind) for kind, found in caps.links.items()}
    wireguard = caps.links.get("wireguard")
    if wireguard is not None and wireguard.ok is False:
        # Say what "auto" falls back to, since that is what a run will use.
        using = skips.resolve(TunnelSettings(kind=TunnelKind.WIREGUARD), caps)
        fallback = f"auto uses {using}" if using else f"nor is {WIREGUARD_GO}, auto's fallback"
        entries["wireguard"] = replace(
            entries["wireguard"], detail=f"{wireguard.detail}; {fallback}"
        )
    return entries


def _strongswan(caps: Capabilities) -> dict[str, Row]:
    """strongSwan's daemon and its userspace ESP (what ipsec uses without kernel ESP)."""
    charon = caps.programs.get(strongswan.CHARON, Program(None, "not probed"))
    entries = {"strongswan": _program(charon, strongswan.CHARON)}
    if charon.ok:
        swanctl = programs.find("swanctl")
        found = entries["strongswan"]
        at = f"; swanctl {'at ' + swanctl if swanctl else 'missing'}"
        entries["strongswan"] = replace(found, detail=found.detail + at)
    missing = strongswan.missing_plugins(strongswan.LIBIPSEC)
    detail = (
        "kernel-libipsec: userspace ESP over a TUN device (tunnel mode, ESP in UDP, "
        f"packets up to {strongswan.LIBIPSEC_MAX_MTU} bytes)"
        if not missing
        else f"missing strongSwan plugins: {', '.join(missing)}"
    )
    entries["libipsec"] = _entry(Check(bool(charon.ok) and not missing), detail)
    return entries


def _esp(caps: Capabilities) -> dict[str, Row]:
    """The kernel's ESP AEADs, then what ipsec and protection use with each cipher."""
    entries = {name: _module(found, name) for name, found in caps.esp.items()}
    if not caps.esp:
        return entries  # nothing probed: nothing to conclude
    uses = []
    for cipher, algorithm in strongswan.KERNEL_ALGORITHMS.items():
        found = caps.esp.get(algorithm, Check(None))
        who = {True: "kernel", False: strongswan.LIBIPSEC, None: "kernel (unknown here)"}[found.ok]
        uses.append(f"{cipher.value}: {who}")
    kernel = [caps.esp.get(a, Check(None)).ok for a in strongswan.KERNEL_ALGORITHMS.values()]
    entries["in the kernel"] = _entry(
        Check(True if any(kernel) else False if False in kernel else None),
        "ipsec and tunnel.protection use: " + ", ".join(uses),
    )
    return entries


def _openvpn(caps: Capabilities) -> Row:
    """The openvpn program, and whether its data channel would run in the kernel (DCO)."""
    found = caps.programs.get("openvpn", Program(None, "not probed"))
    if not found.ok:
        return _program(found, "openvpn", dco=None)
    dco = dco_choice(caps.openvpn_dco, found.version)
    release = found.version.split()[1] if len(found.version.split()) > 1 else found.version
    mode = "yes" if dco.enabled else "no, runs in userspace"
    detail = f"OpenVPN {release} ({found.path}); DCO {mode}: {dco.reason}"
    return _program(found, "openvpn", detail=detail, dco=dco.enabled)


def _wireguard(caps: Capabilities) -> dict[str, Row]:
    """Every WireGuard implementation (``tunnel.implementation``): found or not, and the
    version a run would record."""
    entries = {KERNEL: _module(caps.links.get("wireguard", Check(None, "not probed")), "wireguard")}
    for name, daemon in USERSPACE.items():
        found = caps.programs.get(daemon.program) or Program(None, "not probed")
        if not found.ok:
            entries[name] = _program(
                found, daemon.program, detail=f"{found.detail}: {daemon.purpose}"
            )
            continue
        package = caps.packages.get(daemon.package) if daemon.package else None
        entries[name] = _program(
            found,
            daemon.program,
            detail=describe_version(daemon, found, package),
            pinned=found.pinned or None,
            package=f"{daemon.package} {package}" if daemon.package and package else None,
        )
    return entries


def _generators(caps: Capabilities) -> dict[str, Row]:
    iperf3, iperf2 = caps.programs["iperf3"], caps.programs["iperf"]
    threaded = capabilities.iperf3_threaded(caps)
    since = ".".join(map(str, THREADED_SINCE))
    threads = {
        True: "multi-threaded",
        False: f"single-threaded (threads from {since}): runs one process per stream",
        None: "threading unknown",
    }[threaded]
    return {
        "iperf3": _program(
            iperf3,
            "iperf3",
            detail=f"{iperf3.detail}; {threads}" if iperf3.ok else iperf3.detail,
            multithreaded=threaded,
        ),
        # Keyed by program, like the others; the plan names it traffic.generator = "iperf2".
        "iperf": _program(
            iperf2,
            "iperf",
            detail=f"{iperf2.detail}; {IPERF2_NOTE}" if iperf2.ok else iperf2.detail,
            release=probing.iperf2_version(iperf2.version),
            generator=GeneratorKind.IPERF2.value,
            multithreaded=True if iperf2.ok else None,
        ),
    }


def _congestion(caps: Capabilities) -> dict[str, Row]:
    cc = caps.congestion
    if cc.ok is not True:
        return {"available": _entry(cc)}
    entries = {name: _entry(cc, "default" if name == cc.default else "") for name in cc.available}
    for name in cc.loadable:
        entries[name] = _entry(cc, "module, loaded on first use")
    return entries


def _ranges(cpus: tuple[int, ...]) -> str:
    """CPU numbers in the kernel's list format, e.g. ``0-1,4``."""
    spans: list[list[int]] = []
    for cpu in sorted(cpus):
        if spans and cpu == spans[-1][1] + 1:
            spans[-1][1] = cpu
        else:
            spans.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def module_loading(proc: Path = Path("/proc")) -> Check:
    """Whether this kernel can load modules: ``/proc/modules`` exists exactly when it is
    built with module support (CONFIG_MODULES), and ``kernel.modules_disabled`` = 1
    refuses every load until the next boot."""
    if not (proc / "modules").exists():
        return Check(False, "built without module support (no /proc/modules)")
    try:
        disabled = (proc / "sys" / "kernel" / "modules_disabled").read_text().strip() == "1"
    except OSError:
        disabled = False
    if disabled:
        return Check(
            False, "module loading disabled until the next boot (kernel.modules_disabled = 1)"
        )
    return Check(True, "loads modules")


def _without_module_hints(report: Report, loading: Check) -> Report:
    """The report of a kernel that cannot load modules: a ``modprobe`` would fail, so
    instead of one hint a row, one row says so and names every capability missing for
    want of a module."""
    missing: dict[str, list[str]] = {}
    for section, label in SECTIONS.items():
        rows = report.sections.get(section, {})
        for name, row in rows.items():
            if (row.hint or "").startswith("modprobe"):
                rows[name] = replace(row, hint=None)
                missing.setdefault(label, []).append(name)
    named = "; ".join(f"{label} {', '.join(names)}" for label, names in missing.items())
    what = f"; missing for want of a module: {named}" if missing else ""
    detail = (
        f"this kernel cannot load modules: {loading.detail}{what}; use a kernel that has"
        " them built in, or a lab on a Debian kernel in a VM (--kernel debian)"
    )
    flat = [f"{label} {name}" for label, names in missing.items() for name in names]
    report.sections["modules"] = {"modules": _entry(loading, detail, missing=flat)}
    return report


def collect(caps: Capabilities | None = None, loading: Check | None = None) -> Report:
    """The report: one section per kind of capability, each mapping a name to its row:
    its status ("yes", "no", "not probed"), detail and any facts of its own.
    ``loading``: whether the kernel loads modules (read from /proc when not given)."""
    caps = caps or capabilities.probe()
    loading = loading or module_loading()
    root = Check(caps.root, f"euid {caps.euid}" + ("" if caps.root else "; a run needs root"))
    sections = {
        "privileges": {"root": _entry(root), "network namespace": _entry(caps.netns)},
        "modules": {"modules": _entry(loading)},
        "tunnels": _tunnels(caps),
        "wireguard": _wireguard(caps),
        "implementations": {
            "openvpn": _openvpn(caps),
            "ethtool": _program(
                caps.programs["ethtool"],
                "ethtool",
                detail=f"{caps.programs['ethtool'].detail}; for offloads on real hosts (the"
                " namespace lab sets them itself)",
            ),
            **_strongswan(caps),
        },
        "qdiscs": {kind: _module(found, kind) for kind, found in caps.qdiscs.items()},
        "congestion": _congestion(caps),
        "esp": _esp(caps),
        "wan": {"pppoe": _pppoe(caps)},
        "cgroup": {"cpu": _entry(caps.cgroup, version=caps.cgroup.version, path=caps.cgroup.path)},
        "generators": _generators(caps),
        "cpus": {
            "online": _entry(
                Check(bool(caps.cpus)),
                f"{len(caps.cpus)} ({_ranges(caps.cpus)})",
                count=len(caps.cpus),
                cpus=list(caps.cpus),
            )
        },
    }
    report = Report(caps.kernel, sections)
    return report if loading.ok is not False else _without_module_hints(report, loading)


def render(report: Report, width: int | None = None) -> str:
    """A plain aligned table: capability, status, detail; with ``width``, the details
    (and the lines around the table) wrapped to it, each under its own column."""
    rows = [["capability", "status", "detail"]]
    for section, label in SECTIONS.items():
        for name, entry in report.sections.get(section, {}).items():
            hint = f"; to get it: {entry.hint}" if entry.hint else ""
            rows.append([f"{label} {name}", entry.status, entry.detail + hint])
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    rows.insert(1, ["-" * widths[0], "-" * widths[1], "-" * len("detail")])
    lead = " " * (widths[0] + widths[1] + 4)
    lines = _wrapped(f"kernel {report.kernel}{_in_vm(report.vm)}", width, "  ")
    lines.append("")
    for row in rows:
        head = f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  "
        # A detail column narrower than this reads worse wrapped than left long.
        room = None if width is None else max(width, len(lead) + MIN_DETAIL)
        detail = wrap(row[2], room, indent=head, hanging=lead) if room and row[2] else []
        lines += detail or [f"{head}{row[2]}".rstrip()]
    if any(row[1] == "not probed" for row in rows):
        lines += ["", *_wrapped(NOT_PROBED_NOTE, width, "")]
    return "\n".join(lines) + "\n"


def _wrapped(text: str, width: int | None, hanging: str) -> list[str]:
    return [text] if width is None else wrap(text, width, hanging=hanging)


def _in_vm(vm: VmRun | None) -> str:
    if vm is None:
        return ""
    why = f": {vm.reason}" if vm.reason else ""
    where = vm.where
    return (
        f", in a VM ({where.virtualization}{why}; {where.vm_cpus} vCPUs,"
        f" {where.vm_memory_mib} MiB; booted in {vm.boot_s:.1f} s guest time,"
        f" {vm.up_s:.1f} s wall)"
    )


def main(as_json: bool, kernel: str = HOST_KERNEL, vm: VmSettings | None = None) -> int:
    """Print the report (a table, or JSON) and succeed: a missing capability is a finding,
    not an error. ``kernel``: another kernel's, from a guest booted on it."""
    if kernel == HOST_KERNEL:
        report = collect()
    else:
        require_root("tunnelbench doctor --kernel")
        report = guest_trials.doctor(kernels.locate(kernel), vm or VmSettings())
    text = json.dumps(report.to_json(), indent=2) + "\n" if as_json else render(report, fit.width())
    print(text, end="")
    return 0


def register(verbs: Verbs) -> None:
    doctor = verbs.add_parser("doctor", help="what this kernel and machine can test")
    doctor.add_argument("--json", action="store_true", help="as JSON")
    add_kernel_arguments(doctor.add_argument_group("kernel", argument_default=argparse.SUPPRESS))
    doctor.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    settings = lab_settings(args)
    return main(as_json=args.json, kernel=settings.kernel, vm=settings.vm)
