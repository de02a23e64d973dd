"""Which tunnel software a real host has, and its version.

The implementation decides the figure (Debian's wireguard-go gave 208 Mbit/s where a
2026 build gave 945-1,023 on the same hosts), so a run records, per host, what each
daemon says of itself, what a tunnelbench-built binary was built from (the
``<program>.version`` its install script writes beside it: wireguard-go prints only its
last release tag), the package that installed it (dpkg on Debian, opkg on OpenWrt) and
its path; and whether the kernel has WireGuard. All read-only, with busybox's tools.
"""

from dataclasses import dataclass, field

from tunnelbench.tunnels.wireguard import USERSPACE

#: The daemons (and the tool that configures WireGuard) whose versions are recorded.
PROGRAMS = ("wireguard-go", "boringtun-cli", "openvpn", "wg")

#: Lines ``version|pinned|package <program> ...`` and ``wgmodule <state> [version]``.
SCRIPT = r"""
for p in wireguard-go boringtun-cli openvpn wg; do
  w=$(command -v "$p" 2>/dev/null) || continue
  echo "path $p $w"
  echo "version $p $("$w" --version 2>&1 | head -n 1)"
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

#: What a tunnelbench-built binary's ``.version`` file completes ("built from ...").
BUILT_FROM = {d.program: d.built_from for d in USERSPACE.values() if d.built_from}


@dataclass
class Program:
    path: str
    version: str = ""  # the first line of its ``--version``
    pinned: str = ""  # the content of ``<path>.version``
    package: str = ""  # "<name> <version>" of the package that installed it

    def describe(self, name: str) -> str:
        """``wireguard-go v0.0.20250522, built from golang.zx2c4.com/wireguard@v0.0.0-...
        (/usr/local/bin/wireguard-go)``, as the lab records its own."""
        parts = [self.version or "unknown version"]
        if self.pinned:
            parts.append(f"built from {BUILT_FROM.get(name, '')}{self.pinned}")
        if self.package:
            parts.append(f"package {self.package}")
        return f"{', '.join(parts)} ({self.path})"


@dataclass
class Software:
    programs: dict[str, Program] = field(default_factory=dict)
    #: ``loaded`` (or built in), ``available`` (a module not loaded yet), ``none``; None:
    #: not looked at.
    wireguard_module: str | None = None
    wireguard_module_version: str = ""

    def parse_line(self, key: str, rest: str) -> bool:
        """Take one line of :data:`SCRIPT`'s output; whether it was one."""
        name, _, value = rest.partition(" ")
        value = value.strip()
        if key == "path" and name in PROGRAMS:
            self.programs[name] = Program(value)
        elif key in ("version", "pinned", "package") and name in self.programs:
            setattr(self.programs[name], key, value)
        elif key == "wgmodule" and name in ("loaded", "available", "none"):
            self.wireguard_module, self.wireguard_module_version = name, value
        else:
            return False
        return True

    def describe(self, name: str) -> str | None:
        program = self.programs.get(name)
        return program.describe(name) if program else None

    def kernel_wireguard(self) -> str:
        """The kernel's WireGuard, in words."""
        if self.wireguard_module == "loaded":
            version = self.wireguard_module_version
            return f"loaded or built in{f' (version {version})' if version else ''}"
        if self.wireguard_module == "available":
            return "available as a module (not loaded)"
        if self.wireguard_module == "none":
            return "not found (no wireguard module for this kernel)"
        return "not looked at"

    def to_dict(self) -> dict[str, object]:
        return {
            "programs": {name: self.describe(name) for name in self.programs},
            "kernel_wireguard": self.kernel_wireguard(),
        }
