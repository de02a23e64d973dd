from tunnelbench.kinds import Shaper
from tunnelbench.lab.netns import batch_failure
from tunnelbench.lab.shaping import shaping_commands
from tunnelbench.model.plan import LinkSettings
from tunnelbench.model.wan import burst_bytes


def test_burst_is_one_millisecond_or_ten_frames():
    assert burst_bytes(10**9, 1500) == 125_000  # 1 Gbit/s for 1 ms
    assert burst_bytes(10**7, 1500) == 15_140  # ten 1514-byte frames


def test_tbf_command_has_a_pfifo_child_with_the_queue_limit():
    assert shaping_commands("tbab-gw", LinkSettings(rate=10**9, queue_limit=100)) == [
        ["qdisc", "replace", "dev", "tbab-gw", "root", "handle", "1:", "tbf",
         "rate", "1gbit", "burst", "125000", "limit", "151400"],
        ["qdisc", "add", "dev", "tbab-gw", "parent", "1:1", "handle", "10:", "pfifo",
         "limit", "100"],
    ]  # fmt: skip


def test_htb_command_has_a_pfifo_leaf_with_the_queue_limit():
    assert shaping_commands("x", LinkSettings(rate=10**8, shaper=Shaper.HTB, queue_limit=50)) == [
        ["qdisc", "replace", "dev", "x", "root", "handle", "1:", "htb", "default", "1"],
        ["class", "add", "dev", "x", "parent", "1:", "classid", "1:1", "htb",
         "rate", "100mbit", "ceil", "100mbit", "burst", "15140", "cburst", "15140"],
        ["qdisc", "add", "dev", "x", "parent", "1:1", "handle", "10:", "pfifo", "limit", "50"],
    ]  # fmt: skip


def test_a_failed_batch_names_its_line_and_the_kernels_reason():
    commands = [["link", "set", "lo", "up"], ["link", "add", "t0", "type", "gretap"]]
    stderr = "Error: Unknown device type.\nCommand failed -:2\n"
    assert batch_failure("ip", "tb-x-gw", commands, stderr) == (
        "`ip -n tb-x-gw link add t0 type gretap` failed: Error: Unknown device type."
    )
    assert batch_failure("tc", "tb-x-gw", commands, "") == (
        "`tc -n tb-x-gw -batch` failed: no error output"
    )
