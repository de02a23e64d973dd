"""The software a run used, as every report names it: each tunnel implementation with
its version, then the traffic generators and the tools.

The run's environment lists what this machine resolved when the run started. What ran
elsewhere is only in the trials' records: a VM guest resolves its tunnels on its own
kernel, a remote run's tunnel is built (or found) on the hosts, and ESP around another
tunnel is set up per trial. So the trials' ``tunnel_version`` and ``esp_version`` are
added, each (name, version) once: an implementation that ran in two versions (Debian's
wireguard-go and a pinned build, a guest's kernel and the host's) is named twice.
"""

import re
from collections.abc import Sequence

from tunnelbench.kinds import TunnelKind
from tunnelbench.model.records import RunRecord, TrialRecord

_PATH = re.compile(r" \(/[^()]*\)$")


def entries(run: RunRecord, trials: Sequence[TrialRecord]) -> list[tuple[str, str]]:
    """``(name, version)``: tunnel implementations (``kind/implementation``, and
    ``esp/<implementation>`` for ESP protecting another tunnel) first, then the
    generators, iproute2 and tunnelbench. The baseline's "none/kernel" is no
    implementation and is left out."""
    env = run.environment
    recorded = [(str(k), str(v)) for k, v in (env.versions or {}).items()]
    tunnels = [(k, v) for k, v in recorded if "/" in k and not k.startswith("none/")]
    for trial in trials:
        resolved, kind = trial.resolved, trial.config.tunnel.kind
        if kind is TunnelKind.NONE:
            continue
        if resolved.setup.implementation and resolved.setup.version:
            tunnels.append((f"{kind}/{resolved.setup.implementation}", resolved.setup.version))
        if kind is not TunnelKind.IPSEC and resolved.esp.implementation and resolved.esp.version:
            tunnels.append((f"esp/{resolved.esp.implementation}", resolved.esp.version))
    out = list(dict.fromkeys(tunnels))
    out += [(k, v) for k, v in recorded if "/" not in k]
    for key, version in (("iproute2", env.iproute2), ("tunnelbench", env.tunnelbench)):
        if version:
            out.append((key, version))
    return out


def line(run: RunRecord, trials: Sequence[TrialRecord]) -> str:
    """``name: version; ...`` of :func:`entries` (Markdown's and the header's line)."""
    return "; ".join(f"{name}: {version}" for name, version in entries(run, trials))


def tunnel_line(run: RunRecord, trials: Sequence[TrialRecord]) -> str:
    """The tunnel implementations alone, by the names the results table gives them and
    without their paths (the terminal's line); empty for a run without a tunnel."""
    tunnels = [(n.split("/", 1)[1], _PATH.sub("", v)) for n, v in entries(run, trials) if "/" in n]
    return "; ".join(f"{name}: {version}" for name, version in dict.fromkeys(tunnels))


def mismatched_ends(trials: Sequence[TrialRecord]) -> list[str]:
    """One line per tunnel whose two ends ran different implementations or versions (a
    run on real hosts: Debian's old wireguard-go at one end and a pinned build at the
    other read 618 Mbit/s where the lab read 2,256): the slower end may bound every
    figure of that tunnel, so the reports say it before the results."""
    lines = []
    for trial in trials:
        remote = trial.resolved.remote
        if remote is None or len(remote.tunnel_ends) < 2:
            continue
        ends = {role: (end.implementation, _PATH.sub("", end.version)) for role, end in
                remote.tunnel_ends.items()}  # fmt: skip
        if len(set(ends.values())) < 2:
            continue
        kind = trial.config.tunnel.kind
        said = "; ".join(
            f"{role} {version}" if version.startswith(implementation) else
            f"{role} {implementation} {version}"
            for role, (implementation, version) in ends.items()
        )  # fmt: skip
        lines.append(
            f"the {kind} tunnel's ends ran different software ({said}): the slower end may"
            " bound every figure through it"
        )
    return list(dict.fromkeys(lines))
