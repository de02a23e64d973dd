"""iperf3 command lines and version handling."""

import pytest

from tunnelbench.errors import LabError
from tunnelbench.kinds import Direction, StreamMode
from tunnelbench.plan import TrafficSettings
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


def test_clients_whose_windows_differ_are_not_summed():
    import pytest

    from tunnelbench.errors import LabError
    from tunnelbench.traffic.iperf3 import aligned_tolerance, check_aligned

    # 5 s trials: 3% is 0.15 s; 1 s trials: the 0.15 s floor.
    assert aligned_tolerance(5) == pytest.approx(0.15)
    assert aligned_tolerance(1) == 0.15
    assert aligned_tolerance(10) == pytest.approx(0.3)
    check_aligned({5201: 6.05, 5202: 6.10, 5203: 6.19}, 5)  # 0.14 s: one window
    check_aligned({5201: 3.0}, 1)
    # A SYN lost in a small queue: that client connects a retransmission timeout later.
    with pytest.raises(LabError, match=r"port 5204 ran 1\.02 s longer than another"):
        check_aligned({5201: 2.05, 5202: 2.06, 5203: 2.04, 5204: 3.06}, 1)
