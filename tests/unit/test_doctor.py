"""The doctor's report: collected from probe results, rendered as an aligned table."""

import json

import pytest

from tests.conftest import FIXTURES
from tunnelbench.bench.doctor_report import Report
from tunnelbench.cli import doctor
from tunnelbench.system import programs
from tunnelbench.system.probing import Capabilities, CgroupCpu, Check, Congestion, Program
from tunnelbench.tunnels import strongswan

DENIED = "cannot create a network namespace: unshare: unshare failed: Operation not permitted"
UNKNOWN_LINK = "Unknown device type"
OPENVPN = (
    "OpenVPN 2.6.14 x86_64-pc-linux-gnu [SSL (OpenSSL)] [LZO] [LZ4] [EPOLL] [PKCS11] "
    "[MH/PKTINFO] [AEAD] [DCO]"
)


def _program(name: str, version: str, path: str, pinned: str = "") -> Program:
    return Program(True, f"{version} ({path})", path=path, version=version, pinned=pinned)


#: A kernel with module support (this VM's has none: see test_without_module_support).
LOADS = Check(True, "loads modules")
PIN = "v0.0.0-20260522210424-ecfc5a8d5446"


# What this VM's probes found (abridged), as root.
VM = Capabilities(
    kernel="6.18.44-fc-v669",
    euid=0,
    netns=Check(True, "as root"),
    links={"wireguard": Check(False, UNKNOWN_LINK), "vxlan": Check(True)},
    qdiscs={
        "fq_codel": Check(False, "Specified qdisc kind is unknown"),
        "tbf": Check(True),
    },
    esp={"rfc4106(gcm(aes))": Check(False, "Requested AEAD algorithm not found")},
    congestion=Congestion(True, "reno bbr cubic", ("reno", "bbr", "cubic"), (), "bbr"),
    cgroup=CgroupCpu(True, "cgroup v1 at /sys/fs/cgroup/cpu", version=1, path="/sys/fs/cgroup/cpu"),
    programs={
        "iperf3": _program("iperf3", "iperf 3.12 (cJSON 1.7.15)", "/usr/bin/iperf3"),
        "iperf": _program(
            "iperf", "iperf version 2.1.8 (12 August 2022) pthreads", "/usr/bin/iperf"
        ),
        "wireguard-go": _program(
            "wireguard-go", "wireguard-go v0.0.20250522", "/t/wireguard-go", pinned=PIN
        ),
        "/usr/bin/wireguard-go": _program(
            "wireguard-go", "wireguard-go v0.0.20220316", "/usr/bin/wireguard-go"
        ),
        "boringtun-cli": Program(False, "boringtun-cli is not installed"),
        "ethtool": Program(False, "ethtool is not installed"),
        "openvpn": _program("openvpn", OPENVPN, "/usr/sbin/openvpn"),
        "/usr/lib/ipsec/charon": _program(
            "charon", "Linux strongSwan 5.9.8", "/usr/lib/ipsec/charon"
        ),
    },
    cpus=(0, 1),
    openvpn_dco=Check(False, "no ovpn-dco-v2 netlink family in this kernel"),
    pppoe=Check(
        False, "no PPPoE in this kernel (a PPPoE socket: Address family not supported by protocol)"
    ),
    packages={"wireguard-go": "0.0.20220316-1+b4"},
)


@pytest.fixture(autouse=True)
def strongswan_installed(monkeypatch):
    """swanctl and strongSwan's plugins as this VM has them, whatever runs the tests."""
    monkeypatch.setattr(strongswan, "missing_plugins", lambda implementation: [])
    monkeypatch.setattr(programs, "find", lambda name: f"/usr/sbin/{name}")


