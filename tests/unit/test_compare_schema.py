"""``compare --format json`` against its JSON Schema (docs/compare-schema.json): runs
against themselves, two databases, selections within a run, and pairs with the loaded
round trip's own test; and the schema refuses what it must."""

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from tests import cli_process
from tests.report_fixtures import RUNS

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "compare-schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

CASES = [
    ("l2-tunnel-mtu.db", "l2-tunnel-mtu.db"),
    ("l2-tunnel-mtu.db", "queue-comparison.db"),
    ("queue-comparison.db@lab.wan.queue_limit=50", "queue-comparison.db@lab.wan.queue_limit=1000"),
    ("tune-tiny-fifo.db@lab.wan.queue_limit=4", "tune-tiny-fifo.db@lab.wan.queue_limit=64"),
    ("streams-5-runs.db@traffic.streams=1", "streams-5-runs.db@traffic.streams=4"),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = tmp_path_factory.mktemp("compare-schema")
    for db in RUNS.glob("*.db"):
        shutil.copyfile(db, here / db.name)
    return here


def _compare(lab: Path, a: str, b: str) -> dict:
    done = cli_process.run(["compare", a, b, "--format", "json"], cwd=lab, timeout=120)
    assert done.returncode == 0, done.stderr
    document: dict = json.loads(done.stdout)
    return document


@pytest.mark.parametrize(("a", "b"), CASES)
def test_every_comparison_holds_to_the_schema(lab, a, b):
    document = _compare(lab, a, b)
    errors = [e.message for e in VALIDATOR.iter_errors(document)]
    assert errors == []
    assert document["pairs"]


def test_the_round_trips_are_tested_where_both_sides_have_them(lab):
    document = _compare(lab, *CASES[3])
    (pair,) = [p for p in document["pairs"] if p["a"] and p["b"]]
    assert pair["latency"]["verdict"] and pair["latency"]["p_value"] is not None
    assert pair["a"]["loaded_p95_ms"] and pair["b"]["loaded_p95_ms"]


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("pairs", 0, "ratio"), "1.0"),
        (("pairs", 0, "p_value"), 1.5),
        (("pairs", 0, "a", "status"), "fine"),
        (("a", "run_id"), 0),
        (("pairs", 0, "surprise"), 1),
        (("format_version",), 2),
    ],
)
def test_the_schema_refuses_a_wrong_document(lab, where, value):
    document = copy.deepcopy(_compare(lab, *CASES[0]))
    node = document
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    assert not VALIDATOR.is_valid(document)
