"""The lab's senders use cubic (what users' endpoints run) unless the plan names a
congestion control; a kernel without cubic keeps its default."""

from dataclasses import replace

from tunnelbench.bench.congestion import LAB_DEFAULT, lab_traffic
from tunnelbench.kinds import Protocol
from tunnelbench.model.plan import TrafficSettings

#: This machine's tcp_available_congestion_control (6.18).
HERE = ("reno", "bbr", "cubic")


def test_tcp_without_a_named_one_keeps_the_kernels_default_or_gets_the_labs():
    assert LAB_DEFAULT == "cubic"
    assert lab_traffic(TrafficSettings(), HERE).congestion == "cubic"
    assert lab_traffic(TrafficSettings(), HERE, None).congestion is None
    assert lab_traffic(TrafficSettings(), HERE, "cubic").congestion == "cubic"


def test_the_plans_choice_is_kept():
    assert lab_traffic(TrafficSettings(congestion="bbr"), HERE, "cubic").congestion == "bbr"
    assert lab_traffic(TrafficSettings(congestion="reno"), HERE, "cubic").congestion == "reno"


def test_udp_and_a_kernel_without_cubic_are_left_alone():
    udp = replace(TrafficSettings(), protocol=Protocol.UDP, udp_rate=10**8)
    assert lab_traffic(udp, HERE, "cubic") == udp
    assert lab_traffic(TrafficSettings(), ("reno", "bbr"), "cubic").congestion is None
