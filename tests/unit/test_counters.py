from tests.conftest import FIXTURES
from tunnelbench.probes import counters


def test_parse_real_ip_link_stats():
    stats = counters.parse_link_stats((FIXTURES / "proc" / "ip-link-stats.json").read_text())
    assert stats["rx_bytes"] == 3193
    assert stats["tx_packets"] == 29
    assert stats["rx_dropped"] == 0
    assert set(stats) == {f"{d}_{f}" for d in ("rx", "tx") for f in counters.FIELDS}


def test_delta():
    assert counters.delta({"rx_bytes": 10}, {"rx_bytes": 25}) == {"rx_bytes": 15}