def test_collect_is_json_with_every_section():
    report = doctor.collect(VM, LOADS).to_json()
    assert json.loads(json.dumps(report)) == report
    assert list(report) == ["kernel", *doctor.SECTIONS]
    assert report["kernel"] == "6.18.44-fc-v669"
    assert report["qdiscs"]["fq_codel"] == {
        "status": "no",
        "detail": "Specified qdisc kind is unknown",
        "hint": "modprobe sch_fq_codel",
    }
    assert report["tunnels"]["wireguard"]["detail"] == (
        "Unknown device type; auto uses wireguard-go"
    )
    assert report["congestion"]["bbr"] == {"status": "yes", "detail": "default"}
    assert report["congestion"]["cubic"] == {"status": "yes", "detail": ""}
    assert report["cgroup"]["cpu"] == {
        "status": "yes",
        "detail": "cgroup v1 at /sys/fs/cgroup/cpu",
        "version": 1,
        "path": "/sys/fs/cgroup/cpu",
    }
    iperf3 = report["generators"]["iperf3"]
    assert (iperf3["multithreaded"], iperf3["version"]) == (False, "iperf 3.12 (cJSON 1.7.15)")
    iperf2 = report["generators"]["iperf"]
    assert (iperf2["release"], iperf2["generator"], iperf2["multithreaded"]) == (
        "2.1.8",
        "iperf2",
        True,
    )
    assert report["implementations"]["ethtool"]["status"] == "no"
    assert report["implementations"]["strongswan"]["version"] == "Linux strongSwan 5.9.8"
    assert report["implementations"]["libipsec"]["status"] == "yes"
    assert report["esp"]["in the kernel"] == {
        "status": "no",
        "detail": "ipsec and tunnel.protection use: aes-256-gcm: libipsec, "
        "chacha20-poly1305: kernel (unknown here)",
    }
    # Every WireGuard implementation, found or not, with the version a run records.
    assert list(report["wireguard"]) == [
        "kernel",
        "wireguard-go",
        "wireguard-go-debian",
        "boringtun",
    ]
    assert report["wireguard"]["wireguard-go"]["pinned"] == PIN
    assert report["wireguard"]["wireguard-go-debian"] == {
        "status": "yes",
        "detail": "wireguard-go v0.0.20220316, Debian package wireguard-go 0.0.20220316-1+b4"
        " (/usr/bin/wireguard-go)",
        "path": "/usr/bin/wireguard-go",
        "version": "wireguard-go v0.0.20220316",
        "pinned": None,
        "package": "wireguard-go 0.0.20220316-1+b4",
    }
    assert report["wireguard"]["boringtun"]["status"] == "no"
    assert report["cpus"]["online"]["count"] == 2


def test_render_is_an_aligned_table():
    text = doctor.render(doctor.collect(VM, LOADS))
    lines = text.splitlines()
    assert lines[:4] == [
        "kernel 6.18.44-fc-v669",
        "",
        "capability                   status  detail",
        "---------------------------  ------  ------",
    ]
    assert lines[4:9] == [
        "privilege root               yes     euid 0",
        "privilege network namespace  yes     as root",
        "kernel modules               yes     loads modules",
        "link wireguard               no      Unknown device type; auto uses wireguard-go; to get"
        " it: modprobe wireguard",
        "link vxlan                   yes",
    ]
    assert (
        "qdisc fq_codel               no      Specified qdisc kind is unknown; to get it:"
        " modprobe sch_fq_codel"
    ) in lines
    assert (
        "esp rfc4106(gcm(aes))        no      Requested AEAD algorithm not found; to get it:"
        " modprobe -a esp4 esp6 gcm"
    ) in lines
    assert "tcp cc bbr                   yes     default" in lines
    assert "cgroup cpu                   yes     cgroup v1 at /sys/fs/cgroup/cpu" in lines
    assert (
        "generator iperf3             yes     iperf 3.12 (cJSON 1.7.15) (/usr/bin/iperf3); "
        "single-threaded (threads from 3.16): runs one process per stream"
    ) in lines
    assert (
        "generator iperf              yes     iperf version 2.1.8 (12 August 2022) pthreads"
        " (/usr/bin/iperf); traffic.generator = iperf2: multi-threaded, all streams in one"
        " process"
    ) in lines
    assert (
        "userspace ethtool            no      ethtool is not installed; for offloads on real"
        " hosts (the namespace lab sets them itself); to get it: apt-get install"
        " --no-install-recommends ethtool"
    ) in lines
    assert (
        "userspace openvpn            yes     OpenVPN 2.6.14 (/usr/sbin/openvpn); DCO no, runs in "
        "userspace: no ovpn-dco-v2 netlink family in this kernel"
    ) in lines
    assert (
        "userspace strongswan         yes     Linux strongSwan 5.9.8 (/usr/lib/ipsec/charon); "
        "swanctl at /usr/sbin/swanctl"
    ) in lines
    assert (
        "userspace libipsec           yes     kernel-libipsec: userspace ESP over a TUN device "
        "(tunnel mode, ESP in UDP, packets up to 1400 bytes)"
    ) in lines
    # Each WireGuard implementation, found or not, with the version a run records.
    assert [line for line in lines if line.startswith("wg ")] == [
        "wg kernel                    no      Unknown device type; to get it: modprobe wireguard",
        "wg wireguard-go              yes     wireguard-go v0.0.20250522, built from "
        f"golang.zx2c4.com/wireguard@{PIN} (/t/wireguard-go)",
        "wg wireguard-go-debian       yes     wireguard-go v0.0.20220316, Debian package "
        "wireguard-go 0.0.20220316-1+b4 (/usr/bin/wireguard-go)",
        "wg boringtun                 no      boringtun-cli is not installed: boringtun, built "
        "into .tools/bin by `make setup`; to get it: make setup (builds the pinned boringtun-cli"
        " into .tools/bin)",
    ]
    assert lines[-1] == "cpus online                  yes     2 (0-1)"
    assert "not probed" not in text


