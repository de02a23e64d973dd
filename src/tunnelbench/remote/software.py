"""Which tunnel software a real host has, and its version.

The implementation decides the figure (Debian's wireguard-go gave 208 Mbit/s where a
2026 build gave 945-1,023 on the same hosts), so a run records, per host, what each
daemon says of itself, what a tunnelbench-built binary was built from (the
``<program>.version`` its install script writes beside it: wireguard-go prints only its
last release tag), the package that installed it (dpkg on Debian, opkg on OpenWrt) and
its path; and whether the kernel has WireGuard. All read-only, with busybox's tools.
"""

from dataclasses import dataclass, field
from enum import StrEnum

from tunnelbench.kinds import TunnelKind
from tunnelbench.model.hostsrecord import SoftwareRecord
from tunnelbench.system.probing import PROBE_DEVICE
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.wireguard import USERSPACE

#: The daemons (and the tool that configures WireGuard) whose versions are recorded.
PROGRAMS = ("wireguard-go", "boringtun-cli", "openvpn", "wg", strongswan.CHARON)

#: The programs whose presence (and path) a host's facts list: the generators', the
#: userspace WireGuard's, ``tc``, and what each kind tunnelbench builds on hosts runs at
#: its ends.
HOST_PROGRAMS = tuple(
    dict.fromkeys(
        ("iperf3", "iperf", "wireguard-go", "tc")
        + tuple(
            p
            for k in TUNNELS.kinds()
            if TUNNELS.get(k).anywhere
            for p in TUNNELS.get(k).end_programs()
        )
    )
)

#: Lines ``version|pinned|package <program> ...`` and ``wgmodule <state> [version]``.
SCRIPT = (
    f"for p in {' '.join(PROGRAMS)}; do"
    + r"""
  w=$(command -v "$p" 2>/dev/null) || continue
  echo "path $p $w"
  v=$("$w" --version 2>&1)
  echo "version $p $(echo "$v" | head -n 1)"
  l=$(echo "$v" | grep 'library versions' | head -n 1)
  [ -n "$l" ] && echo "library $p $l"
  [ -r "$w.version" ] && echo "pinned $p $(head -n 1 "$w.version")"
  if command -v dpkg-query >/dev/null 2>&1; then
    k=$(dpkg-query -S "$w" 2>/dev/null | head -n 1); k=${k%%:*}
    [ -n "$k" ] && echo "package $p $k $(dpkg-query -W -f='${Version}' "$k" 2>/dev/null)"
  elif command -v opkg >/dev/null 2>&1; then
    k=$(opkg search "$w" 2>/dev/null | head -n 1)
    [ -n "$k" ] && echo "package $p ${k%% - *} ${k##* - }"
  fi
done
if [ -d /sys/module/wireguard ]; then
  echo "wgmodule loaded $(cat /sys/module/wireguard/version 2>/dev/null)"
elif [ -n "$(find "/lib/modules/$(uname -r)" -name 'wireguard.ko*' 2>/dev/null | head -n 1)" ]
then
  echo "wgmodule available"
else
  echo "wgmodule none"
fi
"""
)

#: The kinds tunnelbench builds on a host through the lab's code (besides WireGuard):
#: kind -> (its kernel module, the link type ``ip link add`` is given).
BUILT_KINDS: dict[str, tuple[str, str]] = {
    kind.value: (module, probe[0])
    for kind in TUNNELS.kinds()
    if kind is not TunnelKind.WIREGUARD  # userspace where the kernel has none: told apart above
    and TUNNELS.get(kind).anywhere
    and (module := TUNNELS.get(kind).kernel_module) is not None
    and (probe := TUNNELS.get(kind).link_probe()) is not None
}

#: kind -> what ``ip link add DEVICE type ...`` is given to probe its kernel link.
LINK_PROBES: dict[str, tuple[str, ...]] = {
    kind: (probe[0], *probe[1])
    for kind in BUILT_KINDS
    if (probe := TUNNELS.get(TunnelKind(kind)).link_probe()) is not None
}


def _variable(module: str) -> str:
    return "km_" + module.replace("-", "_")


