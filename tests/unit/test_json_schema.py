"""The JSON report validates against docs/report-schema.json, and the schema documents
every field: each configuration setting of the plan, each enumeration value, each
property with a description."""

import dataclasses
import json
import sqlite3
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.report_fixtures import RECORDED, recorded, wide
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.tuning import (
    Candidate,
    End,
    Excluded,
    Outcome,
    Step,
    Target,
    TuneRecord,
)
from tunnelbench.report import json_report, view
from tunnelbench.tunnels import REGISTRY as TUNNELS

SCHEMA_PATH = Path(__file__).parents[2] / "docs" / "report-schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def validate(document: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(document)


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["format_version"]["const"] == json_report.FORMAT_VERSION


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_runs_validate(name, tmp_path):
    store = recorded(name, tmp_path)
    document = json.loads(json_report.render(view.load(store, "latest")))
    validate(document)
    # The numbers are the store's.
    trials = {t.id: t for t in store.trials(document["run"]["id"])}
    runs = [r for c in document["configurations"] for r in c["runs"]]
    assert sorted(r["trial_id"] for r in runs) == sorted(trials)
    for r in runs:
        assert r["metrics"] == trials[r["trial_id"]].metrics
        assert r["resolved"] == trials[r["trial_id"]].resolved.to_dict()
    # One finding per configuration's verdict and further findings, each about one key.
    keys = {c["key"] for c in document["configurations"] if c["diagnosis"] is not None}
    assert {f["configurations"][0] for f in document["findings"]} == keys
    expected = [
        bound
        for c in document["configurations"]
        if c["diagnosis"] is not None
        for bound in [c["diagnosis"]["verdict"]["bound"]]
        + [o["bound"] for o in c["diagnosis"]["others"]]
    ]
    assert [f["kind"] for f in document["findings"]] == expected
    # The shaped queue-comparison run is link-bound throughout (99.9% of the ceiling);
    # the unshaped L2 run's single-stream sender was pegged (generator-bound).
    assert (
        set(expected)
        == {"queue-comparison": {"link-bound"}, "l2-tunnel-mtu": {"generator-bound"}}[name]
    )


def test_skipped_configurations_carry_their_reason(tmp_path):
    document = json.loads(
        json_report.render(view.load(recorded("queue-comparison", tmp_path), "1"))
    )
    skipped = [c for c in document["configurations"] if c["status"] == "skipped"]
    assert len(skipped) == 8
    assert all("not available in this kernel" in c["skip_reason"] for c in skipped)
    assert all(r["error"] == c["skip_reason"] for c in skipped for r in c["runs"])
    assert document["run"]["trial_counts"] == {"planned": 48, "ok": 24, "failed": 0, "skipped": 24}
    experiment = document["run"]["experiment"]
    assert (experiment["order"], experiment["seed"], experiment["repetitions"]) == (
        "interleaved",
        None,
        3,
    )


def test_failed_trials_and_partial_configurations_validate(tmp_path):
    """A test-local copy of the L2 run, altered: one vxlan trial failed, and every trial
    of the other vxlan configuration failed."""
    store = recorded("l2-tunnel-mtu", tmp_path)
    db = sqlite3.connect(store.path)
    with db:
        failed = db.execute(
            "SELECT id FROM trials WHERE seq = 2 OR config_key ="
            " (SELECT config_key FROM trials WHERE seq = 4)"
        ).fetchall()
        for (trial_id,) in failed:
            db.execute("UPDATE trials SET status='failed', error='broke' WHERE id=?", (trial_id,))
            db.execute("DELETE FROM metrics WHERE trial_id = ?", (trial_id,))
    db.close()
    document = json.loads(json_report.render(view.load(store, "1")))
    validate(document)
    statuses = [c["status"] for c in document["configurations"]]
    assert statuses == ["ok", "partial", "ok", "failed"]
    assert document["configurations"][3]["goodput_mbit"] is None


def test_a_fifty_configuration_run_validates(tmp_path):
    validate(json.loads(json_report.render(view.load(wide(tmp_path), "1"))))


