"""The ``tunnelbench lab`` verbs: build a lab by hand, look into it, remove it."""

import argparse
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.bench import capabilities, runner, skips
from tunnelbench.bench.runner import require_root
from tunnelbench.bench.session import LabSession
from tunnelbench.cli.options import (
    add_lab_arguments,
    check_conflicts,
    lab_settings,
    tunnel_settings,
)
from tunnelbench.cli.parsing import Verbs
from tunnelbench.errors import UserError
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab import state as lab_state
from tunnelbench.lab.topology import CHAINS, Chain, link_address, tunnel_address
from tunnelbench.model.plan import TrafficSettings, TrialConfig, check_choice
from tunnelbench.remote import hostsfile
from tunnelbench.remote import session as remote_session
from tunnelbench.tunnels import REGISTRY as TUNNELS


def up(args: argparse.Namespace) -> int:
    settings = lab_settings(args)
    kind = check_choice("--tunnel", args.tunnel, TunnelKind)
    requested = tunnel_settings(args, kind)
    if args.name is not None and not re.fullmatch(r"[a-z0-9]{1,6}", args.name):
        raise UserError(f"--name: {args.name!r} must be 1-6 lowercase letters or digits")
    # Traffic a lab by hand may carry: IPv4, or IPv6 through a kind that carries only it.
    family = 4 if 4 in TUNNELS.get(kind).families else 6
    config = TrialConfig(lab=settings, tunnel=requested, traffic=TrafficSettings(family=family))
    check_conflicts(config, args)  # options no machine can run together: bad input
    require_root("tunnelbench lab up")
    # The same refusals and the same resolution as a run's (a link type this kernel
    # lacks, a missing program), before anything is built; then the same bring-up.
    if reason := skips.unmet(config, capabilities.probe()):
        raise UserError(reason)
    spec = runner.resolve_tunnel(config)
    implementation, mtu = spec.implementation, spec.mtu
    with LabSession(config, spec, lab_id=args.name) as session:
        lab = session.build()
        handle = session.tunnel_up()
        session.keep()
    facts = lab.state.facts
    facts.tunnel, facts.implementation = kind.value, implementation
    facts.tunnel_mtu = mtu if kind is not TunnelKind.NONE else None
    facts.tunnel_devices = handle.devices
    lab.state.save()
    print(
        f"lab {lab.lab_id} is up ({settings.topology.value}, tunnel {kind.value}"
        + (f" via {implementation}, MTU {mtu}" if kind is not TunnelKind.NONE else "")
        + ")"
    )
    print(describe(lab.lab_id, lab.chain, kind is not TunnelKind.NONE))
    print(f"remove it with: tunnelbench lab down {lab.lab_id}")
    return 0


def describe(lab_id: str, chain: Chain, tunnel: bool) -> str:
    """Namespaces and their addresses, so a user can reach into the lab."""
    lines = []
    for i, role in enumerate(chain.roles):
        addresses = []
        if i > 0:
            addresses.append(link_address(i - 1, left=False, family=4))
        if i < len(chain.links):
            addresses.append(link_address(i, left=True, family=4))
        if tunnel and role in chain.tunnel_ends:
            addresses.append(tunnel_address(role == chain.tunnel_ends[0], 4) + " (tunnel)")
        lines.append(f"  {role:<7} tb-{lab_id}-{role:<8} {', '.join(addresses)}")
    return "\n".join(lines)


#: A lab's error where its state is root's and the user is not root.
ROOT_ONLY = "its state is readable by root only"


@dataclass(frozen=True)
class LabStatus:
    """A lab tunnelbench recorded: its id, topology and tunnel, its namespaces (recorded,
    and present now), processes (recorded, and alive), who uses it; ``error`` where its
    state could not be read (and None for what only the state tells)."""

    id: str
    namespaces_present: int
    topology: str | None = None
    tunnel: str | None = None
    namespaces: int | None = None
    processes: int | None = None
    processes_alive: int | None = None
    in_use_by: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        """``lab status --json``'s entry (its shape is documented in docs/reference.md)."""
        return {
            "id": self.id,
            "topology": self.topology,
            "tunnel": self.tunnel,
            "namespaces": self.namespaces,
            "namespaces_present": self.namespaces_present,
            "processes": self.processes,
            "processes_alive": self.processes_alive,
            "in_use_by": self.in_use_by,
            "error": self.error,
        }


