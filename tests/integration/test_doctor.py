"""`tunnelbench doctor` on this machine: real probes, checked against the kernel directly.

Statuses that differ between kernels (this VM lacks fq_codel, kernel WireGuard, GRE and
ESP; CI's and users' kernels may have them) are compared with an independent attempt
written here, so the test holds on either; what every supported kernel has is asserted.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tunnelbench.lab import state as lab_state
from tunnelbench.model.plan import ROLES

REPO = Path(__file__).parents[2]
DOCTOR = "from tunnelbench.cli import doctor; raise SystemExit(doctor.main({}))"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# Written independently of capabilities.py: each succeeds exactly when the kernel has it.
LINKS = {
    "wireguard": ["type", "wireguard"],
    "vxlan": ["type", "vxlan", "id", "7", "dstport", "4789"],
    "gre": ["type", "gre", "local", "198.18.9.1", "remote", "198.18.9.2"],
    "gretap": ["type", "gretap", "local", "198.18.9.1", "remote", "198.18.9.2"],
    "ipip": ["type", "ipip", "local", "198.18.9.1", "remote", "198.18.9.2"],
    "geneve": ["type", "geneve", "id", "7", "remote", "198.18.9.2"],
}
QDISCS = {
    "fq_codel": ["fq_codel", "limit", "1000"],
    "cake": ["cake", "bandwidth", "100mbit"],
    "fq": ["fq"],
    "netem": ["netem", "loss", "1%"],
}
GCM_KEY = "0x" + "ab" * 20  # AES-128 key and 4-byte salt


def _kernel_accepts(*argv: str) -> bool:
    done = subprocess.run(["unshare", "--net", "--", *argv], capture_output=True, timeout=30)
    return done.returncode == 0


def _doctor(*, as_json: bool, prefix: Sequence[str] = (), python: str = sys.executable, **env: str):
    return subprocess.run(
        [*prefix, python, "-c", DOCTOR.format(as_json)],
        capture_output=True, text=True, timeout=120, cwd="/",
        # Wide enough that no line wraps: the wrapping is the unit tests' (test_doctor).
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "400", **env},
    )  # fmt: skip


def _probe_processes() -> set[int]:
    """Processes that look like a probe: an unshare, or a command on the probe device."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and (argv[0].endswith(b"unshare") or b"tbprobe0" in argv):
            found.add(int(entry.name))
    return found


def _foreign_lab(name: str) -> bool:
    """A namespace another test's lab made while this one ran: tb-<lab>-<role>."""
    return name.startswith("tb-") and name.rsplit("-", 1)[-1] in ROLES


