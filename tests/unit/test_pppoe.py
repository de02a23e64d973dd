"""PPPoE on the WAN, without a kernel that has it: pppd's command line, the kernel's
session list, the ceiling's 8 bytes, and the plan and skip rules. The session itself
runs in the kernel suite (tests/kernel)."""

import pytest

from tunnelbench.analysis.ceiling import ceiling, for_config
from tunnelbench.bench import planfile, skips
from tunnelbench.bench.capabilities import probe
from tunnelbench.kinds import WanEncapsulation
from tunnelbench.lab import pppoe
from tunnelbench.model.encapsulation import Encapsulation
from tunnelbench.model.kindfacts import TunnelFacts, Wire
from tunnelbench.model.plan import LabSettings, LinkSettings, TrialConfig
from tunnelbench.model.records import Resolved
from tunnelbench.system.probing import Check

PPPOE = LinkSettings(rate=20_000_000, encapsulation=WanEncapsulation.PPPOE)


def test_pppd_attaches_to_the_session_on_the_veth_without_compression_or_auth():
    argv = pppoe.pppd_argv(
        "tbab-gw", "aa:bb:cc:dd:ee:ff", "198.18.0.1", "198.18.0.2", 1492, "tbab-ppp0"
    )
    assert argv[:7] == [
        "pppd", "plugin", "pppoe.so", "nic-tbab-gw", "rp_pppoe_sess", "1:aa:bb:cc:dd:ee:ff",
        "198.18.0.1:198.18.0.2",
    ]  # fmt: skip
    words = set(argv)
    assert {"noauth", "nodetach", "nodefaultroute", "noipv6", "noccp", "novj"} <= words
    assert {"nobsdcomp", "nodeflate", "novjccomp", "noaccomp", "nopcomp"} <= words
    assert argv[argv.index("mtu") + 1] == argv[argv.index("mru") + 1] == "1492"
    assert argv[argv.index("ifname") + 1] == "tbab-ppp0"
    # Debian's hooks would set DNS from the peer: replaced.
    assert argv[argv.index("ip-up-script") + 1] == "/bin/true"


def test_the_kernels_session_list_is_read_in_network_byte_order():
    # As Debian's 6.1 printed session 1 on a little-endian guest.
    text = "Id       Address              Device\n00000100 26:96:FE:49:38:5C  veth-gw\n"
    assert pppoe.parse_sessions(text) == [(1, "26:96:fe:49:38:5c", "veth-gw")]
    assert pppoe.parse_sessions("Id       Address              Device\n") == []


def test_the_ceiling_counts_pppoes_8_bytes_and_its_smaller_mtu():
    plain = ceiling(20_000_000, link_mtu=1500, encapsulation="none")
    over = ceiling(20_000_000, link_mtu=1492, encapsulation="none", link_header=8)
    assert (plain.tcp_payload, plain.counted_bytes_per_packet) == (1448, 1514)
    assert (over.tcp_payload, over.counted_bytes_per_packet) == (1440, 1514)
    assert "counted 1514 B (shaper: L3 + 8 PPPoE + 14)" in over.explain()
    # From a trial's configuration: the WAN's IP MTU is its MTU less PPPoE's header.
    config = TrialConfig(lab=LabSettings(wan=PPPOE))
    assert config.lab.wan.ip_mtu == 1492
    wire = Wire(Encapsulation.NONE)
    resolved = Resolved(tunnel=TunnelFacts("none", encrypts=False, userspace=False, wire=wire))
    found = for_config(config, resolved)
    assert found is not None and found.goodput_bps == pytest.approx(20e6 * 1440 / 1514)


def test_a_pppoe_wan_carries_ipv4_only():
    assert LabSettings(wan=PPPOE).families == (4,)
    with pytest.raises(planfile.PlanError) as caught:
        planfile.parse(
            '[base.lab.wan]\nencapsulation = "pppoe"\n[base.traffic]\nfamily = 6\n', "p.toml"
        )
    assert caught.value.problems == [
        "traffic.family: 6 cannot cross lab.wan.encapsulation = 'pppoe', which carries"
        " IPv4 only here"
    ]


def test_a_kernel_without_pppoe_skips_with_its_reason():
    config = TrialConfig(lab=LabSettings(wan=PPPOE))
    caps = probe()
    without = type(caps)(**{**caps.__dict__, "pppoe": Check(False, "no PPPoE in this kernel (x)")})
    assert (
        skips.unmet(config, without) == "lab.wan.encapsulation: pppoe: no PPPoE in this kernel (x)"
    )
    assert skips.unmet(TrialConfig(), without) is None