#: Lines ``kmodule <module> loaded|available|none`` for those kinds' modules, ``iplinks
#: <ip link help>`` (iproute2 lists the link types it can create; busybox's ``ip`` none)
#: and ``ipversion <ip -V>`` (iproute2 names itself; busybox's ``ip`` refuses -V). Where
#: a kind's module is found nowhere (built in, or absent: /sys/module lists a built-in
#: module only when it has parameters), ``klink <kind> ok|refused <ip's words>``: its
#: link made by iproute2's ``ip`` in a network namespace of its own (``unshare -n``),
#: which ends with the command and so takes the link with it; nothing can be loaded, as
#: there is no module file.
SCRIPT += (
    f"for m in {' '.join(sorted({m for m, _ in BUILT_KINDS.values()}))}; do\n"
    + r"""  if [ -d "/sys/module/$m" ]; then s=loaded
  elif [ -n "$(find "/lib/modules/$(uname -r)" -name "$m.ko*" 2>/dev/null | head -n 1)" ]
  then s=available
  else s=none; fi
  echo "kmodule $m $s"; eval "km_$(echo "$m" | tr - _)=$s"
done
echo "iplinks $(ip link help 2>&1 | tr '\n' ' ')"
echo "ipversion $(ip -V 2>&1 | head -n 1)"
probing=no
case "$(ip -V 2>&1)" in
  *iproute2*) command -v unshare >/dev/null 2>&1 && unshare -n true 2>/dev/null && probing=yes;;
esac
"""
    + "".join(
        f'if [ "$probing" = yes ] && [ "${_variable(BUILT_KINDS[kind][0])}" = none ]; then\n'
        f"  if r=$(unshare -n ip link add {PROBE_DEVICE} type {' '.join(argv)} 2>&1); then"
        f' echo "klink {kind} ok"\n'
        f'  else echo "klink {kind} refused $(echo "$r" | head -n 1)"; fi\n'
        "fi\n"
        for kind, argv in LINK_PROBES.items()
    )
)

#: The words a ``klink`` line begins with.
LINK_VERDICTS = ("ok", "refused")


class ModuleState(StrEnum):
    """A kernel module as :data:`SCRIPT` finds it: loaded (or built in), a module not
    loaded yet, or not found."""

    LOADED = "loaded"
    AVAILABLE = "available"
    NONE = "none"


#: The kernel's WireGuard module (its state among :attr:`Software.modules`).
WIREGUARD_MODULE = "wireguard"
#: The states :data:`SCRIPT` writes, and those in which the kernel has the module.
STATES = frozenset(m.value for m in ModuleState)
HAS = (ModuleState.LOADED, ModuleState.AVAILABLE)

#: What a tunnelbench-built binary's ``.version`` file completes ("built from ...").
BUILT_FROM = {d.program: d.built_from for d in USERSPACE.values() if d.built_from}


@dataclass
class Program:
    path: str
    version: str = ""  # the first line of its ``--version``
    #: Its ``library versions:`` line, where it prints one (OpenVPN: its crypto
    #: library's release, which its data channel's speed depends on).
    library: str = ""
    pinned: str = ""  # the content of ``<path>.version``
    package: str = ""  # "<name> <version>" of the package that installed it

    def describe(self, name: str) -> str:
        """``wireguard-go v0.0.20250522, built from golang.zx2c4.com/wireguard@v0.0.0-...
        (/usr/local/bin/wireguard-go)``, as the lab records its own."""
        parts = [self.version or "unknown version"]
        if self.library:
            parts.append(self.library)
        if self.pinned:
            parts.append(f"built from {BUILT_FROM.get(name, '')}{self.pinned}")
        if self.package:
            parts.append(f"package {self.package}")
        return f"{', '.join(parts)} ({self.path})"


