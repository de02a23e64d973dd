"""A tunnel's implementation is compared by name only where it is parsed.

"auto" is no implementation but the absence of a choice: the model holds None for it
(:func:`tunnelbench.model.plan.requested_implementation`), parsed once where plans,
options, hosts files and stored configurations are read. Whether an implementation runs
in the kernel is asked of its kind (:meth:`tunnelbench.tunnels.base.Tunnel.in_kernel`),
not read from its name. This guard fails when a module compares anything with "auto" or
with an implementation's name written out (``== "kernel"``, ``in ("auto", ...)``,
``case "boringtun":``) outside the parsers, so the rule holds for code written later.
A kind's own module names its implementations by its constants (``KERNEL``), which this
guard leaves alone: that is the registry itself.
"""

import ast
import json
from pathlib import Path

from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import TrialConfig, TunnelSettings
from tunnelbench.model.records import Resolved
from tunnelbench.model.tuning import Step, Target, TuneRecord
from tunnelbench.report.table import axis_value
from tunnelbench.tunnels import REGISTRY as TUNNELS

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tunnelbench"
PATH = "tunnel.implementation"

#: Where a spelt implementation is read into the model (or "auto" into None).
PARSING = {
    "model/plan.py",  # stored configurations, and a plan's settings, into TunnelSettings
    "model/fields.py",  # a plan's values (its "auto" MTU too)
    "bench/planfile.py",  # a plan file's implementation checked against its kind's
    "cli/options.py",  # --wireguard-impl
    "remote/hostsfile.py",  # a hosts file's [tunnel] implementation
}
#: Names every implementation is known by, and "auto".
NAMES = {"auto"} | {name for kind in TUNNELS.kinds() for name in TUNNELS.get(kind).implementations}
#: A name that, where it is compared, is not an implementation's: a line's key of the
#: facts a host reports, and a section of ``doctor``'s report.
NOT_IMPLEMENTATIONS = {
    ("remote/probes.py", "kernel"),
    ("bench/doctor_report.py", "kernel"),
}


def _spelt(node: ast.AST) -> list[str]:
    """The strings ``node`` writes out as a compared value (itself, or a tuple's, list's
    or set's items), and ``IMPLEMENTATION_AUTO`` by its name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [text for item in node.elts for text in _spelt(item)]
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return ["auto"] if name == "IMPLEMENTATION_AUTO" else []
    return []


def _compared(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) for each implementation's name or "auto" a comparison or a ``case``
    writes out."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        else:
            continue
        found += [(node.lineno, text) for o in operands for text in _spelt(o) if text in NAMES]
    return found


def test_the_guard_sees_what_it_refuses():
    tree = ast.parse(
        'a == "auto"\nb in ("kernel", c)\nd != IMPLEMENTATION_AUTO\n'
        'match e:\n    case "boringtun": pass\nf == "kernel-libipsec"\n'
    )
    assert _compared(tree) == [(1, "auto"), (2, "kernel"), (3, "auto"), (5, "boringtun")]


def test_implementations_are_compared_by_name_only_where_they_are_parsed():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        if where in PARSING:
            continue
        for line, name in _compared(ast.parse(path.read_text(), str(path))):
            if (where, name) not in NOT_IMPLEMENTATIONS:
                found.append(f"{where}:{line}: {name!r}")
    assert found == [], (
        "compare the model's None (no choice) or ask the kind (Tunnel.in_kernel); "
        "parse names in the parsing modules only"
    )


def test_each_kind_says_which_of_its_implementations_run_in_the_kernel():
    kernel = {kind.value: TUNNELS.get(kind).kernel_implementations for kind in TUNNELS.kinds()}
    assert kernel["wireguard"] == ("kernel",)
    assert kernel["ipsec"] == ("kernel",)  # ESP by XFRM; libipsec's is strongSwan's own
    assert kernel["openvpn"] == ()  # its daemon's (DCO is found at set-up, not declared)
    assert kernel["vxlan"] == kernel["none"] == ("kernel",)
    wireguard = TUNNELS.get(TunnelKind.WIREGUARD)
    assert [wireguard.in_kernel(n) for n in ("kernel", "boringtun", "ipsec")] == [
        True,
        False,
        False,  # not one of its implementations
    ]


def test_auto_is_none_in_the_model_and_auto_where_stored():
    config = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD))
    assert config.tunnel.implementation is None
    assert config.to_dict()["tunnel"]["implementation"] == "auto"
    assert '"implementation":"auto"' in config.key()  # stored runs keep their keys
    assert TrialConfig.from_dict(config.to_dict()) == config
    named = TrialConfig(tunnel=TunnelSettings(TunnelKind.WIREGUARD, implementation="boringtun"))
    assert TrialConfig.from_dict(named.to_dict()) == named
    from_plan = TrialConfig.from_settings(
        {"tunnel.kind": "wireguard", "tunnel.implementation": "auto"}
    )
    assert from_plan == config


def test_every_writer_of_a_configuration_spells_no_choice_auto():
    """Readers that walk a configuration's fields (a report table's cells, a tuning
    record's stored steps) write "auto" as before, not the model's None."""
    auto = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.WIREGUARD))
    named = TrialConfig(tunnel=TunnelSettings(TunnelKind.WIREGUARD, implementation="boringtun"))
    cells = [
        axis_value(ConfigSummary(c.key(), c, Resolved(), [], None, None, None), PATH)
        for c in (auto, named)
    ]
    assert cells == ["auto", "boringtun"]
    record = TuneRecord(Target.THROUGHPUT, 60.0, 4, 5.0, 3, 1, [Step(0, auto.key(), auto, 0)])
    stored = record.to_dict()
    assert stored["steps"][0]["best_config"] == json.loads(json.dumps(auto.to_dict()))
    assert TuneRecord.from_dict(stored).start == auto
