"""``--help`` of the measuring verbs lists what the registries hold, not a copy."""

import pytest

from tunnelbench.cli import main
from tunnelbench.model.plan import DURATION_DEFAULT, REPETITIONS_DEFAULT
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.wireguard import USERSPACE


def help_of(verb: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main.parser().parse_args([*verb, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps at the terminal's width


@pytest.mark.parametrize("verb", [["run"], ["tune"]], ids=" ".join)
def test_every_registered_kind_and_generator_is_in_the_help(
    verb: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = help_of(verb, capsys)
    kinds = ", ".join(kind.value for kind in TUNNELS.kinds())
    generators = ", ".join(generator.value for generator in GENERATORS.kinds())
    assert f"tunnel kinds: {kinds}." in text
    assert f"load generators (a plan's traffic.generator): {generators}." in text
    for implementation in USERSPACE:
        assert implementation in text


@pytest.mark.parametrize(
    ("verb", "option", "values"),
    [
        (["run"], "--direction", "{upload,download,bidir}"),
        (["run"], "--topology", "{road-warrior,site-to-site}"),
        (["tune"], "--stream-mode", "{auto,single,processes}"),
        (["report"], "--format", "{table,md,bbcode,md-full,html,json,csv}"),
    ],
)
def test_a_set_of_values_is_shown_from_its_choices(
    verb: list[str], option: str, values: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert f"{option} {values}" in help_of(verb, capsys)


def test_the_defaults_shown_are_the_ones_used(capsys: pytest.CaptureFixture[str]) -> None:
    """The help once said 3 runs of 5 s after the defaults became 5 runs of 3 s."""
    text = help_of(["run"], capsys)
    assert f"repetitions of each configuration (default {REPETITIONS_DEFAULT})" in text
    assert f"measured seconds per trial (default {DURATION_DEFAULT})" in text
    assert f"measured seconds per trial ({DURATION_DEFAULT})" in help_of(["tune"], capsys)


def test_hosts_check_says_it_connects_over_ssh_and_changes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_of(["hosts", "check"], capsys)
    assert "over SSH" in text
    assert "changes nothing on any host" in text
    listed = help_of(["hosts"], capsys)
    assert "check over SSH, report what each host has; changes nothing on any host" in listed
