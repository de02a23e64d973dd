"""Property-based fuzz of plan files: whatever the file holds, ``tunnelbench plan show``
ends cleanly (exit 0 or 2, one error naming the problem, no traceback, nothing created,
bounded time). See fuzz_harness.py for what "cleanly" checks.

Four generators: valid keys with wrong or odd values, random keys and TOML structures,
random bytes, and well-formed plans re-encoded (UTF-16, a byte-order mark, cut short).
Besides them, a sweep gives every setting each number beyond a float or a 64-bit
integer: a parser that converts before it checks the range fails there on every run,
where the generators found ``cpu_budget = 10**400`` in 2 plans of 300.
"""

import json
import string
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.fuzz_harness import Tally, check_clean, empty_workdir, fuzz_settings
from tunnelbench.bench.planfile import ADAPTIVE_KEYS, TOP_KEYS
from tunnelbench.kinds import Cipher, Direction, Generator, Protocol, Queue, TunnelKind
from tunnelbench.model.fields import GROUPS, SETTINGS

PATHS = sorted(SETTINGS)
WORDS = sorted(
    {m.value for e in (Cipher, Direction, Generator, Protocol, Queue, TunnelKind) for m in e}
    | {"auto", "none", "on", "off", "1gbit", "100mbit", "25%", "2%", "0x3", "kernel"}
    | {"wireguard-go", "boringtun", "client", "gw", "server", "interleaved", "shuffled"}
)

# --- TOML value text: odd numbers and strings, arrays, inline tables, deep nesting ---

#: Numbers no setting can take, as TOML writes them: beyond a float (an unbounded TOML
#: integer, 1e400), beyond 64 bits, not a number; and the same as strings and shares.
HUGE = "1" + "0" * 400
EXTREME_NUMBERS = [HUGE, f"-{HUGE}", "1e400", "nan", str(2**64), f'"{HUGE}"', f'"{HUGE}%"']


