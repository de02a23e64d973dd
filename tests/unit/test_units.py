import pytest

from tunnelbench.errors import UserError
from tunnelbench.units import format_rate, parse_rate


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("1gbit", 10**9),
        ("100mbit", 10**8),
        ("2.5gbit", 2_500_000_000),
        ("500kbit", 500_000),
        ("1Gbit", 10**9),
        ("125mbps", 10**9),  # bytes per second, as tc reads "bps"
        ("10000000", 10**7),
    ],
)
def test_parse_rate(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fast", "--rate: 'fast' is not a rate; write a number with a unit, e.g. 100mbit, 1gbit"),
        (
            "1 gigabit",
            "--rate: '1 gigabit' is not a rate; write a number with a unit, e.g. 100mbit, 1gbit",
        ),
        ("1bit", "--rate: '1bit' is below the smallest supported rate, 8kbit"),
        ("1tbit", "--rate: '1tbit' is above the largest supported rate, 400gbit"),
    ],
)
def test_bad_rates_name_the_key_and_value(text, message):
    with pytest.raises(UserError) as caught:
        parse_rate(text, key="--rate")
    assert str(caught.value) == message


def test_format_rate_is_exact():
    assert format_rate(10**9) == "1gbit"
    assert format_rate(2_500_000_000) == "2500mbit"
    assert format_rate(123_456) == "123456bit"