def labs_status() -> list[LabStatus]:
    """Every lab tunnelbench recorded. A lab whose state cannot be read has ``error``
    set and None for what only the state tells."""
    present = set(lab_state.list_namespaces())
    found: list[LabStatus] = []
    for lab_id in lab_state.known_labs():
        ours = sum(1 for n in present if n.startswith(f"tb-{lab_id}-"))
        try:
            st = lab_state.LabState.load(lab_id)
        except PermissionError:
            # Labs are root's: show what anyone may see, the namespaces that exist.
            found.append(LabStatus(lab_id, ours, error=ROOT_ONLY))
        except lab_state.UntrustedState as exc:
            found.append(LabStatus(lab_id, ours, error=str(exc)))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            error = f"unreadable state file {lab_state.STATE_ROOT / lab_id}: {exc}"
            found.append(LabStatus(lab_id, ours, error=error))
        else:
            found.append(
                LabStatus(
                    lab_id,
                    sum(1 for n in st.namespaces if n in present),
                    topology=st.topology,
                    tunnel=st.facts.tunnel,
                    namespaces=len(st.namespaces),
                    processes=len(st.processes),
                    processes_alive=sum(1 for p in st.processes if lab_state.is_alive(p)),
                    in_use_by=st.owner_description() if st.owner_alive() else None,
                )
            )
    return found


def status(args: argparse.Namespace) -> int:
    labs = labs_status()
    if args.json:
        print(json.dumps([lab.to_json() for lab in labs], indent=2))
        return 0
    if not labs:
        print("no labs")
    for lab in labs:
        if lab.error == ROOT_ONLY:
            print(
                f"{lab.id}: {lab.namespaces_present} namespaces; its state is readable by"
                " root only (`sudo tunnelbench lab status` shows its processes)"
            )
        elif lab.error is not None:
            print(f"{lab.id}: {lab.error}")
        else:
            owner = f", in use by {lab.in_use_by}" if lab.in_use_by else ""
            print(
                f"{lab.id}: {lab.topology}, tunnel {lab.tunnel or '?'}, "
                f"{lab.namespaces_present}/{lab.namespaces} namespaces, "
                f"{lab.processes_alive}/{lab.processes} processes alive{owner}"
            )
    return 0


def _only_lab(requested: str | None) -> str:
    labs = lab_state.known_labs()
    if requested:
        if requested not in labs:
            raise UserError(f"--lab: no lab {requested!r}; labs: {', '.join(labs) or 'none'}")
        return requested
    if len(labs) != 1:
        raise UserError(f"--lab: say which lab; labs: {', '.join(labs) or 'none'}")
    return labs[0]


def exec_(args: argparse.Namespace) -> int:
    require_root("tunnelbench lab exec")
    lab_id = _only_lab(args.lab)
    st = lab_state.LabState.load(lab_id)
    chain = CHAINS[next(t for t in CHAINS if t.value == st.topology)]
    if args.role not in chain.roles:
        raise UserError(f"role: {args.role!r} is not in this lab; roles: {', '.join(chain.roles)}")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UserError("exec: give a command after the role, e.g. `lab exec client -- ip addr`")
    # The user's own command, run in the foreground with the terminal.
    return subprocess.call(["ip", "netns", "exec", f"tb-{lab_id}-{args.role}", *command])


def down(args: argparse.Namespace) -> int:
    require_root("tunnelbench lab down")
    if args.lab_id not in lab_state.known_labs():
        raise UserError(f"lab: no lab {args.lab_id!r}; see `tunnelbench lab status`")
    st = lab_state.LabState.load(args.lab_id)
    if st.owner_alive() and not args.force:
        raise UserError(
            f"lab: {args.lab_id!r} is in use by {st.owner_description()}; removing it would "
            "fail that run's trial. Wait for it, or add --force to remove it anyway"
        )
    return _remove([st])


