"""Capability probes: their commands, the parsing of what they print, cgroup detection
and from captured mount tables.

``commands.json`` holds real outputs captured on the development VM (kernel 6.18, no
fq_codel, no kernel WireGuard, no ESP): argv, exit code, stdout and stderr.
``mountinfo-hybrid-v1-cpu.txt`` is that VM's /proc/self/mountinfo (cgroup v1 cpu plus a
v2 mount without it); ``mountinfo-v2-only.txt`` was captured in a private mount namespace
on the same VM after mounting cgroup2 over /sys/fs/cgroup.
"""

import json

import pytest

from tests.conftest import FIXTURES
from tunnelbench.bench import capabilities as c
from tunnelbench.errors import LabError
from tunnelbench.system import probing
from tunnelbench.system.probing import CgroupCpu

CAPTURED = FIXTURES / "capabilities"
COMMANDS = json.loads((CAPTURED / "commands.json").read_text())
UNKNOWN_QDISC = "Specified qdisc kind is unknown"
UNKNOWN_LINK = "Unknown device type"


# --- probe commands ---


def test_link_probes_give_each_kind_what_it_requires():
    probes = c.link_probes()
    argv = {kind: probing.link_probe_argv(kind, args) for kind, args in probes.items()}
    assert argv["wireguard"] == ["ip", "link", "add", "tbprobe0", "type", "wireguard"]
    assert argv["vxlan"][-4:] == ["id", "1", "dstport", "4789"]
    for kind in ("gre", "gretap", "ipip"):
        assert argv[kind][4:] == [
            "type", kind, "remote", "198.18.0.2", "local", "198.18.0.1",
        ]  # fmt: skip
    assert argv["geneve"][4:] == ["type", "geneve", "id", "1", "remote", "198.18.0.2"]
    assert argv["veth"][4:] == ["type", "veth", "peer", "name", "tbprobe1"]
    # Every kernel link a registered kind creates is probed, and the lab's own.
    assert set(probes) == {
        "wireguard", "vxlan", "gre", "gretap", "ipip", "sit", "geneve", "bridge", "ifb", "veth",
        "tun",
    }  # fmt: skip


def test_captured_commands_are_the_probes_commands():
    # The captures were made with these very commands, behind `unshare --net --`.
    assert COMMANDS["link-wireguard-unknown"]["argv"][3:] == probing.link_probe_argv("wireguard")
    vxlan = c.link_probes()["vxlan"]
    assert COMMANDS["link-vxlan-created"]["argv"][3:] == probing.link_probe_argv("vxlan", vxlan)
    assert COMMANDS["qdisc-tbf-created"]["argv"][3:] == probing.qdisc_probe_argv("tbf")
    assert COMMANDS["qdisc-fq_codel-unknown"]["argv"][3:] == probing.qdisc_probe_argv("fq_codel")
    assert COMMANDS["esp-gcm-unknown"]["argv"][3:] == probing.esp_probe_argv("rfc4106(gcm(aes))")


def test_vxlan_without_a_port_succeeds_noisily_so_the_probe_names_one():
    noisy = COMMANDS["link-vxlan-no-dstport"]
    assert noisy["returncode"] == 0 and "destination port not specified" in noisy["stderr"]
    assert COMMANDS["link-vxlan-created"]["stderr"] == ""


def test_qdisc_probes_are_valid_minimal_commands():
    assert probing.qdisc_probe_argv("tbf") == [
        "tc", "qdisc", "add", "dev", "lo", "root", "tbf",
        "rate", "1mbit", "burst", "10kb", "limit", "10kb",
    ]  # fmt: skip
    assert probing.qdisc_probe_argv("fq_codel") == [
        "tc",
        "qdisc",
        "add",
        "dev",
        "lo",
        "root",
        "fq_codel",
    ]
    assert probing.qdisc_probe_argv("ingress") == ["tc", "qdisc", "add", "dev", "lo", "ingress"]
    assert probing.qdisc_probe_argv("htb")[-2:] == ["default", "1"]
    # What a tbf without its mandatory parameters gets: a usage error, not the kernel's word.
    assert COMMANDS["qdisc-tbf-missing-burst"]["returncode"] == 1


def test_esp_probes_use_correct_key_lengths():
    gcm = probing.esp_probe_argv("rfc4106(gcm(aes))")
    assert gcm[-4:-2] == ["aead", "rfc4106(gcm(aes))"] and len(gcm[-2]) == 2 + 2 * 20
    chacha = probing.esp_probe_argv("rfc7539esp(chacha20,poly1305)")
    assert len(chacha[-2]) == 2 + 2 * 36 and chacha[-1] == "128"
    cbc = probing.esp_probe_argv("cbc(aes)+hmac(sha256)")
    assert cbc[cbc.index("enc") : cbc.index("enc") + 2] == ["enc", "cbc(aes)"]
    assert "auth-trunc" in cbc


@pytest.mark.parametrize(
    ("capture", "reason"),
    [
        ("link-wireguard-unknown", UNKNOWN_LINK),
        ("qdisc-fq_codel-unknown", UNKNOWN_QDISC),
        ("esp-gcm-unknown", "Requested AEAD algorithm not found"),
        ("esp-cbc-no-esp", "Requested type not found"),
        ("nonroot-unshare-net", "unshare: unshare failed: Operation not permitted"),
        ("nonroot-userns-tun", "open: Permission denied"),
        ("qdisc-tbf-missing-burst", 'tbf: the "burst" parameter is mandatory.'),
    ],
)
def test_refusal_is_the_kernels_reason(capture, reason):
    assert probing.refusal(COMMANDS[capture]["stderr"]) == reason


