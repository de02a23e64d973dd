"""Two ends of one tunnel that ran different software (Debian's old wireguard-go at one,
the pinned build at the other: 618 Mbit/s where the lab read 2,256) are named before the
results, in the terminal and in the report; ends that ran the same say nothing."""

import json
from pathlib import Path

from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import TrialConfig, TunnelSettings
from tunnelbench.model.records import Resolved, TrialRecord, TrialStatus
from tunnelbench.remote.software import Program
from tunnelbench.report import software

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# As this machine's two wireguard-go binaries describe themselves to a hosts run (their
# `--version` lines, the pinned build's .version file, Debian's package).
DEBIAN = Program(
    "/usr/bin/wireguard-go", "wireguard-go v0.0.20220316", package="wireguard-go 0.0.20220316-1+b4"
).describe("wireguard-go")
PINNED = Program(
    "/usr/local/bin/wireguard-go",
    "wireguard-go v0.0.20250522",
    pinned="v0.0.0-20260522210424-ecfc5a8d5446",
).describe("wireguard-go")


def trial(ends: dict[str, tuple[str, str]], kind: str = "wireguard") -> TrialRecord:
    remote = {
        "dut": "gw",
        "tunnel_mode": "build",
        "tunnel_ends": {r: {"implementation": i, "version": v} for r, (i, v) in ends.items()},
    }
    config = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind(kind)))
    return TrialRecord(
        1, 1, 1, 0, "k", config, Resolved.from_dict({"remote": remote}), TrialStatus.OK, None, {},
    )  # fmt: skip


def test_ends_with_different_versions_are_named_once_before_the_results():
    mixed = trial({"client": ("wireguard-go", DEBIAN), "gw": ("wireguard-go", PINNED)})
    lines = software.mismatched_ends([mixed, mixed])
    assert lines == [
        "the wireguard tunnel's ends ran different software (client wireguard-go v0.0.20220316,"
        " package wireguard-go 0.0.20220316-1+b4; gw wireguard-go v0.0.20250522, built from"
        " golang.zx2c4.com/wireguard@v0.0.0-20260522210424-ecfc5a8d5446):"
        " the slower end may bound every figure through it"
    ]


def test_the_kernels_at_one_end_and_a_daemon_at_the_other_differ_too():
    mixed = trial({"client": ("kernel", "linux 6.1.0-28-amd64"), "gw": ("wireguard-go", PINNED)})
    assert (
        "client kernel linux 6.1.0-28-amd64; gw wireguard-go"
        in software.mismatched_ends([mixed])[0]
    )


def test_ends_that_ran_the_same_or_no_tunnel_say_nothing():
    stored = json.loads((FIXTURES / "remote" / "resolved-remote.json").read_text())
    same = [trial({}, kind) for kind in stored]
    for record, data in zip(same, stored.values(), strict=True):
        record.resolved.remote = Resolved.from_dict({"remote": data}).remote
    assert software.mismatched_ends(same) == []