@pytest.fixture(scope="module")
def root_report() -> dict[str, Any]:
    done = _doctor(as_json=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_probes_leave_nothing_behind():
    namespaces, probes = set(lab_state.list_namespaces()), _probe_processes()
    done = _doctor(as_json=False)
    assert done.returncode == 0, done.stderr
    assert "qdisc tbf " in done.stdout
    new = set(lab_state.list_namespaces()) - namespaces
    assert all(_foreign_lab(name) for name in new), f"namespaces left behind: {new}"
    assert _probe_processes() - probes == set()


def test_what_every_supported_kernel_has(root_report):
    assert root_report["privileges"]["root"]["status"] == "yes"
    assert root_report["privileges"]["network namespace"] == {"status": "yes", "detail": "as root"}
    for qdisc in ("pfifo", "pfifo_fast", "tbf", "htb", "ingress"):
        assert root_report["qdiscs"][qdisc] == {"status": "yes", "detail": ""}, qdisc
    for link in ("vxlan", "veth", "bridge"):
        assert root_report["tunnels"][link]["status"] == "yes", link


@pytest.mark.parametrize("kind", sorted(LINKS))
def test_link_kinds_agree_with_the_kernel(root_report, kind):
    found = root_report["tunnels"][kind]
    expected = _kernel_accepts("ip", "link", "add", "tbtest0", *LINKS[kind])
    assert found["status"] == ("yes" if expected else "no"), found
    if not expected:
        assert found["detail"].startswith("Unknown device type"), found


@pytest.mark.parametrize("qdisc", sorted(QDISCS))
def test_qdiscs_agree_with_the_kernel(root_report, qdisc):
    expected = _kernel_accepts("tc", "qdisc", "add", "dev", "lo", "root", *QDISCS[qdisc])
    found = root_report["qdiscs"][qdisc]
    assert found["status"] == ("yes" if expected else "no"), found
    print(f"{qdisc}: {found}")


def test_kernel_wireguard_agrees_with_what_the_runner_uses(root_report):
    from tunnelbench.system import probing

    refusal = probing.kernel_link_type("wireguard")
    found = root_report["tunnels"]["wireguard"]
    assert (found["status"] == "yes") == (refusal is None)
    if refusal is not None:
        assert found["detail"].startswith(refusal)


def test_esp_aead_agrees_with_the_kernel(root_report):
    gcm = _kernel_accepts(
        "ip", "xfrm", "state", "add", "src", "198.18.9.1", "dst", "198.18.9.2",
        "proto", "esp", "spi", "0x2001", "mode", "tunnel",
        "aead", "rfc4106(gcm(aes))", GCM_KEY, "128",
    )  # fmt: skip
    assert root_report["esp"]["rfc4106(gcm(aes))"]["status"] == ("yes" if gcm else "no")
    # ipsec uses the kernel's ESP for AES-GCM exactly when the kernel has it.
    uses = "aes-256-gcm: kernel" if gcm else "aes-256-gcm: libipsec"
    assert uses in root_report["esp"]["in the kernel"]["detail"]


def test_strongswan_is_found_with_its_version(root_report):
    charon = Path("/usr/lib/ipsec/charon")
    found = root_report["implementations"]["strongswan"]
    assert found["status"] == ("yes" if charon.exists() else "no"), found
    if charon.exists():
        version = subprocess.run([charon, "--version"], capture_output=True, text=True).stdout
        assert found["version"] == version.strip()
        plugin = Path("/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so")
        assert root_report["implementations"]["libipsec"]["status"] == (
            "yes" if plugin.exists() else "no"
        )


def test_congestion_controls_are_the_kernels(root_report):
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    listed = [name for name, e in root_report["congestion"].items() if "module" not in e["detail"]]
    assert listed == available
    assert root_report["congestion"]["cubic"]["status"] == "yes"


def test_cgroup_cpu_controller(root_report):
    found = root_report["cgroup"]["cpu"]
    v2_root = Path("/sys/fs/cgroup/cgroup.subtree_control")
    if v2_root.exists() and "cpu" in v2_root.read_text().split():
        assert (found["status"], found["version"]) == ("yes", 2)
    elif Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists():  # this VM
        assert found == {
            "status": "yes",
            "detail": "cgroup v1 at /sys/fs/cgroup/cpu",
            "version": 1,
            "path": "/sys/fs/cgroup/cpu",
        }
    else:
        assert found["status"] == "no"


def test_generators_and_cpus(root_report):
    line = subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout
    major, minor = map(int, re.match(r"iperf (\d+)\.(\d+)", line).groups())  # type: ignore[union-attr]
    iperf3 = root_report["generators"]["iperf3"]
    assert iperf3["version"] == line.splitlines()[0]
    assert iperf3["multithreaded"] is ((major, minor) >= (3, 16))
    if (major, minor) == (3, 12):  # Debian 12
        assert "single-threaded" in iperf3["detail"]
    iperf2 = root_report["generators"]["iperf"]
    assert iperf2["status"] == ("yes" if shutil.which("iperf") else "no")
    assert root_report["cpus"]["online"]["count"] == os.cpu_count()


def _python_for_nobody() -> str:
    """An interpreter uid 65534 may run (the venv's may live under root's home)."""
    for python in (sys.executable, "/usr/bin/python3"):
        check = "import sys; assert sys.version_info >= (3, 11)"
        if subprocess.run([*NOBODY, python, "-c", check], capture_output=True).returncode == 0:
            return python
    pytest.skip("no Python 3.11 that uid 65534 may run")


def test_not_root_still_reports(root_report):
    python = _python_for_nobody()
    tools = str(REPO / ".tools" / "bin")
    done = _doctor(as_json=True, prefix=NOBODY, python=python, TUNNELBENCH_TOOLS_DIR=tools)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["privileges"]["root"] == {
        "status": "no",
        "detail": "euid 65534; a run needs root",
    }
    netns = report["privileges"]["network namespace"]
    probed = {
        f"{section} {name}": entry["status"]
        for section in ("tunnels", "qdiscs", "esp")
        for name, entry in report[section].items()
    }
    if netns["status"] == "yes":
        assert netns["detail"] == "in an unprivileged user namespace"
        as_root = {
            f"{section} {name}": entry["status"]
            for section in ("tunnels", "qdiscs", "esp")
            for name, entry in root_report[section].items()
        }
        # Without root a probe can be refused for lack of permission, never differ otherwise.
        differ = {k for k in probed if probed[k] != as_root[k] and probed[k] != "not probed"}
        assert differ == set()
    else:
        assert netns["detail"].startswith("cannot create a network namespace: ")
        assert set(probed.values()) == {"not probed"}
    table = _doctor(as_json=False, prefix=NOBODY, python=python, TUNNELBENCH_TOOLS_DIR=tools)
    assert table.returncode == 0, table.stderr
    assert re.search(r"^privilege root +no +euid 65534; a run needs root$", table.stdout, re.M)
    if "not probed" in probed.values():
        assert table.stdout.rstrip().endswith("a run that uses it reports the real error.")