odd_integers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["0", "-1", "1", "4", "128", "129", "1280", "65535", "65536", "576"]),
    st.integers(min_value=20, max_value=6000).map(lambda n: "9" * n),  # > 4,300 digits too
    st.integers(min_value=1, max_value=5000).map(lambda n: "0x" + "f" * n),
    st.sampled_from(["0o777", "0b101", "+7", "1_000"]),
)
odd_floats = st.one_of(
    st.sampled_from(["inf", "-inf", "nan", "1e400", "-1e400", "1e-400", "0.0", "-0.0"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
odd_strings = st.one_of(
    st.sampled_from(WORDS).map(json.dumps),
    st.text(max_size=30).map(json.dumps),
    st.integers(min_value=1, max_value=200_000).map(lambda n: json.dumps("x" * n)),
    st.from_regex(r"-?[0-9]{1,400}(\.[0-9]+)?(e[0-9]{1,4})?[kmgt]?(bit|bps)?", fullmatch=True).map(
        json.dumps
    ),
)
scalars = st.one_of(
    odd_integers,
    odd_floats,
    odd_strings,
    st.sampled_from(["true", "false", "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z"]),
)
bare_keys = st.text(string.ascii_lowercase + "_-", min_size=1, max_size=12)


def _inline_table(entries: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{json.dumps(k)} = {v}" for k, v in entries.items()) + " }"


values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.dictionaries(st.sampled_from(PATHS) | bare_keys, inner, max_size=4).map(_inline_table),
    ),
    max_leaves=12,
)
deep = st.tuples(st.integers(min_value=1, max_value=3000), st.sampled_from("[{")).map(
    lambda t: ("[" * t[0] + "]" * t[0]) if t[1] == "[" else ("{a = " * t[0] + "1" + " }" * t[0])
)
plausible = st.sampled_from(
    [json.dumps(w) for w in WORDS]
    + ["1", "2", "4", "8", "1500", "9000", "1280", "1420", "576", "0.25", "true", "false"]
    + ['"none"', '"1gbit"', '["client", "gw"]', '"3"']
)
# Mostly plausible values, so that many plans get past parsing to the checks of whole
# configurations (conflicts, exclude rules, expansion) and to `plan show` itself.
any_value = st.one_of(
    plausible, plausible, plausible, values, deep, st.sampled_from(EXTREME_NUMBERS)
)


@st.composite
def plan_texts(draw: st.DrawFn) -> str:
    """A plan whose keys are mostly real (top-level keys, settings in base and the
    matrix, adaptive repetitions, exclude rules) with values drawn from the odd ones."""
    lines: list[str] = []
    for key in draw(st.lists(st.sampled_from([*TOP_KEYS, "bogus"]), max_size=4, unique=True)):
        if key in ("base", "matrix", "exclude"):
            continue
        if key == "repetitions" and draw(st.booleans()):
            keys = draw(st.lists(st.sampled_from([*ADAPTIVE_KEYS, "x"]), unique=True))
            lines.append(f"repetitions = {_inline_table({k: draw(any_value) for k in keys})}")
        else:
            lines.append(f"{key} = {draw(any_value)}")
    paths = st.sampled_from(PATHS) | st.sampled_from(sorted(GROUPS)) | bare_keys
    if draw(st.booleans()):
        lines.append("[base]")
        for path in draw(st.lists(paths, max_size=5, unique=True)):
            lines.append(f"{json.dumps(path)} = {draw(any_value)}")
    if draw(st.booleans()):
        lines.append("[matrix]")
        for path in draw(st.lists(paths, max_size=4, unique=True)):
            axis = draw(st.lists(any_value, max_size=6))
            linked = draw(st.booleans())
            if linked:
                axis = [_inline_table({draw(st.sampled_from(PATHS)): v}) for v in axis]
            lines.append(f"{json.dumps(path)} = [{', '.join(axis)}]")
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        lines.append("[[exclude]]")
        for path in draw(st.lists(st.sampled_from(PATHS), max_size=2, unique=True)):
            lines.append(f"{json.dumps(path)} = {draw(any_value)}")
    return "\n".join(lines) + "\n"


def random_toml(depth: int = 3) -> st.SearchStrategy[str]:
    """Random TOML documents: random keys, tables and arrays of tables."""
    table = st.dictionaries(bare_keys | st.text(max_size=8).map(json.dumps), any_value, max_size=5)
    section = st.tuples(
        st.sampled_from(["[{}]", "[[{}]]"]),
        st.lists(bare_keys, min_size=1, max_size=depth).map(".".join),
        table,
    ).map(lambda t: t[0].format(t[1]) + "\n" + "\n".join(f"{k} = {v}" for k, v in t[2].items()))
    return st.tuples(table, st.lists(section, max_size=4)).map(
        lambda t: "\n".join(f"{k} = {v}" for k, v in t[0].items()) + "\n" + "\n".join(t[1])
    )


def _plan_show(tmp: Path, data: bytes, tally: Tally) -> None:
    with empty_workdir() as workdir:
        plan = tmp / "plan.toml"
        plan.write_bytes(data)
        check_clean(["plan", "show", str(plan)], workdir, tally)


TALLIES: dict[str, Tally] = {}


def _report(name: str, capsys) -> None:
    with capsys.disabled():
        print(f"\n{TALLIES[name].line(name)}")


def test_plans_with_real_keys_and_odd_values(tmp_path, capsys):
    tally = TALLIES["plans with real keys and odd values"] = Tally()

    @fuzz_settings()
    @given(plan_texts())
    def fuzz(text: str) -> None:
        _plan_show(tmp_path, text.encode(), tally)

    fuzz()
    _report("plans with real keys and odd values", capsys)


def test_random_toml_documents(tmp_path, capsys):
    tally = TALLIES["random TOML documents"] = Tally()

    @fuzz_settings()
    @given(random_toml())
    def fuzz(text: str) -> None:
        _plan_show(tmp_path, text.encode(), tally)

    fuzz()
    _report("random TOML documents", capsys)


def test_random_bytes_and_encodings(tmp_path, capsys):
    tally = TALLIES["random bytes and encodings"] = Tally()
    encodings = st.sampled_from(["utf-8", "utf-16", "utf-16-le", "utf-32", "latin-1", "cut"])

    @fuzz_settings()
    @given(st.one_of(st.binary(max_size=2000), st.tuples(plan_texts(), encodings)))
    def fuzz(data: bytes | tuple[str, str]) -> None:
        if isinstance(data, tuple):
            text, encoding = data
            if encoding == "cut":  # cut inside a multi-byte character, or a BOM first
                raw = ("\ufeff" + text + "é").encode()[:-1]
            else:
                raw = text.encode(encoding, errors="replace")
            data = raw
        _plan_show(tmp_path, data, tally)

    fuzz()
    _report("random bytes and encodings", capsys)


def test_every_setting_with_numbers_beyond_range(tmp_path, capsys):
    """One plan per number, giving it to every setting at once (a plan reports every
    bad value together) and to the top-level numbers."""
    tally = TALLIES["every setting, numbers beyond range"] = Tally()
    for number in EXTREME_NUMBERS:
        top = [f"seed = {number}", f"repetitions = {{ target = {number}, min = {number} }}"]
        settings = [f"{json.dumps(path)} = {number}" for path in PATHS]
        for text in (top[0], top[1], "[base]\n" + "\n".join(settings)):
            _plan_show(tmp_path, f"{text}\n".encode(), tally)
        _plan_show(tmp_path, f"repetitions = {number}\n".encode(), tally)
    _report("every setting, numbers beyond range", capsys)
