"""Preconditions that need a real system to check: privileges and installed programs."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import tb_namespaces
from tunnelbench.kinds import TunnelKind
from tunnelbench.system import probing
from tunnelbench.tunnels import REGISTRY as TUNNELS

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.mark.parametrize("verb", ["run", "tune"])
def test_not_root_is_one_clear_line(tmp_path, verb):
    tmp_path.chmod(0o777)
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-m", "tunnelbench", verb, "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"tunnelbench: error: tunnelbench {verb} needs root (it creates network namespaces);"
        " run it as root\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_missing_generator_is_named_before_anything_is_created(tmp_path):
    # A PATH with every program tunnelbench needs except iperf3.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("ip", "tc", "sysctl", "ping", "wg"):
        (bin_dir / program).symlink_to(shutil.which(program))
    before = tb_namespaces()
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "run", "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PATH": str(bin_dir)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "tunnelbench: error: required program 'iperf3' (the load generator) was not found;"
        " run `make run`\n"
    )
    assert not (tmp_path / "r.db").exists()
    assert tb_namespaces() == before


def test_missing_userspace_wireguard_is_named(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "run", "--wireguard-impl", "wireguard-go",
         "--db", str(tmp_path / "r.db"), "--runs", "1", "--duration", "1", "--streams", "1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "TUNNELBENCH_TOOLS_DIR": str(tmp_path), "PATH": SYSTEM_PATH},
    )  # fmt: skip
    # Debian's /usr/bin/wireguard-go (on that PATH) is another build: it does not stand in
    # for the pinned one (it runs as tunnel.implementation = "wireguard-go-debian").
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "tunnelbench: error: required program 'wireguard-go' (the pinned wireguard-go, built"
        f" into .tools/bin by `make setup`) was not found in {tmp_path}; run `make run`\n"
    )
    assert not (tmp_path / "r.db").exists()


def test_kernel_wireguard_on_a_kernel_without_it_is_refused(tmp_path):
    from tunnelbench.system import probing

    refusal = probing.kernel_link_type("wireguard")
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "run", "--wireguard-impl", "kernel",
         "--db", str(tmp_path / "r.db"), "--runs", "1", "--duration", "1", "--streams", "1",
         "--tunnels", "wireguard", "-q"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    if refusal is None:
        assert done.returncode == 0, done.stderr  # this kernel has WireGuard: it must run
        return
    print(f"this kernel has no WireGuard ({refusal}): checking the refusal instead")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "tunnelbench: error: tunnel.implementation: this kernel cannot create a wireguard link"
    )
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("verb", ["run", "lab"])
@pytest.mark.parametrize("kind", ["gre", "gretap", "ipip", "geneve"])
def test_a_kernel_tunnel_this_kernel_lacks_is_refused_before_anything_is_created(
    kind, verb, tmp_path
):
    probe = TUNNELS.get(TunnelKind(kind)).link_probe()
    assert probe is not None
    refusal = probing.kernel_link_type(*probe)
    if refusal is None:
        pytest.skip(f"this kernel has {kind} links: test_lab runs them")
    before = tb_namespaces()
    args = (
        ["run", "--tunnels", kind, "--db", str(tmp_path / "r.db"), "--runs", "1"]
        if verb == "run"
        else ["lab", "up", "--tunnel", kind]
    )
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench", *args],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"tunnelbench: error: tunnel.kind: {kind} links cannot be created here ({refusal})\n"
    )
    assert list(tmp_path.iterdir()) == []
    assert tb_namespaces() == before


def test_ipv6_traffic_through_ipip_is_refused_on_any_kernel(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "run", "--tunnels", "none,ipip", "--family", "6",
         "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("tunnelbench: error: --family: ipip carries IPv4 only, not IPv6;")
    assert list(tmp_path.iterdir()) == []
