"""The lab's senders use cubic unless the plan names a congestion control: this
machine's default (bbr) is not what users' endpoints run, and a lab namespace would
inherit it."""

from dataclasses import replace

from tunnelbench.bench.congestion import LAB_DEFAULT, lab_traffic
from tunnelbench.kinds import Protocol
from tunnelbench.model.plan import TrafficSettings

#: This machine's tcp_available_congestion_control (6.18).
HERE = ("reno", "bbr", "cubic")


def test_tcp_without_a_named_one_gets_cubic():
    assert LAB_DEFAULT == "cubic"
    assert lab_traffic(TrafficSettings(), HERE).congestion == "cubic"


def test_the_plans_choice_is_kept():
    assert lab_traffic(TrafficSettings(congestion="bbr"), HERE).congestion == "bbr"
    assert lab_traffic(TrafficSettings(congestion="reno"), HERE).congestion == "reno"


def test_udp_and_a_kernel_without_cubic_are_left_alone():
    udp = replace(TrafficSettings(), protocol=Protocol.UDP, udp_rate=10**8)
    assert lab_traffic(udp, HERE) == udp
    assert lab_traffic(TrafficSettings(), ("reno", "bbr")).congestion is None
