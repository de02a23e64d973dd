"""``tunnelbench doctor``'s report as records: one row per capability, by section, and
how a VM guest it was collected in ran.

:mod:`tunnelbench.cli.doctor` builds it and renders it as a table; ``doctor --json``
prints :meth:`Report.to_json`, and a guest sends it to its host in that form
(:meth:`Report.from_json` reads it back there). The JSON's shape is documented: a row is
``{"status", "detail"}``, then its ``hint`` where it has one, then facts of its own.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tunnelbench.model.records import Where

#: A row's own facts (a program's path and version, OpenVPN's DCO, the online CPUs...).
Fact = str | int | bool | list[int] | list[str] | None

#: The keys of a row that are not facts of its own.
_ROW_KEYS = ("status", "detail", "hint")


@dataclass(frozen=True)
class Row:
    """One capability: ``yes``, ``no`` or ``not probed``, why, how to get it where it is
    missing (``hint``), and its facts."""

    status: str
    detail: str
    hint: str | None = None
    facts: dict[str, Fact] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "detail": self.detail}
        if self.hint is not None:
            out["hint"] = self.hint
        return out | self.facts

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Row":
        facts = {k: v for k, v in data.items() if k not in _ROW_KEYS}
        return cls(data["status"], data["detail"], data.get("hint"), facts)


@dataclass(frozen=True)
class VmRun:
    """How the guest the report was collected in ran: where (its kernel, QEMU's
    acceleration, its size), why not KVM, and how long it took to boot (guest time) and
    to answer (wall time)."""

    where: Where
    reason: str
    boot_s: float
    up_s: float

    def to_json(self) -> dict[str, Any]:
        return self.where.to_dict() | {
            "virtualization_reason": self.reason,
            "boot_s": self.boot_s,
            "up_s": self.up_s,
        }


@dataclass(frozen=True)
class Report:
    """The kernel's release, the rows by section (in the order they are printed) and,
    for a report collected in a VM guest, how that guest ran."""

    kernel: str
    sections: dict[str, dict[str, Row]]
    vm: VmRun | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kernel": self.kernel}
        for name, rows in self.sections.items():
            out[name] = {key: row.to_json() for key, row in rows.items()}
        if self.vm is not None:
            out["vm"] = self.vm.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Report":
        """A guest's report as it sent it (without ``vm``: the host adds that)."""
        sections = {
            name: {key: Row.from_json(row) for key, row in rows.items()}
            for name, rows in data.items()
            if name not in ("kernel", "vm")
        }
        return cls(data["kernel"], sections)
