"""trafgen's packet descriptions, command line and output, and the frame arithmetic of
rate searches. The descriptions are compiled by the real trafgen into a pcap file (no
device, no root), and the frames it wrote are read back byte by byte."""

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tunnelbench.errors import LabError, UserError
from tunnelbench.model import frames
from tunnelbench.traffic import trafgen

HOP = trafgen.NextHop("eth0", "198.18.0.1", "02:00:00:00:00:02", "02:00:00:00:00:01")
HOP6 = trafgen.NextHop("eth0", "2001:2::1", "02:00:00:00:00:02", "02:00:00:00:00:01")


def _written(tmp_path: Path, description: str) -> bytes:
    """The one frame trafgen writes for ``description``, from its pcap output."""
    if shutil.which(trafgen.PROGRAM) is None:
        pytest.skip(
            "trafgen is not installed (Debian package netsniff-ng; `make test` installs it)"
        )
    config, out = tmp_path / "f.cfg", tmp_path / "f.pcap"
    config.write_text(description + "\n")
    done = subprocess.run(
        [trafgen.PROGRAM, "--in", str(config), "--out", str(out), "--num", "1", "--cpus", "1",
         "--no-cpu-stats"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    captured, length = struct.unpack_from("<II", data, 24 + 8)  # the first record's header
    assert captured == length
    return data[24 + 16 : 24 + 16 + captured]


@pytest.mark.parametrize("frame", [64, 512, 1518])
def test_an_ipv4_frame_has_the_asked_size_headers_and_a_ttl(tmp_path, frame):
    written = _written(tmp_path, trafgen.packet(HOP, "198.18.1.2", 4, frame))
    assert len(written) == frame - frames.FCS == frames.written_bytes(frame)
    assert written[0:6] == bytes.fromhex("020000000001") and written[6:12] == bytes.fromhex(
        "020000000002"
    )
    assert written[12:14] == b"\x08\x00"
    ip = written[14:34]
    assert struct.unpack_from("!H", ip, 2)[0] == frame - 18  # IP total length
    assert ip[8] == 64 and ip[9] == 17  # TTL, UDP
    assert ip[12:16] == bytes([198, 18, 0, 1]) and ip[16:20] == bytes([198, 18, 1, 2])
    sport, dport, udp_length = struct.unpack_from("!HHH", written, 34)
    assert (sport, dport, udp_length) == (9, 9, frame - 18 - 20)


def test_an_ipv6_frame_has_a_hop_limit_and_needs_66_bytes(tmp_path):
    written = _written(tmp_path, trafgen.packet(HOP6, "2001:2::2", 6, 78))
    assert len(written) == 74 and written[12:14] == b"\x86\xdd"
    assert written[14 + 6] == 17 and written[14 + 7] == 64  # next header UDP, hop limit
    assert struct.unpack_from("!H", written, 14 + 4)[0] == 78 - 18 - 40  # payload length
    with pytest.raises(UserError, match=r"^frame size 64: an IPv6 UDP packet needs a frame"
                       r" of at least 66 bytes"):  # fmt: skip
        trafgen.packet(HOP6, "2001:2::2", 6, 64)


def test_frame_sizes_outside_ethernets_are_refused():
    for frame in (63, 9019):
        with pytest.raises(UserError, match=rf"^frame size {frame}: must be 64-9018 bytes"):
            frames.udp_payload(frame, 4)


def test_the_ceilings_of_a_port_and_of_a_shaper():
    assert frames.wire_pps(1e9, 64) == pytest.approx(1_488_095.2, abs=0.1)  # RFC 2544's table
    assert frames.wire_pps(1e9, 1518) == pytest.approx(81_274.4, abs=0.1)
    assert frames.shaped_pps(10e6, 1518) == pytest.approx(10e6 / (1514 * 8))
    assert frames.RFC2544_SIZES == (64, 128, 256, 512, 1024, 1280, 1518)


def test_the_command_line_takes_the_queue_and_one_core():
    argv = trafgen.argv("trafgen", "eth0", Path("/x/f.cfg"), 1000, 5000)
    assert argv[:5] == ["trafgen", "--dev", "eth0", "--conf", "/x/f.cfg"]
    assert argv[argv.index("--num") + 1] == "1000" and argv[argv.index("--rate") + 1] == "5000pps"
    assert "--qdisc-path" in argv and argv[argv.index("--cpus") + 1] == "1"
    with pytest.raises(UserError, match="must be positive"):
        trafgen.argv("trafgen", "eth0", Path("f"), 0, 5000)


def test_its_closing_counts_are_read_and_their_absence_is_an_error():
    printed = (
        "     1 packets to schedule\n    60 bytes in total\nRunning! Hang up with ^C!\n\n\n"
        "\r      100000 packets outgoing\n\r     6000000 bytes outgoing\n"
    )
    assert trafgen.parse(printed) == trafgen.Sent(100_000, 6_000_000)
    assert trafgen.Sent(1000, 60_000, 0.5).pps == 2000
    with pytest.raises(LabError, match="printed no packet and byte counts"):
        trafgen.parse("Running! Hang up with ^C!\n")
