"""What the measured kernel could do, as a run's environment records it (``capabilities``).

The lab records its own kernel's (:func:`tunnelbench.bench.environment.capability_record`),
a hosts run the DUT's (:func:`tunnelbench.remote.capabilities.dut_record`, with ``where``
naming whose kernel); advice reads it, so that it never recommends what that kernel cannot
do. The JSON is the shape every version stored: sections left unset are not written, and
a section this version does not know is kept as it was.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Found:
    """One capability: ``ok`` True (there), False (``detail`` is the kernel's refusal) or
    None (it could not be probed, and ``detail`` says why)."""

    ok: bool | None
    detail: str | None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Found":
        return cls(data.get("ok"), data.get("detail"))


@dataclass(frozen=True)
class CongestionFound(Found):
    """The kernel's TCP congestion controls: those available, those it could load, and
    its default."""

    available: tuple[str, ...] = ()
    loadable: tuple[str, ...] = ()
    default: str | None = None

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {
            "available": list(self.available),
            "loadable": list(self.loadable),
            "default": self.default,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CongestionFound":
        return cls(
            data.get("ok"),
            data.get("detail"),
            tuple(data.get("available") or ()),
            tuple(data.get("loadable") or ()),
            data.get("default"),
        )


#: The sections of :class:`KernelCapabilities` that map a name to a :class:`Found`.
_SECTIONS = ("links", "qdiscs", "esp")


@dataclass(frozen=True)
class KernelCapabilities:
    """Per link kind, queue discipline and ESP algorithm whether the kernel has it,
    OpenVPN's data channel offload likewise, and the congestion controls; ``where``:
    whose kernel (None: the machine the lab ran on). A section None was not recorded."""

    where: str | None = None
    links: dict[str, Found] | None = None
    qdiscs: dict[str, Found] | None = None
    esp: dict[str, Found] | None = None
    openvpn_dco: Found | None = None
    congestion: CongestionFound | None = None
    #: Sections this version does not know, kept as they were stored (JSON).
    other: dict[str, Any] = field(default_factory=dict)

    def found(self, section: str, name: str) -> Found | None:
        """The capability at ``section`` and ``name`` (as a kind's facts store the path:
        ``("links", "wireguard")``, ``("esp", algorithm)``, ``("openvpn_dco", "")``);
        None where it was not recorded."""
        if section == "openvpn_dco":
            return self.openvpn_dco
        if section == "congestion":
            return self.congestion
        if section not in _SECTIONS:
            return None
        found: dict[str, Found] | None = getattr(self, section)
        return None if found is None else found.get(name)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.where is not None:
            out["where"] = self.where
        for name in _SECTIONS:
            section: dict[str, Found] | None = getattr(self, name)
            if section is not None:
                out[name] = {key: found.to_json() for key, found in section.items()}
        if self.openvpn_dco is not None:
            out["openvpn_dco"] = self.openvpn_dco.to_json()
        if self.congestion is not None:
            out["congestion"] = self.congestion.to_json()
        return out | self.other

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "KernelCapabilities":
        known = {"where", *_SECTIONS, "openvpn_dco", "congestion"}
        sections = {
            name: {key: Found.from_json(found) for key, found in data[name].items()}
            for name in _SECTIONS
            if isinstance(data.get(name), Mapping)
        }
        dco, congestion = data.get("openvpn_dco"), data.get("congestion")
        return cls(
            where=data.get("where"),
            **sections,
            openvpn_dco=Found.from_json(dco) if isinstance(dco, Mapping) else None,
            congestion=CongestionFound.from_json(congestion)
            if isinstance(congestion, Mapping)
            else None,
            other={
                k: v
                for k, v in data.items()
                if k not in known or (k != "where" and not isinstance(v, Mapping))
            },
        )
