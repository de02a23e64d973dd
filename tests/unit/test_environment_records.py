"""The typed records inside a run's environment read back from what runs stored and write
the same JSON: the kernel's capabilities (the lab's own, and a DUT's asked over SSH), the
measurement lock (held alone, beside another run, with the runs that measured beside it)
and the hosts a run on real hosts measured. The fixtures are environments real runs
stored: the recorded runs' databases, a hosts run over SSH
(``environments/hosts-wireguard.json``) and two runs measured at once by
``tests/integration/test_concurrent_runs.py`` (``lab-beside``, ``lab-concurrent``)."""

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tunnelbench.kinds import TunnelKind, TunnelMode
from tunnelbench.model.capability_record import KernelCapabilities
from tunnelbench.model.environment import Environment
from tunnelbench.model.hostsrecord import RemoteRecord
from tunnelbench.model.lockrecord import LockMode, LockRecord, Measurer

CAPTURED = sorted((FIXTURES / "environments").glob("*.json"))
RUNS = sorted((FIXTURES / "runs").glob("*.db"))


def _stored(db: Path) -> list[str]:
    with closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as conn:
        return [row[0] for row in conn.execute("SELECT environment FROM runs") if row[0]]


ENVIRONMENTS = [
    pytest.param(text, id=f"{db.stem}-{i}") for db in RUNS for i, text in enumerate(_stored(db))
] + [pytest.param(path.read_text().strip(), id=path.stem) for path in CAPTURED]


@pytest.mark.parametrize("text", ENVIRONMENTS)
def test_a_stored_environment_is_written_back_byte_for_byte(text: str) -> None:
    data: dict[str, Any] = json.loads(text)
    environment = Environment.from_dict(data)
    assert json.dumps(environment.to_dict()) == json.dumps(data)
    if "capabilities" in data:
        assert isinstance(environment.capabilities, KernelCapabilities)
        assert environment.capabilities.to_json() == data["capabilities"]
        assert not environment.capabilities.other  # every section is declared
    if "measurement_lock" in data:
        assert isinstance(environment.measurement_lock, LockRecord)
        assert environment.measurement_lock.to_json() == data["measurement_lock"]
    if "remote" in data:
        assert isinstance(environment.remote, RemoteRecord)
        assert environment.remote.to_json() == data["remote"]


def _captured(name: str) -> Environment:
    return Environment.from_dict(json.loads((FIXTURES / "environments" / name).read_text()))


def test_a_duts_capabilities_name_its_kernel_and_what_it_lacks() -> None:
    record = _captured("hosts-wireguard.json").capabilities
    assert record is not None and record.where == "gw's kernel"
    found = record.found("links", "wireguard")
    assert found is not None and found.ok is False
    assert found.detail == "not found (no wireguard module for this kernel)"
    assert record.found("esp", "rfc4106(gcm(aes))") is None  # not asked: not recorded
    assert record.qdiscs is None and record.congestion is None


def test_the_labs_capabilities_read_as_fields() -> None:
    record = _captured("lab-beside.json").capabilities
    assert record is not None and record.where is None
    assert record.congestion is not None and "cubic" in record.congestion.available
    dco = record.found("openvpn_dco", "")
    assert dco is not None and dco is record.openvpn_dco


def test_the_lock_names_the_run_it_measured_beside_and_those_beside_it() -> None:
    beside = _captured("lab-concurrent.json").measurement_lock
    assert beside is not None and beside.mode is LockMode.NONE and beside.beside is None
    holder = beside.concurrent_with
    assert holder is not None and holder.command.endswith("/a.db")
    held = _captured("lab-beside.json").measurement_lock
    assert held is not None and held.mode is LockMode.EXCLUSIVE
    (other,) = held.beside or ()
    assert other.since > holder.since and "--allow-concurrent" in other.command
    # Told again of the same run, and of a new one: the same run is kept once.
    later = Measurer(other.pid + 1, 7, other.since + 1.5, "tunnelbench run")
    grown = held.with_beside((other, later))
    assert grown.beside == (other, later)
    assert LockRecord.from_json(grown.to_json()) == grown


@pytest.mark.parametrize(
    "line",
    ["null", "[]", '"text"', '{"pid": 1}', '{"pid": "1", "since": 0, "command": "x"}'],
)
def test_what_is_not_a_measurers_record_is_refused(line: str) -> None:
    with pytest.raises((KeyError, TypeError)):
        Measurer.from_json(json.loads(line))


def test_a_hosts_runs_record_reads_as_fields() -> None:
    remote = _captured("hosts-wireguard.json").remote
    assert remote is not None
    assert remote.hosts.dut == "gw" and remote.hosts.tunnel_mode is TunnelMode.BUILD
    assert remote.hosts.tunnel_kind is TunnelKind.WIREGUARD
    assert remote.hosts.hosts["server"].address == "198.18.1.2"
    assert remote.facts["server"].busybox and not remote.facts["gw"].busybox
    software = remote.facts["gw"].software
    assert software is not None and software.kernel_wireguard.startswith("not found")


def test_a_hosts_record_of_the_first_versions_shape_is_written_back_as_it_was() -> None:
    """The first hosts runs stored no trip points, software or tunnel protection: they
    read back without them and are written again without them."""
    data = json.loads((FIXTURES / "environments" / "hosts-wireguard.json").read_text())
    remote = data["remote"]
    del remote["hosts"]["tunnel_protection"]
    for facts in remote["facts"].values():
        del facts["trips_c"], facts["software"]
    record = RemoteRecord.from_json(remote)
    assert record.hosts.tunnel_protection is None and record.facts["gw"].software is None
    assert json.dumps(record.to_json()) == json.dumps(remote)


def test_a_remote_record_this_version_cannot_read_is_kept_as_it_was() -> None:
    data = {"kernel": "6.1.0", "remote": {"hosts": {"layout": "road-warrior"}}}
    environment = Environment.from_dict(data)
    assert environment.remote is None and environment.to_dict() == data
