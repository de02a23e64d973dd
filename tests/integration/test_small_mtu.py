"""Link MTUs below IPv6's minimum of 1280: the lab runs IPv4 only, and says so.

Every trial failed below 1280 before (the lab put IPv6 on every link), although the
documented range starts at 576.
"""

from pathlib import Path

from tests.integration.helpers import tunnelbench
from tunnelbench.bench.store import Store


def test_a_576_byte_wan_runs_ipv4_only_through_a_tunnel(tmp_path: Path):
    db = tmp_path / "r.db"
    done = tunnelbench(
        "run", "--quick", "-q", "--tunnels", "none,vxlan", "--streams", "1",
        "--wan-mtu", "576", "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store(db)
    trials = store.trials(store.run("latest").id)
    assert [t.status for t in trials] == ["ok", "ok"], [t.error for t in trials]
    for trial in trials:
        assert trial.resolved.to_dict()["lab_families"] == [4]
        assert trial.metrics["goodput_bps"] > 10e6
    vxlan = next(t for t in trials if t.config.tunnel.kind == "vxlan")
    assert vxlan.resolved.to_dict()["tunnel_mtu"] == 526  # 576 - 50
    assert vxlan.metrics["tunnel.client.tx_packets"] > 0


def test_ipv6_through_a_tunnel_below_1280_is_refused_before_anything_exists(tmp_path: Path):
    db = tmp_path / "r.db"
    done = tunnelbench(
        "run", "--quick", "--tunnels", "vxlan", "--wan-mtu", "1300", "--family", "6",
        "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "tunnelbench: error: traffic.family: IPv6 cannot cross this lab: IPv6 needs an MTU"
        " of at least 1280 on every link and in the tunnel (links 1300/1500, tunnel 1250)"
    )
    assert not db.exists()
