"""The run's environment, declared once: every key a run's ``environment`` may hold,
with its type, unit and owner, and :class:`Environment`, the record read as fields.

As pyperf declares each metadata key of a benchmark run, every key is declared here
and nowhere else: a field of :class:`Environment` whose metadata names its unit, the
testbed or module that writes it (its owner) and what it means. Writers build an
:class:`Environment` (:meth:`Environment.with_keys`, in the order they write the keys)
and store :meth:`Environment.to_dict`; readers get the record
from :meth:`Environment.from_dict` (the store does it) and read its fields, never a
string key. The stored JSON keeps the shape older runs have: a record read back writes
the same keys in the same order, and keys this version does not declare are kept as
they were.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from tunnelbench.model.capability_record import KernelCapabilities
from tunnelbench.model.hostsrecord import RemoteRecord
from tunnelbench.model.lockrecord import LockRecord

#: The owners of the keys: the testbeds that describe the machine measured, and the
#: steps of a run that add to what they wrote.
LAB: Final = "lab"  # this machine, measured by the namespace lab (bench.environment)
GUEST: Final = "guest"  # a VM guest's own kernel and CPU (cli.guest, bench.guest_trials)
HOSTS: Final = "hosts"  # real hosts over SSH: the DUT's facts (remote.run)
RUN: Final = "run"  # the run itself: its lock, its guests (bench.runner, bench.store)

#: The key of the environments of the run's VM guests, by ``lab.kernel``.
GUESTS: Final = "guests"


@dataclass(frozen=True)
class Key:
    """One declared key: its name in the stored JSON, its Python type, unit, owners."""

    name: str
    type: str
    unit: str
    owners: tuple[str, ...]
    doc: str


def _key(doc: str, *owners: str, unit: str = "") -> dict[str, object]:
    """A declared key's metadata on its :class:`Environment` field (unset, None, unless
    an owner wrote it)."""
    return {"doc": doc, "owners": owners, "unit": unit}


@dataclass(frozen=True)
class Environment:
    """What a run recorded of where it ran. Every field is optional: a testbed writes
    what it can know (a black-box router has no kernel), and older runs lack newer keys.
    The declaration order is the order a new record is stored in."""

    dut: str | None = field(default=None, metadata=_key("a DUT without a login: what it is", HOSTS))
    system: str | None = field(
        default=None, metadata=_key("a black box's own description, from its SNMP agent", HOSTS)
    )
    kernel: str | None = field(
        default=None, metadata=_key("the measured machine's kernel release", LAB, GUEST, HOSTS)
    )
    cpu_model: str | None = field(
        default=None, metadata=_key("the measured machine's CPU model", LAB, GUEST)
    )
    cores: int | None = field(
        default=None, metadata=_key("the measured machine's cores", LAB, GUEST, HOSTS, unit="cores")
    )
    kernel_build: str | None = field(
        default=None, metadata=_key("the kernel's build string (uname -v)", LAB, GUEST)
    )
    machine: str | None = field(
        default=None, metadata=_key("the architecture (uname -m)", LAB, GUEST, HOSTS)
    )
    cpu_flags: tuple[str, ...] | None = field(
        default=None, metadata=_key("the first CPU's feature flags", LAB, GUEST)
    )
    cpu_governor: str | None = field(
        default=None, metadata=_key("cpu0's frequency governor", LAB, GUEST, HOSTS)
    )
    python: str | None = field(
        default=None, metadata=_key("the Python that ran tunnelbench", LAB, GUEST)
    )
    tunnelbench: str | None = field(
        default=None, metadata=_key("tunnelbench's version", LAB, GUEST, HOSTS)
    )
    iproute2: str | None = field(default=None, metadata=_key("ip -V", LAB, GUEST))
    versions: dict[str, str] | None = field(
        default=None,
        metadata=_key(
            "each implementation (kind/implementation) and generator resolved, by version",
            LAB,
            GUEST,
            HOSTS,
        ),
    )
    capabilities: KernelCapabilities | None = field(
        default=None,
        metadata=_key(
            "what the kernel can do that advice depends on (links, qdiscs, ESP, congestion)",
            LAB,
            GUEST,
            HOSTS,
        ),
    )
    remote: RemoteRecord | None = field(
        default=None,
        metadata=_key(
            "real hosts: the hosts file, each role's facts, the controlling machine", HOSTS
        ),
    )
    measurement_lock: LockRecord | None = field(
        default=None,
        metadata=_key(
            "how the run held the measurement lock, and which runs measured beside it", RUN
        ),
    )
    guests: dict[str, "Environment"] | None = field(
        default=None, metadata=_key("the environments of the run's VM guests, by lab.kernel", RUN)
    )
    # A VM guest's own record (under ``guests``): where its trials ran (model.records.Where).
    kernel_release: str | None = field(
        default=None, metadata=_key("the guest's kernel release", GUEST)
    )
    virtualization: str | None = field(
        default=None, metadata=_key("none, kvm or tcg (QEMU emulates the CPU)", GUEST)
    )
    kernel_package: str | None = field(
        default=None, metadata=_key("the Debian package the guest's kernel came from", GUEST)
    )
    virtualization_reason: str | None = field(
        default=None, metadata=_key("why the guest is not under KVM", GUEST)
    )
    vm_cpus: int | None = field(
        default=None, metadata=_key("the guest's vCPUs", GUEST, unit="vCPUs")
    )
    vm_memory_mib: int | None = field(
        default=None, metadata=_key("the guest's memory", GUEST, unit="MiB")
    )
    #: Keys this version does not declare, kept as they were stored.
    other: dict[str, Any] = field(default_factory=dict)
    #: The stored order of the keys, so that a record read and written back is the same.
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Environment":
        declared = {k.name for k in KEYS}
        values: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for name, value in data.items():
            if name not in declared:
                other[name] = value
            elif name == GUESTS and isinstance(value, Mapping):
                values[name] = {spec: cls.from_dict(facts) for spec, facts in value.items()}
            elif name == "cpu_flags" and isinstance(value, list):
                values[name] = tuple(value)
            elif name == "capabilities" and isinstance(value, Mapping):
                values[name] = KernelCapabilities.from_json(value)
            elif name == "measurement_lock" and isinstance(value, Mapping):
                values[name] = LockRecord.from_json(value)
            elif name == "remote":
                try:
                    values[name] = RemoteRecord.from_json(value)
                except (KeyError, TypeError, ValueError, AttributeError):
                    other[name] = value  # not a record this version reads: kept as is
            else:
                values[name] = value
        return cls(**values, other=other, order=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON: the keys read back in their order (unset ones too, as they
        were stored), then the keys set since, in declaration order."""
        out: dict[str, Any] = {}
        for name in self.order:
            out[name] = self._stored(name)
        for key in KEYS:
            if key.name not in out and getattr(self, key.name) is not None:
                out[key.name] = self._stored(key.name)
        return out | {k: v for k, v in self.other.items() if k not in out}

    def _stored(self, name: str) -> Any:
        if name in self.other:
            return self.other[name]
        value = getattr(self, name)
        if name == GUESTS and value is not None:
            return {spec: facts.to_dict() for spec, facts in value.items()}
        if name == "cpu_flags" and value is not None:
            return list(value)
        if isinstance(value, KernelCapabilities | LockRecord | RemoteRecord):
            return value.to_json()
        return value

    def guest(self, spec: str) -> "Environment | None":
        """The environment of the VM guest of ``lab.kernel = spec``; None where none ran."""
        return (self.guests or {}).get(spec)

    def with_keys(self, **values: Any) -> "Environment":
        """This record with ``values`` written, after its keys in the order given: a
        key written stays in the stored JSON even where its value is unknown (null), as
        the report schema documents ``cores`` and ``cpu_governor``."""
        added = tuple(k for k in values if k not in self.order)
        return replace(self, **values, order=self.order + added)

    def same_machine(self, other: "Environment") -> bool:
        """Whether both records describe one machine: its kernel, CPU model and cores."""
        mine = (self.kernel, self.cpu_model, self.cores)
        return mine == (other.kernel, other.cpu_model, other.cores)


#: Every declared key, in the order a new record stores them.
KEYS: Final = tuple(
    Key(f.name, str(f.type), f.metadata["unit"], f.metadata["owners"], f.metadata["doc"])
    for f in fields(Environment)
    if "owners" in f.metadata
)
