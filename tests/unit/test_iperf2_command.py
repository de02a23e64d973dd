"""iperf2 command lines, version, stream mode and the settings it refuses."""

import pytest

from tests.conftest import FIXTURES
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Direction, Protocol, StreamMode
from tunnelbench.model.plan import TrafficSettings, TrialConfig
from tunnelbench.traffic import iperf2
from tunnelbench.traffic.iperf2 import Iperf2, client_argv, parse_version, server_argv, udp_length

CSV = ["-e", "-y", "C", "-i", "1"]


def test_server_exits_after_serving_every_stream():
    settings = TrafficSettings(streams=4)
    assert server_argv("iperf", 5001, settings, 4, None) == [
        "iperf", "-s", "-p", "5001", "-P", "4", *CSV,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("direction", "flags"),
    [
        (Direction.UPLOAD, []),
        (Direction.DOWNLOAD, ["-R"]),
        (Direction.BIDIR, ["--full-duplex"]),
    ],
)
def test_client_runs_warmup_plus_duration_with_interval_reports(direction, flags):
    settings = TrafficSettings(streams=4, direction=direction, duration=5, warmup=2)
    argv = client_argv("iperf", "198.18.1.2", 5001, settings, 4, None)
    assert argv == [
        "iperf", "-c", "198.18.1.2", "-t", "7", "-p", "5001", "-P", "4", *CSV, *flags,
    ]  # fmt: skip


def test_ipv6_goes_to_both_ends_and_congestion_control_to_the_sender():
    """2.1.8 refuses -Z beside --reverse ("tcp congestion control -Z and --reverse cannot
    be applied together") and warns where the end also receives, which fails a trial."""
    settings = TrafficSettings(family=6, congestion="bbr", direction=Direction.DOWNLOAD)
    server = server_argv("iperf", 5001, settings, 1, None)
    client = client_argv("iperf", "2001:2:0:1::2", 5001, settings, 1, None)
    assert server[-3:] == ["-V", "-Z", "bbr"]
    assert client[-2:] == ["-V", "-R"] and "-Z" not in client
    upload = TrafficSettings(congestion="bbr")
    assert "-Z" not in server_argv("iperf", 5001, upload, 1, None)
    assert client_argv("iperf", "198.18.1.2", 5001, upload, 1, None)[-2:] == ["-Z", "bbr"]
    both = TrafficSettings(congestion="bbr", direction=Direction.BIDIR)
    assert "-Z" not in server_argv("iperf", 5001, both, 1, None)
    assert "-Z" not in client_argv("iperf", "198.18.1.2", 5001, both, 1, None)


def test_udp_rate_is_per_stream_and_both_ends_use_the_datagram_length():
    settings = TrafficSettings(protocol=Protocol.UDP, udp_rate=150_000_000, streams=2)
    server = server_argv("iperf", 5001, settings, 2, 1368)
    client = client_argv("iperf", "198.18.1.2", 5001, settings, 2, 1368)
    assert server[-3:] == ["-u", "-l", "1368"]
    assert client[-5:] == ["-u", "-b", "150000000", "-l", "1368"]
    assert "-P" in client and client[client.index("-P") + 1] == "2"


def test_udp_needs_a_rate_and_a_length():
    with pytest.raises(ValueError, match="udp_rate"):
        client_argv("iperf", "x", 5001, TrafficSettings(protocol=Protocol.UDP), 1, 1368)


def test_udp_datagrams_are_the_size_iperf3_picks():
    # iperf3 3.12 sent 1368-byte datagrams through WireGuard at MTU 1420
    # (tests/fixtures/iperf3/udp-upload-1stream.json, start.test_start.blksize).
    assert udp_length(1420, 4) == 1368
    assert udp_length(1500, 4) == 1448
    assert udp_length(1500, 6) == 1428
    assert udp_length(65535, 4) == 65483
    assert udp_length(65535 + 100, 4) == 65507  # the largest UDP payload


def test_version_is_read_from_what_iperf_v_prints():
    assert parse_version("iperf version 2.1.8 (12 August 2022) pthreads") == (2, 1, 8)
    with pytest.raises(LabError, match="cannot read an iperf 2 version"):
        parse_version("iperf 3.12 (cJSON 1.7.15)")


def test_auto_is_one_process_and_processes_is_refused_naming_the_key():
    generator = Iperf2()
    assert generator.resolve_mode(TrafficSettings(streams=4)) is StreamMode.SINGLE
    assert generator.resolve_mode(TrafficSettings(streams=1)) is StreamMode.SINGLE
    single = TrafficSettings(streams=4, stream_mode=StreamMode.SINGLE)
    assert generator.resolve_mode(single) is StreamMode.SINGLE
    processes = TrafficSettings(streams=4, stream_mode=StreamMode.PROCESSES)
    with pytest.raises(UserError, match=r"^traffic\.stream_mode: 'processes' is not available"):
        generator.resolve_mode(processes)
    assert generator.conflicts(processes) and not generator.conflicts(single)
    # One stream in "processes" mode is one process either way.
    one = TrafficSettings(streams=1, stream_mode=StreamMode.PROCESSES)
    assert generator.conflicts(one) == []


def test_the_capture_ran_the_command_lines_built_here():
    """The fixtures were made by the generator itself (capture.py): their command lines
    are the ones these functions build."""
    import json

    doc = json.loads((FIXTURES / "iperf2" / "udp-upload-2streams.json").read_text())
    settings = TrialConfig.from_dict({"traffic": doc["settings"]}).traffic
    client, server = doc["records"]
    length = int(client["argv"][client["argv"].index("-l") + 1])
    assert length == 1368  # WireGuard's 1420 MTU
    assert server["argv"][1:] == server_argv("iperf", iperf2.PORT, settings, 2, length)[1:]
    assert (
        client["argv"][1:]
        == client_argv("iperf", doc["target"], iperf2.PORT, settings, 2, length)[1:]
    )