def clean(args: argparse.Namespace) -> int:
    """Remove every lab whose owner is gone (every lab with ``--force``); list the labs
    left because a live process is using them."""
    if args.hosts is not None:
        return _clean_hosts(Path(args.hosts))
    require_root("tunnelbench lab clean")
    # Every state is checked before anything is acted on: one that another user could
    # have written stops the whole clean (exit 2), naming it.
    lab_state.check_private(lab_state.STATE_ROOT)
    labs, unreadable = [], 0
    for lab_id in lab_state.known_labs():
        try:
            labs.append(lab_state.LabState.load(lab_id))
        except FileNotFoundError:
            continue  # removed meanwhile (its run ended)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            print(f"lab {lab_id} left: its state file cannot be read ({exc})")
            unreadable += 1
    live = [] if args.force else [st for st in labs if st.owner_alive()]
    for st in live:
        print(
            f"lab {st.lab_id} left: in use by {st.owner_description()} "
            "(`tunnelbench lab clean --force` removes it anyway)"
        )
    dead = [st for st in labs if st not in live]
    if not dead:
        if not live and not unreadable:
            print("nothing to clean")
        return 1 if unreadable else 0
    return max(_remove(dead), 1 if unreadable else 0)


def _clean_hosts(path: Path) -> int:
    """What killed remote runs left on the hosts of a hosts file (their owner is gone)."""
    said, whole = remote_session.clean(hostsfile.load(path))
    print("\n".join(said) if said else "nothing to clean on any host")
    return 0 if whole else 1


def _remove(labs: list[lab_state.LabState]) -> int:
    failed = 0
    for st in labs:
        swept: list[str] = []
        problems = lab_state.teardown(st, swept)
        if swept:
            print(f"lab {st.lab_id}: ended unrecorded process(es): {', '.join(swept)}")
        if problems:
            failed += 1
            print(f"lab {st.lab_id}: " + "; ".join(problems))
        else:
            print(f"lab {st.lab_id} removed")
    return 1 if failed else 0


def register(verbs: Verbs) -> None:
    lab = verbs.add_parser("lab", help="build, inspect and remove labs by hand")
    lab_verbs = lab.add_subparsers(dest="lab_verb", required=True, metavar="LAB_VERB")
    built = lab_verbs.add_parser("up", help="build a lab and leave it running")
    built.add_argument(
        "--tunnel",
        default="none",
        choices=[k.value for k in TUNNELS.kinds()],
        metavar="KIND",
        help=f"{' | '.join(k.value for k in TUNNELS.kinds())} (default none)",
    )
    built.add_argument("--name", help="lab id: 1-6 lowercase letters or digits (default random)")
    add_lab_arguments(built, kernel=False)
    built.set_defaults(func=up)
    listed = lab_verbs.add_parser("status", help="list labs and what they hold")
    listed.add_argument("--json", action="store_true", help="as a JSON list of labs")
    listed.set_defaults(func=status)
    ex = lab_verbs.add_parser("exec", help="run a command in a lab namespace")
    ex.add_argument("--lab", help="lab id (default: the only lab)")
    ex.add_argument("role", help="client | gw | gwa | gwb | server")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    ex.set_defaults(func=exec_)
    removed = lab_verbs.add_parser("down", help="remove one lab")
    removed.add_argument("lab_id")
    removed.add_argument(
        "--force", action="store_true", help="remove it even while a live process uses it"
    )
    removed.set_defaults(func=down)
    cleaned = lab_verbs.add_parser(
        "clean", help="remove every lab tunnelbench recorded whose owner process is gone"
    )
    cleaned.add_argument(
        "--force", action="store_true", help="also remove labs that live runs are using"
    )
    cleaned.add_argument(
        "--hosts",
        metavar="FILE",
        help="instead: remove what killed remote runs left on the hosts of this hosts file",
    )
    cleaned.set_defaults(func=clean)
