"""The package's architecture, checked: folders in layers, imports only downwards.

Each folder is a layer; a module may import from its own layer and the layers below it,
never from one above, so that what is below can be read, tested and reused (by a VM guest
or an SSH host later) without what is above. Function-local imports of the package are
refused too: they are how a cycle hides. The top level holds only the ground floor.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tunnelbench"

#: Bottom to top. Names in one tuple share a layer (they may import each other).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "registry", "units", "kinds", "echo"),
    ("model",),
    ("analysis",),
    ("system",),
    ("lab", "vm"),
    ("tunnels", "traffic", "probes"),
    ("remote",),
    ("bench",),
    ("report",),
    ("cli",),
)
#: Entry points above every layer.
ENTRY = {"__init__", "__main__"}


def _layer(name: str) -> int:
    if name in ENTRY or name == "__version__":  # the package's own attributes
        return 0
    for index, members in enumerate(LAYERS):
        if name in members:
            return index
    raise AssertionError(f"tunnelbench.{name} belongs to no layer; add it to LAYERS")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    """The layer member a module belongs to: its folder, or its own name at the top."""
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imports(tree: ast.Module) -> list[tuple[ast.stmt, str, bool]]:
    """(statement, imported tunnelbench unit, at module level) for each import."""
    found: list[tuple[ast.stmt, str, bool]] = []
    top = {id(node) for node in tree.body}

    def visit(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            level = module_level and id(child) in top
            if isinstance(child, ast.ImportFrom) and child.module:
                parts = child.module.split(".")
                if parts[0] == "tunnelbench":
                    if len(parts) == 1:
                        for alias in child.names:
                            found.append((child, alias.name, level))
                    else:
                        found.append((child, parts[1], level))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    parts = alias.name.split(".")
                    if parts[0] == "tunnelbench" and len(parts) > 1:
                        found.append((child, parts[1], level))
            # if TYPE_CHECKING / try blocks at module level still count as module level
            visit(child, level and isinstance(child, (ast.If, ast.Try)))

    visit(tree, True)
    return found


def test_the_top_level_holds_only_the_ground_floor() -> None:
    top = {p.stem for p in PACKAGE.glob("*.py")} - ENTRY
    assert top <= set(LAYERS[0]), f"move {sorted(top - set(LAYERS[0]))} into a folder"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_only_downwards_and_at_module_level(path: Path) -> None:
    unit = _unit(path)
    if unit in ENTRY:
        return
    mine = _layer(unit)
    tree = ast.parse(path.read_text(), filename=str(path))
    problems = []
    for statement, imported, module_level in _imports(tree):
        where = f"line {statement.lineno}: tunnelbench.{imported}"
        if not module_level:
            problems.append(f"{where} is imported inside a function (a hidden cycle?)")
        elif _layer(imported) > mine:
            problems.append(f"{where} is a layer above {unit}")
    assert not problems, "\n".join(problems)


def test_a_command_starts_without_the_numeric_and_chart_libraries():
    """Every command (``--help``, a refused plan, ``runs``) imports the whole CLI; numpy
    (0.18 s of each start here) and matplotlib come only with what computes or draws."""
    code = (
        "import sys, tunnelbench.cli.main; "
        "print(sorted(m for m in ('numpy', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


#: The patterned metric families, built and read back only by model/metrics' functions:
#: each family's prefix as written before its first placeholder, and the shape of a
#: whole name of it (a ``tunnel.`` metric has a role and a field, unlike the two-part
#: configuration paths ``tunnel.mtu``).
METRIC_FAMILIES: dict[str, re.Pattern[str]] = {
    "link.": re.compile(r"link\.[^.\s]+\.[^\s]+\.[a-z_0-9]+"),
    "qdisc.": re.compile(r"qdisc\.[^.\s]+\.[^\s]+\.[a-z_0-9]+"),
    "tcp.": re.compile(r"tcp\.[^.\s]+\.[a-z_0-9.]+"),
    "proc.": re.compile(r"proc\.[^\s]+"),
    "remote.": re.compile(r"remote\.[^.\s]+\.[a-z_0-9]+"),
    "thermal.": re.compile(r"thermal\.[^.\s]+\.[^\s]+\.max_c"),
    "snmp.": re.compile(r"snmp\.[^.\s]+\.[a-z_0-9]+"),
    "budget.": re.compile(r"budget\.[^.\s]+\.[a-z_0-9]+"),
    "sched.": re.compile(r"sched\.[a-z_0-9]+"),
    "tunnel.": re.compile(r"tunnel\.[^.\s]+\.[a-z_0-9]+"),
    "cpu": re.compile(r"cpu[0-9]+\.[a-z_]+"),
}
#: Strings that are a metric's name or family but not a metric there: iperf3's own JSON
#: field, a table's column heading, the JSON report's own field, and the ``tunnel.``
#: section of configuration paths (and of a hosts file's keys).
NOT_METRICS = {
    ("traffic/iperf3_json.py", "retransmits"),
    ("report/markdown.py", "retransmits"),
    ("report/json_report.py", "retransmits"),
    ("report/compare_markdown.py", "tunnel."),
    ("report/forum.py", "tunnel."),
    ("report/markdown.py", "tunnel."),
    ("report/pairing.py", "tunnel."),
    ("remote/hostsfile.py", "tunnel."),
}


def _metric_like(where: str, node: ast.AST, fixed: set[str]) -> str | None:
    """What of ``node`` writes a metric's name by hand: a fixed name, a whole patterned
    name, a family's bare prefix (``startswith("qdisc.")``), or an f-string that fills a
    family's placeholders (``f"cpu{core}.idle"``); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        if (where, text) in NOT_METRICS:
            return None
        if text in fixed or (text in METRIC_FAMILIES and text != "cpu"):
            return repr(text)
        if any(shape.fullmatch(text) for shape in METRIC_FAMILIES.values()):
            return repr(text)
    elif isinstance(node, ast.JoinedStr) and len(node.values) > 1:
        head, second = node.values[0], node.values[1]
        if not isinstance(head, ast.Constant) or (where, head.value) in NOT_METRICS:
            return None
        text = str(head.value)
        if text == "cpu":  # cpu{core} alone names a core to a reader; cpu{core}.part a metric
            third = node.values[2] if len(node.values) > 2 else None
            if isinstance(third, ast.Constant) and str(third.value).startswith("."):
                return f"f{text!r}..."
        elif (
            text.startswith(tuple(METRIC_FAMILIES))
            and isinstance(second, ast.FormattedValue)
            and (text in METRIC_FAMILIES or text.count(".") > 1)
        ):
            return f"f{text!r}..."
    return None


