"""The ``tunnelbench ceiling`` verb: the theoretical TCP goodput ceiling, no root needed.

One tunnel: its ceiling, the byte breakdown and the arithmetic. ``--tunnel all`` (the
default): one table of every encapsulation at that rate and link MTU, each at its
default tunnel MTU, in the order docs/ceilings.md lists them.
"""

import argparse
import json
from dataclasses import asdict, replace
from typing import Any

from tunnelbench.analysis.ceiling import (
    Ceiling,
    CeilingInputError,
    Framing,
    ceiling,
)
from tunnelbench.cli.options import whole_number
from tunnelbench.cli.parsing import Verbs
from tunnelbench.echo import shown, unknown_value
from tunnelbench.errors import UserError
from tunnelbench.model.encapsulation import (
    ESP,
    GRE_FAMILY,
    KEEPS_IP_HEADER,
    Cipher,
    EncapOptions,
    Encapsulation,
)
from tunnelbench.model.plan import check_choice
from tunnelbench.report.fit import aligned
from tunnelbench.units import human_rate, parse_rate

ALL = "all"
ESP_ALIAS = "esp"  # with --esp-mode (default tunnel)
ESP_MODES = ("tunnel", "transport")
#: What --tunnel accepts: every kind of the wire model, all of them, or ESP by its mode.
TUNNEL_CHOICES = (ALL, *(e.value for e in Encapsulation), ESP_ALIAS)
#: The model's parameter names as this verb's options, for its error messages.
OPTION_OF = {
    "rate_bps": "--rate",
    "link_mtu": "--link-mtu",
    "tunnel_mtu": "--mtu",
    "inner_mtu": "--mtu",
    "inner_family": "--inner-ipv6",
    "outer_family": "--outer-ipv6",
    "cipher": "--cipher",
    "nat_t": "--nat-t",
    "gre_key": "--gre-key",
    "gre_csum": "--gre-csum",
    "gre_seq": "--gre-seq",
    "geneve_options": "--geneve-options",
    "encap_limit": "--no-encap-limit",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", default="1gbit", help="link rate, e.g. 1gbit (default 1gbit)")
    parser.add_argument(
        "--tunnel",
        default=ALL,
        choices=TUNNEL_CHOICES,
        metavar="KIND",
        help=f"{' | '.join(TUNNEL_CHOICES)}: all (the default) gives a table of every kind;"
        " esp is esp-tunnel, or esp-transport with --esp-mode transport",
    )
    parser.add_argument(
        "--mtu", type=whole_number, help="tunnel MTU (default: the tunnel's default)"
    )
    parser.add_argument(
        "--link-mtu", type=whole_number, default=1500, help="link MTU (default 1500)"
    )
    parser.add_argument("--ipv6", action="store_true", help="inner and outer IPv6")
    parser.add_argument("--inner-ipv6", action="store_true", help="inner (traffic) IPv6")
    parser.add_argument("--outer-ipv6", action="store_true", help="outer (underlay) IPv6")
    parser.add_argument(
        "--framing",
        default=Framing.SHAPER.value,
        choices=[f.value for f in Framing],
        help="shaper (what tbf/htb count: L3 + 14, default) | ethernet (L3 + 38 on the wire)",
    )
    parser.add_argument("--no-timestamps", action="store_true", help="TCP without timestamps")
    parser.add_argument("--esp-mode", choices=ESP_MODES, help="with --tunnel esp")
    parser.add_argument(
        "--cipher", choices=[c.value for c in Cipher], help="ESP's (both: the same overhead)"
    )
    parser.add_argument("--nat-t", action="store_true", help="ESP in UDP (NAT traversal)")
    parser.add_argument("--gre-key", action="store_true", help="GRE key field")
    parser.add_argument("--gre-csum", action="store_true", help="GRE checksum field")
    parser.add_argument("--gre-seq", action="store_true", help="GRE sequence number field")
    parser.add_argument(
        "--geneve-options", type=whole_number, default=0, help="Geneve option bytes (default 0)"
    )
    parser.add_argument(
        "--no-encap-limit",
        action="store_true",
        help="IPv6-outer ipip/gre/gretap made with `encaplimit none` (8 bytes less)",
    )
    parser.add_argument("--json", action="store_true", help="as JSON")


def main(args: argparse.Namespace) -> int:
    rate = parse_rate(args.rate, key="--rate")
    framing = check_choice("--framing", args.framing, Framing)
    inner_family = 6 if args.ipv6 or args.inner_ipv6 else 4
    outer_family = 6 if args.ipv6 or args.outer_ipv6 else 4
    if args.ipv6 and (args.inner_ipv6 or args.outer_ipv6):
        raise UserError("--ipv6: means both --inner-ipv6 and --outer-ipv6; give one or the other")
    kinds = _kinds(args.tunnel, args.esp_mode)
    if len(kinds) > 1 and args.mtu is not None:
        raise UserError(
            f"--mtu: {args.mtu} needs one --tunnel; with --tunnel all each uses its default"
        )
    if args.cipher is not None and len(kinds) == 1 and kinds[0] not in ESP:
        # The default cipher cannot tell "given" from "not given" in the options.
        raise UserError(
            f"--cipher: applies to esp-tunnel and esp-transport only, not to {kinds[0].value}"
        )
    options = EncapOptions(
        cipher=check_choice("--cipher", args.cipher, Cipher) if args.cipher else Cipher.AES_GCM,
        nat_t=args.nat_t,
        gre_key=args.gre_key,
        gre_csum=args.gre_csum,
        gre_seq=args.gre_seq,
        geneve_options=args.geneve_options,
        encap_limit=not args.no_encap_limit,
    )
    results = []
    for kind in kinds:
        one = len(kinds) == 1
        # No tunnel has no outer header; in the table, esp-transport keeps the inner one.
        keeps = kind is Encapsulation.NONE or (kind in KEEPS_IP_HEADER and not one)
        outer = inner_family if keeps else outer_family
        try:
            results.append(
                ceiling(
                    rate,
                    link_mtu=args.link_mtu,
                    encapsulation=kind,
                    tunnel_mtu=args.mtu,
                    inner_family=inner_family,
                    outer_family=outer,
                    framing=framing,
                    timestamps=not args.no_timestamps,
                    options=options if one else _applicable(options, kind, outer),
                )
            )
        except CeilingInputError as exc:
            raise UserError(f"{OPTION_OF.get(exc.key, exc.key)}: {exc.detail}") from None
    if args.json:
        print(json.dumps([to_json(c) for c in results], indent=2))
    elif len(results) == 1:
        print(render_one(results[0]))
    else:
        print(render_table(results))
    return 0


def _kinds(tunnel: str, esp_mode: str | None) -> list[Encapsulation]:
    if esp_mode is not None and esp_mode not in ESP_MODES:
        raise UserError(f"--esp-mode: {unknown_value(esp_mode, ESP_MODES)}")
    if tunnel == ALL:
        if esp_mode is not None:
            raise UserError(f"--esp-mode: {shown(esp_mode)} needs --tunnel esp")
        return list(Encapsulation)
    if tunnel == ESP_ALIAS:
        return [Encapsulation(f"esp-{esp_mode or 'tunnel'}")]
    try:
        kind = Encapsulation(tunnel)
    except ValueError:
        raise UserError(f"--tunnel: {unknown_value(tunnel, TUNNEL_CHOICES)}") from None
    if esp_mode is not None and kind.value != f"esp-{esp_mode}":
        raise UserError(f"--esp-mode: {shown(esp_mode)} does not go with --tunnel {tunnel}")
    return [kind]


def _applicable(options: EncapOptions, kind: Encapsulation, outer_family: int) -> EncapOptions:
    """In the table of every kind, each option applies to the kinds it concerns."""
    default = EncapOptions()
    if kind not in ESP:
        options = replace(options, cipher=default.cipher, nat_t=default.nat_t)
    if kind not in GRE_FAMILY:
        options = replace(options, gre_key=False, gre_csum=False, gre_seq=False)
    if kind is not Encapsulation.GENEVE:
        options = replace(options, geneve_options=0)
    if outer_family != 6 or kind not in (Encapsulation.IPIP, *GRE_FAMILY):
        options = replace(options, encap_limit=default.encap_limit)
    return options


def describe(result: Ceiling) -> str:
    """The tunnel with what sets its size: ``esp-tunnel (aes-gcm, NAT-T)``."""
    options = result.options
    details = []
    if result.encapsulation in ESP:
        details.append(options.cipher.value)
        details += ["NAT-T"] if options.nat_t else []
    if result.encapsulation in GRE_FAMILY:
        details += [n for n, on in (("csum", options.gre_csum), ("key", options.gre_key)) if on]
        details += ["seq"] if options.gre_seq else []
    if result.encapsulation is Encapsulation.GENEVE and options.geneve_options:
        details.append(f"{options.geneve_options} B options")
    if not options.encap_limit:
        details.append("no encap limit")
    return result.encapsulation.value + (f" ({', '.join(details)})" if details else "")


def _families(result: Ceiling) -> str:
    if result.encapsulation in KEEPS_IP_HEADER or result.inner_family == result.outer_family:
        return f"IPv{result.inner_family}"
    return f"IPv{result.inner_family} in IPv{result.outer_family}"


def _framing(framing: Framing) -> str:
    if framing is Framing.SHAPER:
        return "shaper framing (what tbf/htb count: L3 + 14)"
    return "ethernet framing (L3 + 38 on the wire, frames of at least 64 B)"


def render_one(result: Ceiling) -> str:
    """An aligned key/value block, then the arithmetic."""
    tunnel_mtu = "-" if result.tunnel_mtu is None else str(result.tunnel_mtu)
    added = ", ".join(f"{size} {name}" for name, size in result.overhead_fields) or "nothing"
    fragments = (
        f"{result.fragments}: FRAGMENTED, {' + '.join(map(str, result.fragment_sizes))} B"
        if result.fragmented
        else "1 (not fragmented)"
    )
    pairs = [
        ("tunnel", describe(result)),
        ("family", _families(result)),
        ("rate", human_rate(result.rate_bps)),
        ("framing", _framing(result.framing)),
        ("link MTU", str(result.link_mtu)),
        ("tunnel MTU", tunnel_mtu),
        ("TCP timestamps", "on" if result.timestamps else "off"),
        ("TCP payload", f"{result.tcp_payload} B"),
        ("inner packet", f"{result.inner_packet} B"),
        ("encapsulation", f"+{sum(s for _, s in result.overhead_fields)} B: {added}"),
        ("padding", f"{result.padding} B"),
        ("outer packet", f"{result.outer_packet} B"),
        ("packets on link", fragments),
        ("counted/packet", f"{result.counted_bytes_per_packet} B"),
        ("efficiency", f"{result.efficiency:.2%}"),
        ("ceiling", f"{result.goodput_bps / 1e6:.1f} Mbit/s"),
    ]
    width = max(len(key) for key, _ in pairs)
    lines = [f"{key.ljust(width)}  {value}" for key, value in pairs]
    return "\n".join([*lines, "", result.explain()])


def render_table(results: list[Ceiling]) -> str:
    first = results[0]
    title = (
        f"TCP goodput ceiling at {human_rate(first.rate_bps)}, link MTU {first.link_mtu}, "
        f"inner IPv{first.inner_family}, {_framing(first.framing)}, "
        f"TCP timestamps {'on' if first.timestamps else 'off'}"
    )
    header = ["tunnel", "IP", "tunnel MTU", "payload", "outer", "counted", "efficiency"]
    header += ["ceiling Mbit/s"]
    body = [
        [
            describe(r),
            _families(r),
            "-" if r.tunnel_mtu is None else str(r.tunnel_mtu),
            str(r.tcp_payload),
            str(r.outer_packet) + (f" ({r.fragments} frags)" if r.fragmented else ""),
            str(r.counted_bytes_per_packet),
            f"{r.efficiency:.2%}",
            f"{r.goodput_bps / 1e6:,.1f}",
        ]
        for r in results
    ]
    note = "sizes in bytes per full-sized TCP segment; one tunnel's arithmetic: --tunnel KIND"
    return "\n".join([title, "", *aligned(header, body, set(range(2, 8))), "", note])


def to_json(result: Ceiling) -> dict[str, Any]:
    data = asdict(result)
    data["overhead_fields"] = [{"field": n, "bytes": s} for n, s in result.overhead_fields]
    data["fragment_sizes"] = list(result.fragment_sizes)
    data["explain"] = result.explain()
    return data


def register(verbs: Verbs) -> None:
    parser = verbs.add_parser(
        "ceiling", help="the theoretical TCP goodput ceiling of a tunnel on a link of known rate"
    )
    add_arguments(parser)
    parser.set_defaults(func=main)
