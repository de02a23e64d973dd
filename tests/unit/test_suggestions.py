"""The one suggestion of every value and key error: the closest allowed value, if any."""

from tunnelbench.echo import did_you_mean, unknown_value
from tunnelbench.kinds import TunnelKind

KINDS = [k.value for k in TunnelKind]


def test_a_close_value_is_suggested() -> None:
    assert did_you_mean("wirguard", KINDS) == "; did you mean 'wireguard'?"
    assert did_you_mean("fq_codle", ["pfifo", "fq_codel", "cake"]) == "; did you mean 'fq_codel'?"


def test_nothing_close_suggests_nothing() -> None:
    assert did_you_mean("tinc", KINDS) == ""
    assert did_you_mean("", KINDS) == ""


def test_a_long_or_non_text_value_suggests_nothing() -> None:
    assert did_you_mean("wireguard" * 20, KINDS) == ""
    assert did_you_mean(4, ["4", "6"]) == ""


def test_where_prefixes_the_suggestion() -> None:
    assert did_you_mean("traffic.stream", ["traffic.streams"], "matrix.") == (
        "; did you mean 'matrix.traffic.streams'?"
    )


def test_unknown_value_lists_what_is_allowed_then_the_suggestion() -> None:
    assert unknown_value("uplaod", ["upload", "download", "bidir"]) == (
        "unknown value 'uplaod'; allowed: upload, download, bidir; did you mean 'upload'?"
    )
    assert unknown_value("x" * 500, ["a"]).startswith("unknown value 'xxxx")
    assert len(unknown_value("x" * 500, ["a"])) < 100