# --- versions, CPU lists ---


def test_versions_from_captured_output():
    iperf3 = COMMANDS["iperf3-version"]
    assert probing.version_line(iperf3["stdout"], iperf3["stderr"]) == "iperf 3.12 (cJSON 1.7.15)"
    assert c.multithreaded("iperf 3.12 (cJSON 1.7.15)") is False
    iperf2 = COMMANDS["iperf2-version"]  # on stderr, exit 1
    line = probing.version_line(iperf2["stdout"], iperf2["stderr"])
    assert line == "iperf version 2.1.8 (12 August 2022) pthreads"
    assert probing.iperf2_version(line) == "2.1.8"
    wg = COMMANDS["wireguard-go-version"]
    assert probing.version_line(wg["stdout"], wg["stderr"]) == "wireguard-go v0.0.20250522"
    assert probing.version_line("", "") == "unknown version"


@pytest.mark.parametrize(
    ("line", "threaded"),
    [("iperf 3.16 (cJSON 1.7.15)", True), ("iperf 3.17.1", True), ("iperf 3.9", False),
     ("iperf version 2.1.8", None), ("", None)],
)  # fmt: skip
def test_multithreaded_from_3_16(line, threaded):
    assert c.multithreaded(line) is threaded


def test_cpu_lists_and_masks():
    assert probing.cpu_list("0-1\n") == (0, 1)
    assert probing.cpu_list("0-2,4,6-7") == (0, 1, 2, 4, 6, 7)
    assert probing.mask_cpus("3") == {0, 1}
    assert probing.mask_cpus("0x4") == {2}
    assert probing.mask_cpus("1,00000000") == {32}
    with pytest.raises(ValueError):
        probing.mask_cpus("zz")


# --- cgroup detection ---


def _files(**contents: str):
    return lambda path: contents.get(path)


def test_cgroup_v1_cpu_on_this_vm():
    mountinfo = (CAPTURED / "mountinfo-hybrid-v1-cpu.txt").read_text()
    files = {
        "/sys/fs/cgroup/unified/cgroup.controllers": (CAPTURED / "cgroup.controllers").read_text(),
        "/sys/fs/cgroup/unified/cgroup.subtree_control": "",
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
    }
    found = probing.cgroup_cpu(mountinfo, files.get)
    assert found == CgroupCpu(
        True, "cgroup v1 at /sys/fs/cgroup/cpu", version=1, path="/sys/fs/cgroup/cpu"
    )
    del files["/sys/fs/cgroup/cpu/cpu.cfs_quota_us"]
    assert probing.cgroup_cpu(mountinfo, files.get) == CgroupCpu(
        False,
        "cgroup v2 at /sys/fs/cgroup/unified has hugetlb; "
        "cgroup v1 cpu at /sys/fs/cgroup/cpu has no cpu.cfs_quota_us",
    )


def test_cgroup_v2_only():
    mountinfo = (CAPTURED / "mountinfo-v2-only.txt").read_text()
    captured = (CAPTURED / "cgroup.controllers").read_text()
    assert probing.cgroup_cpu(mountinfo, {"/sys/fs/cgroup/cgroup.controllers": captured}.get) == (
        CgroupCpu(False, "cgroup v2 at /sys/fs/cgroup has hugetlb")
    )
    # A v2 root with cpu available but not delegated is of no use without enabling it.
    listed = {"/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n"}
    assert probing.cgroup_cpu(mountinfo, listed.get).detail == (
        "cgroup v2 at /sys/fs/cgroup does not delegate cpu"
    )
    delegated = {**listed, "/sys/fs/cgroup/cgroup.subtree_control": "cpu memory pids\n"}
    assert probing.cgroup_cpu(mountinfo, delegated.get) == CgroupCpu(
        True, "cgroup v2 at /sys/fs/cgroup", version=2, path="/sys/fs/cgroup"
    )


def test_cgroup_none_and_escaped_mount_points():
    assert probing.cgroup_cpu("", _files()) == CgroupCpu(False, "no cgroup hierarchy is mounted")
    line = "32 31 0:29 / /sys/fs/my\\040cgroups rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    found = probing.cgroup_cpu(line, {"/sys/fs/my cgroups/cpu.cfs_quota_us": "-1"}.get)
    assert found.ok and found.path == "/sys/fs/my cgroups"


def test_a_probe_that_does_not_finish_is_unknown_not_refused(monkeypatch):
    """A TCG guest on a host with 14% steal took over 30 s to load the ESP modules; the
    probe's timeout ended the whole run. It is an unknown now: set-up meets the answer."""

    def hung(argv, **kwargs):
        raise LabError(f"`{' '.join(argv)}` did not finish within 30 s")

    monkeypatch.setattr(probing, "run", hung)
    monkeypatch.setattr(probing, "namespace", lambda: (("unshare", "--net", "--"), "as root"))
    found = probing.attempt(probing.esp_probe_argv("rfc4106(gcm(aes))"))
    assert found.ok is None
    assert found.detail.startswith("not probed: `unshare --net -- ip xfrm state add")
    assert found.detail.endswith("did not finish within 30 s")