def test_metric_names_are_written_only_in_model_metrics():
    """A stored metric is named by :mod:`tunnelbench.model.metrics` alone: no module
    writes a fixed name as a literal string (a dict's key included), a whole patterned
    name, a family's prefix to match names by (``"qdisc."``), or an f-string filling a
    family's pattern (``f"link.{role}..."``, ``f"cpu{core}.idle"``), so a renamed or
    misspelt metric cannot read as absent."""
    from tunnelbench.model import metrics

    fixed = {m.name for m in vars(metrics).values() if isinstance(m, metrics.Metric)}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "model" / "metrics.py":
            continue
        where = str(path.relative_to(PACKAGE))
        tree = ast.parse(path.read_text(), str(path))
        # An f-string's literal pieces are judged with the f-string, not alone.
        pieces = {id(v) for j in ast.walk(tree) if isinstance(j, ast.JoinedStr) for v in j.values}
        for node in ast.walk(tree):
            if id(node) in pieces:
                continue
            if (what := _metric_like(where, node, fixed)) is not None:
                found.append(f"{where}:{getattr(node, 'lineno', '?')}: {what}")
    assert found == []


#: The longest a function in src/ may be, in lines (its docstring and nested functions
#: included): beyond it, a function does several things that deserve names of their own.
LONGEST_FUNCTION = 80


def _long_functions() -> list[str]:
    found = []
    for path in _modules():
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    found.append(f"{where}::{node.name} ({lines} lines)")
    return found


def test_few_functions_are_longer_than_a_screen():
    long = _long_functions()
    assert long == [], "split into named helpers: " + ", ".join(long)
