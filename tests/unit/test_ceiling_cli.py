"""``tunnelbench ceiling``: what a user reads (errors are in the golden CLI errors)."""

import json

from tunnelbench.cli.main import main


def run(capsys, *args: str) -> str:
    assert main(["ceiling", *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_one_tunnel_prints_the_breakdown_and_the_arithmetic(capsys):
    out = run(capsys, "--rate", "1gbit", "--tunnel", "wireguard", "--mtu", "1420")
    lines = out.splitlines()
    assert lines[0] == "tunnel           wireguard"
    assert "outer packet     1480 B" in lines
    assert "counted/packet   1494 B" in lines
    assert "ceiling          915.7 Mbit/s" in lines
    assert "encapsulation    +60 B: 20 outer IPv4, 8 UDP, 16 WireGuard header, 16 Poly1305 tag" in (
        lines
    )
    # 1368 / 1494 * 1 Gbit/s
    assert lines[-1] == (
        "1368 B payload / 1494 B counted per packet \N{MULTIPLICATION SIGN} 1 Gbit/s = 915.7 Mbit/s"
    )


def test_the_default_is_a_table_of_every_encapsulation(capsys):
    out = run(capsys, "--rate", "1gbit")
    lines = out.splitlines()
    assert lines[0].startswith("TCP goodput ceiling at 1 Gbit/s, link MTU 1500, inner IPv4")
    rows = [line.split() for line in lines[4:14]]
    assert [r[0] for r in rows] == [
        "none", "ipip", "gre", "gretap", "vxlan", "geneve", "wireguard", "openvpn",
        "esp-tunnel", "esp-transport",
    ]  # fmt: skip
    ceilings = {r[0]: r[-1] for r in rows}
    # 1448/1514, 1398/1514 and 1368/1494 of 1 Gbit/s
    assert (ceilings["none"], ceilings["vxlan"], ceilings["wireguard"]) == (
        "956.4",
        "923.4",
        "915.7",
    )


def test_esp_alias_with_mode_and_nat_t(capsys):
    # transport + NAT-T: 1458 - 52 = 1406; 1406 / 1514 = 928.7
    out = run(capsys, "--tunnel", "esp", "--esp-mode", "transport", "--nat-t")
    assert "tunnel           esp-transport (aes-gcm, NAT-T)" in out.splitlines()
    assert "ceiling          928.7 Mbit/s" in out.splitlines()


def test_json(capsys):
    out = run(capsys, "--tunnel", "wireguard", "--mtu", "1500", "--framing", "ethernet", "--json")
    (result,) = json.loads(out)
    # outer 1560 -> 1500 + 80; 1538 + 118 = 1656; 1448 / 1656 = 874.4
    assert result["encapsulation"] == "wireguard"
    assert result["fragmented"] is True
    assert result["fragment_sizes"] == [1500, 80]
    assert result["counted_bytes_per_packet"] == 1656
    assert round(result["goodput_bps"] / 1e6, 1) == 874.4
    assert result["overhead_fields"][0] == {"field": "outer IPv4", "bytes": 20}
