"""The tunnel MTU a plan may ask for is the most the kernel takes (issue 27, 5): a VXLAN
device bound to the WAN refuses an MTU above the WAN's minus its 50 bytes, and
`--tunnel-mtu 9000` over a 1500-byte WAN once failed at run time for it. The limit
tunnelbench refuses above comes from the wire model (bench.conflicts.largest_mtu); here
the kernel says the same. Each device lives in an anonymous network namespace that
vanishes with the command."""

import json
import subprocess

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.conflicts import largest_mtu
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import TunnelSettings
from tunnelbench.tunnels import REGISTRY
from tunnelbench.tunnels.vxlan import PORT, VNI


def _vxlan_in_a_throwaway_namespace(underlay: int, then: str) -> subprocess.CompletedProcess[str]:
    """A VXLAN device made as the lab makes it (bound to the WAN device) with the largest
    MTU there is, which the kernel lowers to its own limit; then ``then``."""
    script = (
        f"ip link add wan0 mtu {underlay} type veth peer name wan1"
        " && ip link add vx0 mtu 65535 type vxlan"
        f" id {VNI} local 198.18.0.1 remote 198.18.0.2 dstport {PORT} dev wan0"
        f" && {then}"
    )
    return subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True, text=True)


@pytest.mark.parametrize("underlay", [1500, 1550, 9000])
def test_the_kernels_vxlan_limit_is_the_models(underlay):
    most = largest_mtu(REGISTRY.get(TunnelKind.VXLAN), TunnelSettings(TunnelKind.VXLAN), underlay)
    shown = _vxlan_in_a_throwaway_namespace(underlay, "ip -j link show vx0")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)[0]["mtu"] == most == underlay - 50
    refused = _vxlan_in_a_throwaway_namespace(underlay, f"ip link set vx0 mtu {most + 1}")
    assert refused.returncode != 0 and "Invalid argument" in refused.stderr


def test_a_vxlan_mtu_above_the_limit_is_refused_before_anything_runs(tmp_path):
    done = tunnelbench(
        "run", "--tunnels", "vxlan", "--tunnel-mtu", "9000", "--db", "r.db", cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        "tunnelbench: error: --tunnel-mtu: 9000 does not fit --wan-mtu 1500: vxlan adds 50"
        " bytes, so at most 1450\n"
    )
    assert list(tmp_path.iterdir()) == []
