"""The package's architecture, checked: folders in layers, imports only downwards.

Each folder is a layer; a module may import from its own layer and the layers below it,
never from one above, so that what is below can be read, tested and reused (by a VM guest
or an SSH host later) without what is above. Function-local imports of the package are
refused too: they are how a cycle hides. The top level holds only the ground floor.
"""

import ast
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


#: The patterned metric families, built only by model/metrics' functions.
METRIC_FAMILIES = ("link.", "qdisc.", "tcp.", "proc.", "remote.", "thermal.", "snmp.")
#: Strings that are a metric's name but not a metric there: iperf3's own JSON field, a
#: table's column heading.
NOT_METRICS = {
    ("traffic/iperf3_json.py", "retransmits"),
    ("report/markdown.py", "retransmits"),
}


def test_metric_names_are_written_only_in_model_metrics():
    """A stored metric is named by :mod:`tunnelbench.model.metrics` alone: no module
    writes a fixed name as a literal string, or begins a patterned one (``link.``,
    ``tcp.``...) in an f-string, so a renamed or misspelt metric cannot read as absent."""
    from tunnelbench.model import metrics

    fixed = {m.name for m in vars(metrics).values() if isinstance(m, metrics.Metric)}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "model" / "metrics.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        # A report's own JSON keys name figures, not stored metrics.
        keys = {id(k) for d in ast.walk(tree) if isinstance(d, ast.Dict) for k in d.keys if k}
        for node in ast.walk(tree):
            where = str(path.relative_to(PACKAGE))
            if id(node) in keys or (where, getattr(node, "value", None)) in NOT_METRICS:
                continue
            if isinstance(node, ast.Constant) and node.value in fixed:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.JoinedStr) and node.values:
                head = node.values[0]
                if isinstance(head, ast.Constant) and str(head.value).startswith(METRIC_FAMILIES):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: f{head.value!r}...")
    assert found == []
