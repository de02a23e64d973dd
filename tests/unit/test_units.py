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
        ("100Mbit/s", 10**8),
        ("100mbits", 10**8),
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
        # A bare number is bit/s to tc and anything to a reader: refused like "100M".
        (
            "100000",
            "--rate: '100000' has no unit: tc reads it as 100 kbit/s; write a number with a"
            " unit, e.g. 100mbit, 1gbit",
        ),
        (
            "100M",
            "--rate: '100M' is not a rate; write a number with a unit, e.g. 100mbit, 1gbit",
        ),
        (
            "1" * 16,
            "--rate: '1111111111111111' has no unit; write a number with a unit, e.g. 100mbit,"
            " 1gbit",
        ),
        # Digits of other scripts: float() reads them, tc does not.
        (
            "\uff11\uff10\uff10mbit",
            "--rate: '\uff11\uff10\uff10mbit' holds '\uff11' (FULLWIDTH DIGIT ONE), not an"
            " ASCII digit; write numbers with 0-9, e.g. 100mbit",
        ),
        (
            "\u0661\u0660\u0660mbit",
            "--rate: '\u0661\u0660\u0660mbit' holds '\u0661' (ARABIC-INDIC DIGIT ONE), not an"
            " ASCII digit; write numbers with 0-9, e.g. 100mbit",
        ),
        (
            "1\u00b2mbit",
            "--rate: '1\u00b2mbit' holds '\u00b2' (SUPERSCRIPT TWO), not an ASCII digit;"
            " write numbers with 0-9, e.g. 100mbit",
        ),
        # Under IGNORECASE a Unicode pattern would read the Kelvin sign as "k".
        (
            "100\u212abit",
            "--rate: '100\u212abit' is not a rate; write a number with a unit, e.g. 100mbit, 1gbit",
        ),
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


# The captured case: `--rate 100mbps` ran at 800 Mbit/s (tc reads "mbps" as megabytes/s).
AMBIGUOUS = [
    (
        "100mbps",
        "--rate: '100mbps': tc reads this as 100 megabytes/s = 800 Mbit/s;"
        " write 100mbit for 100 Mbit/s or 800mbit",
    ),
    (
        "100MBps",
        "--rate: '100MBps': tc reads this as 100 megabytes/s = 800 Mbit/s;"
        " write 100mbit for 100 Mbit/s or 800mbit",
    ),
    (
        "500kbps",
        "--rate: '500kbps': tc reads this as 500 kilobytes/s = 4000 kbit/s;"
        " write 500kbit for 500 kbit/s or 4000kbit",
    ),
    (
        "2.5gbps",
        "--rate: '2.5gbps': tc reads this as 2.5 gigabytes/s = 20 Gbit/s;"
        " write 2.5gbit for 2.5 Gbit/s or 20gbit",
    ),
    (
        "125000bps",
        "--rate: '125000bps': tc reads this as 125000 bytes/s = 1000000 bit/s;"
        " write 125000bit for 125000 bit/s or 1000000bit",
    ),
    (
        "100mb",
        "--rate: '100mb': this may mean 100 Mbit/s or 100 megabytes/s = 800 Mbit/s;"
        " write 100mbit for 100 Mbit/s or 800mbit",
    ),
    (
        "1 GB/s",
        "--rate: '1 GB/s': this may mean 1 Gbit/s or 1 gigabytes/s = 8 Gbit/s;"
        " write 1gbit for 1 Gbit/s or 8gbit",
    ),
    (
        "100mbyte",
        "--rate: '100mbyte' is 100 megabytes/s = 800 Mbit/s; rates are written in bits: 800mbit",
    ),
    (
        "12.5MBytes/s",
        "--rate: '12.5MBytes/s' is 12.5 megabytes/s = 100 Mbit/s; rates are written in bits:"
        " 100mbit",
    ),
    (
        "1" * 40 + "mbps",
        f"--rate: '{'1' * 40}mbps' may mean bytes or bits per second; write it in bits,"
        " e.g. 100mbit",
    ),
]


@pytest.mark.parametrize(("text", "message"), AMBIGUOUS, ids=[t[:20] for t, _ in AMBIGUOUS])
def test_bytes_or_bits_spellings_are_refused_with_both_readings(text, message):
    with pytest.raises(UserError) as caught:
        parse_rate(text, key="--rate")
    assert str(caught.value) == message
    assert caught.value.exit_code == 2