def _schema_object(definition: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in definition:
        definition = SCHEMA["$defs"][definition["$ref"].split("/")[-1]]
    return definition


def _check_fields(cls: type, definition: dict[str, Any], path: str) -> None:
    definition = _schema_object(definition)
    fields = {f.name for f in dataclasses.fields(cls)}
    assert set(definition["properties"]) == fields, path
    hints = typing.get_type_hints(cls)
    for field in fields:
        hint = hints[field]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = args[0] if args else hint
        prop = definition["properties"][field]
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            _check_fields(inner, prop, f"{path}.{field}")
        elif isinstance(inner, type) and issubclass(inner, Enum):
            allowed = {v for v in prop["enum"] if v is not None}
            assert allowed == {m.value for m in inner}, f"{path}.{field}"


def test_the_schema_documents_every_plan_setting_and_its_values():
    """A setting or an enumeration value added to the plan must be added to the schema
    (the report writes every setting)."""
    _check_fields(TrialConfig, SCHEMA["$defs"]["config"], "config")


def _properties(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        for name, prop in node.get("properties", {}).items():
            found.append((f"{path}.{name}", prop))
            found += _properties(prop, f"{path}.{name}")
        for name, definition in node.get("$defs", {}).items():
            found.append((f"$defs.{name}", definition))
            found += _properties(definition, f"$defs.{name}")
    return found


def test_every_property_is_described_and_strict_objects_require_all():
    for path, prop in _properties(SCHEMA):
        assert "description" in _schema_object(prop) or "description" in prop, path
        if prop.get("additionalProperties") is False and "properties" in prop:
            assert set(prop["required"]) == set(prop["properties"]), path


def test_goodput_summaries_carry_the_median_interval_and_consistency(tmp_path):
    document = json.loads(json_report.render(view.load(recorded("l2-tunnel-mtu", tmp_path), "1")))
    none_1500 = document["configurations"][0]["goodput_mbit"]
    # Runs: 12,419.5 14,262.0 13,304.1 Mbit/s. With 3 values a resampled median is the
    # smallest one with probability 7/27 (> 2.5%), so the 95% interval is the whole range.
    assert none_1500["median_ci95"] == pytest.approx([12419.549347, 14262.037837])
    # mean 13,328.6; squared deviations 826,317 + 871,366 + 598 = 1,698,281; / 2 -> sd
    # 921.5; CV 6.9%: between 5% and 10%.
    assert none_1500["cv"] == pytest.approx(0.0691, abs=1e-4)
    assert none_1500["consistency"] == "variable"


def test_the_schemas_tunnel_kinds_are_the_registrys():
    """The published schema names every registered kind (it is a document for users,
    so it is checked against the registry rather than generated at run time)."""
    kinds = SCHEMA["$defs"]["config"]["properties"]["tunnel"]["properties"]["kind"]["enum"]
    assert kinds == [k.value for k in TUNNELS.kinds()]


def test_the_schema_documents_every_field_of_a_tuning_sessions_record():
    """A field added to the tuning record must be added to the schema's tune section."""
    parts: list[tuple[type, str]] = [(Step, "tune_step"), (Candidate, "tune_candidate")]
    for cls, name in [*parts, (Excluded, "tune_excluded")]:
        definition = SCHEMA["$defs"][name]
        assert set(definition["properties"]) == {f.name for f in dataclasses.fields(cls)}
        assert set(definition["required"]) == set(definition["properties"])
    outcome = SCHEMA["$defs"]["tune_candidate"]["properties"]["outcome"]
    assert outcome["enum"] == [o.value for o in Outcome]
    fields = {f.name for f in dataclasses.fields(TuneRecord)} | {"headline", "plan"}
    assert set(SCHEMA["$defs"]["tune"]["properties"]) == fields
    assert SCHEMA["$defs"]["tune"]["properties"]["target"]["enum"] == [t.value for t in Target]
    assert SCHEMA["$defs"]["tune"]["properties"]["end"]["enum"] == [e.value for e in End] + [None]
