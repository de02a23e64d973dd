"""iperf3 command lines and version handling."""

import pytest

from tunnelbench.errors import LabError
from tunnelbench.kinds import Direction, StreamMode
from tunnelbench.model.plan import TrafficSettings
from tunnelbench.traffic.iperf3 import Iperf3, client_argv, parse_version, server_argv


def test_server_is_one_off_json_on_its_port():
    assert server_argv("iperf3", 5202) == ["iperf3", "-s", "-1", "-J", "-p", "5202"]


@pytest.mark.parametrize(
    ("direction", "flags"),
    [(Direction.UPLOAD, []), (Direction.DOWNLOAD, ["-R"]), (Direction.BIDIR, ["--bidir"])],
)
def test_client_command(direction, flags):
    settings = TrafficSettings(streams=4, direction=direction, duration=5, warmup=2, family=6)
    argv = client_argv("iperf3", "2001:2:0:1::2", 5201, settings, streams=4)
    assert argv == [
        "iperf3", "-c", "2001:2:0:1::2", "-p", "5201", "-6", "-t", "5", "-O", "2", "-i", "1",
        "-P", "4", "-J", "--get-server-output", "--connect-timeout", "5000", *flags,
    ]  # fmt: skip


def test_version_parsing():
    assert parse_version("iperf 3.12 (cJSON 1.7.15)") == (3, 12)
    assert parse_version("iperf 3.16") >= (3, 16)
    with pytest.raises(LabError):
        parse_version("something else")


class _Fixed(Iperf3):
    def __init__(self, version: str) -> None:
        self._v = version

    def version(self) -> str:
        return self._v


def test_auto_mode_uses_processes_only_for_single_threaded_iperf3_and_several_streams():
    old, new = _Fixed("iperf 3.12"), _Fixed("iperf 3.17")
    four = TrafficSettings(streams=4)
    assert old.resolve_mode(four) is StreamMode.PROCESSES
    assert new.resolve_mode(four) is StreamMode.SINGLE
    assert old.resolve_mode(TrafficSettings(streams=1)) is StreamMode.SINGLE
    forced = TrafficSettings(streams=4, stream_mode=StreamMode.SINGLE)
    assert old.resolve_mode(forced) is StreamMode.SINGLE


def test_clients_of_one_trial_may_run_the_margin_longer_at_short_intervals():
    settings = TrafficSettings(streams=4, duration=5, warmup=1)
    argv = client_argv("iperf3", "198.18.2.2", 5202, settings, streams=1, windowed=True)
    # 5 s + STAGGER_MARGIN_S + STOP_ROOM_S, whole seconds: a bound, as each is stopped
    # once the common window has passed.
    assert argv[argv.index("-t") + 1] == "11"
    assert argv[argv.index("-O") + 1] == "1"
    single = client_argv("iperf3", "198.18.2.2", 5201, settings, streams=4)
    assert single[single.index("-t") + 1] == "5" and single[single.index("-i") + 1] == "1"
    assert argv[argv.index("-i") + 1] == "0.1"
    assert server_argv("iperf3", 5202, windowed=True)[-2:] == ["-i", "0.1"]


def test_clients_that_started_further_apart_than_the_margin_are_refused():
    from tunnelbench.traffic.iperf3 import STAGGER_MARGIN_S, check_staggered

    assert STAGGER_MARGIN_S == 4
    # One SYN lost in a small queue: that client starts a retransmission timeout later,
    # and the others, which may run 4 s longer than measured, still cover the window.
    check_staggered({5201: 1.04, 5202: 1.04, 5203: 0.0, 5204: 0.2})
    # Lost twice (1 s, then 2 s), the second timer late in an emulated guest: covered.
    check_staggered({5201: 1.0, 5202: 3.6, 5203: 0.0})
    # Lost three times (1, 2, then 4 s): no window holds all three.
    with pytest.raises(LabError, match=r"port 5202 started 7\.05 s before the last one"):
        check_staggered({5201: 1.0, 5202: 7.05, 5203: 0.0})
    with pytest.raises(LabError, match="no iperf3 client connected"):
        check_staggered({})