def test_not_probed_is_said_with_its_reason():
    blind = Capabilities(
        kernel="6.1.0",
        euid=65534,
        netns=Check(False, DENIED),
        links={"vxlan": Check(None, DENIED)},
        qdiscs={"tbf": Check(None, DENIED)},
        esp={},
        congestion=Congestion(None, "cannot read tcp_available_congestion_control"),
        cgroup=CgroupCpu(False, "no cgroup hierarchy is mounted"),
        programs={name: Program(False, f"{name} is not installed") for name in VM.programs},
    )
    collected = doctor.collect(blind, LOADS)
    report = collected.to_json()
    assert report["privileges"]["root"]["detail"] == "euid 65534; a run needs root"
    assert report["tunnels"]["vxlan"] == {"status": "not probed", "detail": DENIED}
    assert report["congestion"] == {
        "available": {
            "status": "not probed",
            "detail": "cannot read tcp_available_congestion_control",
        }
    }
    assert report["generators"]["iperf3"]["multithreaded"] is None
    lines = doctor.render(collected).splitlines()
    assert f"privilege network namespace  no          {DENIED}" in lines
    assert f"link vxlan                   not probed  {DENIED}" in lines
    assert lines[-2:] == doctor.NOT_PROBED_NOTE.splitlines()
    assert "cpus online                  no          0 ()" in lines


@pytest.mark.parametrize("width", [80, 100])
def test_the_details_wrap_under_their_column_to_the_terminals_width(width):
    report = doctor.collect(VM, LOADS)
    whole = doctor.render(report).splitlines()
    lines = doctor.render(report, width).splitlines()
    column = whole[2].index("detail")
    for line in lines:
        # Longer only where one word (a path, a module) is longer than the room.
        assert len(line) <= width or " " not in line[column:], line
    # Each row's detail, its wrapped lines joined, is the detail of the unwrapped table.
    rows: list[str] = []
    for line in lines[2:]:
        if line[:column].strip():
            rows.append(line.rstrip())
        else:
            rows[-1] += " " + line[column:]
    assert rows == [line for line in whole[2:] if line]


def test_module_loading_is_read_from_proc(tmp_path):
    assert doctor.module_loading(tmp_path) == Check(
        False, "built without module support (no /proc/modules)"
    )
    (tmp_path / "modules").write_text("")
    assert doctor.module_loading(tmp_path).ok is True
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "modules_disabled").write_text("1\n")
    assert doctor.module_loading(tmp_path) == Check(
        False, "module loading disabled until the next boot (kernel.modules_disabled = 1)"
    )


def test_without_module_support_one_row_names_what_is_missing_and_no_modprobe(tmp_path):
    # This VM's kernel: no /proc/modules. A hint per row would be 15 commands that fail.
    collected = doctor.collect(VM, doctor.module_loading(tmp_path))
    text = doctor.render(collected)
    assert "modprobe" not in text
    report = collected.to_json()
    hints = [e.get("hint", "") for section in doctor.SECTIONS for e in report[section].values()]
    assert not [hint for hint in hints if hint.startswith("modprobe")]
    row = report["modules"]["modules"]
    assert row["status"] == "no"
    assert row["missing"] == [
        "link wireguard", "wg kernel", "qdisc fq_codel", "esp rfc4106(gcm(aes))", "wan pppoe"
    ]  # fmt: skip
    assert row["detail"] == (
        "this kernel cannot load modules: built without module support (no /proc/modules);"
        " missing for want of a module: link wireguard; wg kernel; qdisc fq_codel; esp"
        " rfc4106(gcm(aes)); wan pppoe; use a kernel that has them built in, or a lab on a"
        " Debian kernel in a VM (--kernel debian)"
    )
    # What a package gives is still hinted: installing works without modules.
    assert report["wireguard"]["boringtun"]["hint"].startswith("make setup")


def test_a_reports_json_reads_back_as_the_report_it_was():
    """``doctor --json`` as this machine printed it (a 6.18 VM without module support,
    2026-11-28), and the JSON a guest sends its host: read as rows and written again,
    byte for byte; the table is rendered from the rows."""
    text = (FIXTURES / "doctor" / "vm-6.18-no-modules.json").read_text()
    report = Report.from_json(json.loads(text))
    assert json.dumps(report.to_json(), indent=2) + "\n" == text
    row = report.sections["modules"]["modules"]
    missing = row.facts["missing"]
    assert row.status == "no" and row.hint is None
    assert isinstance(missing, list) and "wan pppoe" in missing
    assert report.sections["wireguard"]["wireguard-go"].facts["pinned"]
    assert doctor.render(report).startswith("kernel 6.18.44-fc-v595\n")
