"""``doctor`` says what to load or install for each missing capability: the hints come
from where the facts live (each tunnel kind's ``kernel_module`` and ``packages``, each
generator's ``packages``, and capabilities' one table of other kernel modules)."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests import cli_process
from tunnelbench.bench import capabilities
from tunnelbench.tunnels import REGISTRY as TUNNELS

SRC = Path(__file__).resolve().parents[2] / "src"
#: What this machine's kernel lacks (DESIGN.md), and the hint each must carry here.
MISSING_HERE = {
    ("tunnels", "gre"): "modprobe ip_gre",
    ("tunnels", "gretap"): "modprobe ip_gre",
    ("tunnels", "ipip"): "modprobe ipip",
    ("tunnels", "sit"): "modprobe sit",
    ("tunnels", "geneve"): "modprobe geneve",
    ("qdiscs", "fq_codel"): "modprobe sch_fq_codel",
    ("qdiscs", "cake"): "modprobe sch_cake",
    ("qdiscs", "fq"): "modprobe sch_fq",
}
KERNEL_SECTIONS = ("tunnels", "qdiscs", "esp")


def doctor(*args: str) -> str:
    done = cli_process.run(
        ["doctor", *args], env={**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "400"}, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(doctor("--json"))
    return data


def test_this_machine_s_missing_kernel_capabilities_carry_their_hint(
    report: dict[str, Any],
) -> None:
    loads = report["modules"]["modules"]["status"] != "no"
    labels = {"tunnels": "link", "qdiscs": "qdisc", "esp": "esp"}
    for (section, name), hint in MISSING_HERE.items():
        entry = report[section][name]
        if entry["status"] == "yes":  # a kernel that has it (a user's, CI's): no hint
            assert "hint" not in entry
            continue
        assert entry["status"] == "no", entry
        if loads:
            assert entry["hint"] == hint
        else:  # this VM's kernel: no module support, so one row names it instead
            assert "hint" not in entry
            assert f"{labels[section]} {name}" in report["modules"]["modules"]["missing"]


def test_a_kernel_without_module_support_gets_no_modprobe_hint(report: dict[str, Any]) -> None:
    if report["modules"]["modules"]["status"] != "no":
        pytest.skip("this kernel loads modules")
    assert "modprobe" not in doctor()
    assert doctor().count("cannot load modules") == 1


def test_every_missing_kernel_capability_has_a_hint(report: dict[str, Any]) -> None:
    if report["modules"]["modules"]["status"] == "no":
        pytest.skip("this kernel cannot load modules: no modprobe is hinted")
    for section in KERNEL_SECTIONS:
        for name, entry in report[section].items():
            if name == "in the kernel":  # esp's summary of the rows above it
                continue
            if entry["status"] == "no":
                assert str(entry["hint"]).startswith("modprobe "), (section, name)
            else:
                assert "hint" not in entry, (section, name)


def test_the_text_shows_the_same_hints(report: dict[str, Any]) -> None:
    labels = {"tunnels": "link", "qdiscs": "qdisc", "esp": "esp"}
    lines = doctor().splitlines()
    for section in KERNEL_SECTIONS:
        for name, entry in report[section].items():
            if "hint" in entry:
                (line,) = [ln for ln in lines if ln.startswith(f"{labels[section]} {name} ")]
                assert line.endswith(f"; to get it: {entry['hint']}")


def test_every_link_a_kind_creates_names_its_module() -> None:
    for kind in TUNNELS.kinds():
        tunnel = TUNNELS.get(kind)
        if (probe := tunnel.link_probe()) is not None:
            assert tunnel.kernel_module, kind
            assert capabilities.module_hint(probe[0]) == f"modprobe {tunnel.kernel_module}"


def test_the_module_table() -> None:
    assert capabilities.module_hint("gretap") == "modprobe ip_gre"
    assert capabilities.module_hint("wireguard") == "modprobe wireguard"
    assert capabilities.module_hint("netem") == "modprobe sch_netem"
    assert capabilities.module_hint("rfc4106(gcm(aes))") == "modprobe -a esp4 esp6 gcm"
    assert capabilities.module_hint("pfifo") is None  # built in
    for name in capabilities.LAB_LINKS:
        assert capabilities.module_hint(name) == f"modprobe {name}"


def test_every_program_probed_has_an_install_hint() -> None:
    for program in capabilities.program_names():
        assert capabilities.install_hint(program), program
    apt = "apt-get install --no-install-recommends "
    assert capabilities.install_hint("wg") == apt + "wireguard-tools"
    assert capabilities.install_hint("iperf3") == apt + "iperf3"
    assert capabilities.install_hint("iperf") == apt + "iperf"
    assert capabilities.install_hint("/usr/bin/wireguard-go") == apt + "wireguard-go"
    assert capabilities.install_hint("/usr/lib/ipsec/charon") == apt + "strongswan-charon"
    assert capabilities.install_hint("ethtool") == apt + "ethtool"
    assert capabilities.install_hint("boringtun-cli") == (
        "make setup (builds the pinned boringtun-cli into .tools/bin)"
    )
    assert capabilities.install_hint("no-such-program") is None