@dataclass
class Software:
    programs: dict[str, Program] = field(default_factory=dict)
    wireguard_module_version: str = ""
    #: module -> its state, for BUILT_KINDS and WireGuard (:data:`WIREGUARD_MODULE`);
    #: a module missing was not looked at.
    modules: dict[str, ModuleState] = field(default_factory=dict)
    #: The link types the host's ``ip`` lists (None: it lists none it could be asked for).
    ip_link_types: frozenset[str] | None = None
    ip_version: str = ""
    #: kind -> None where a probe made its kernel link, else the kernel's refusal (only
    #: the kinds whose module is found nowhere are probed).
    links: dict[str, str | None] = field(default_factory=dict)

    def parse_line(self, key: str, rest: str) -> bool:
        """Take one line of :data:`SCRIPT`'s output; whether it was one."""
        name, _, value = rest.partition(" ")
        value = value.strip()
        if key == "path" and name in PROGRAMS:
            self.programs[name] = Program(value)
        elif key in ("version", "library", "pinned", "package") and name in self.programs:
            setattr(self.programs[name], key, value)
        elif key == "wgmodule" and name in STATES:
            self.modules[WIREGUARD_MODULE] = ModuleState(name)
            self.wireguard_module_version = value
        elif key == "kmodule" and value in STATES:
            self.modules[name] = ModuleState(value)
        elif key == "iplinks":
            self.ip_link_types = link_types(rest)
        elif key == "ipversion":
            self.ip_version = rest.strip()
        elif key == "klink" and name in BUILT_KINDS and value.partition(" ")[0] in LINK_VERDICTS:
            verdict, _, why = value.partition(" ")
            self.links[name] = None if verdict == "ok" else why.strip() or "refused"
        else:
            return False
        return True

    def can_build(self, kind: str) -> tuple[bool | None, str]:
        """Whether this host can create ``kind``'s link (None: cannot tell) and why, in
        words: its ``ip`` (iproute2 lists the link types it creates; busybox's ``ip``
        creates none of these) and the kernel module (loaded or built in, a module not
        loaded yet, or not found: a module built in without parameters has no
        /sys/module entry, so "not found" is not a refusal)."""
        module, link_type = BUILT_KINDS[kind]
        state = self.modules.get(module)
        words = {
            ModuleState.LOADED: f"module {module} loaded or built in",
            ModuleState.AVAILABLE: f"module {module} available (loaded on first use)",
            ModuleState.NONE: f"module {module} not found",
            None: f"module {module} not looked at",
        }[state]
        if self.ip_version and "iproute2" not in self.ip_version:
            why = f"ip is not iproute2's (busybox's cannot create {link_type} links)"
            return False, f"{words}; {why}"
        if self.ip_link_types is not None and link_type not in self.ip_link_types:
            return False, f"{words}; this ip cannot create {link_type} links"
        if state in HAS:
            return True, words
        if kind in self.links:
            if (refusal := self.links[kind]) is None:
                return True, f"{words}; built in (a probe made a link of type {link_type})"
            return False, f"{words}; the kernel refused a link of type {link_type}: {refusal}"
        return None, words

    def kernel_refused(self, kind: str) -> bool:
        """Whether a probe found the kernel refusing ``kind``'s link."""
        return self.links.get(kind, None) is not None

    @property
    def wireguard_module(self) -> ModuleState | None:
        """The kernel's WireGuard module; None where it was not looked at."""
        return self.modules.get(WIREGUARD_MODULE)

    def has_module(self, name: str) -> bool:
        """Whether the kernel has module ``name``, loaded (or built in) or to be loaded."""
        return self.modules.get(name) in HAS

    def describe(self, name: str) -> str | None:
        program = self.programs.get(name)
        return program.describe(name) if program else None

    def kernel_wireguard(self) -> str:
        """The kernel's WireGuard, in words."""
        match self.wireguard_module:
            case ModuleState.LOADED:
                version = self.wireguard_module_version
                return f"loaded or built in{f' (version {version})' if version else ''}"
            case ModuleState.AVAILABLE:
                return "available as a module (not loaded)"
            case ModuleState.NONE:
                return "not found (no wireguard module for this kernel)"
            case None:
                return "not looked at"

    def record(self) -> SoftwareRecord:
        return SoftwareRecord(
            {name: self.describe(name) for name in self.programs}, self.kernel_wireguard()
        )


def link_types(text: str) -> frozenset[str] | None:
    """The types in iproute2's ``TYPE := { amt | bareudp | ... }`` (``ip link help``);
    None where the text has no such list (busybox's ``ip``, an error)."""
    start = text.find("TYPE :=")
    if start < 0:
        return None
    inside = text[start:].partition("{")[2].partition("}")[0]
    return frozenset(t.strip() for t in inside.split("|") if t.strip())
