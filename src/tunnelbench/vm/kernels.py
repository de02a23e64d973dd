"""Kernels a lab can boot: ``lab.kernel`` read, fetched and unpacked into a cache.

A kernel is named by a Debian package (``linux-image-6.1.0-56-amd64``, a release such as
``6.1.0-56-amd64``, or ``debian``: whatever ``linux-image-amd64`` depends on in the
configured apt sources) or by the path of a directory holding an unpacked kernel
(``boot/vmlinuz-RELEASE`` and ``lib/modules/RELEASE``). A package is fetched with
``apt-get download`` and unpacked with ``dpkg-deb -x`` into the cache, never installed:
the host's ``/boot`` and ``/lib/modules`` stay as they are, and the guest sees the
modules from the cache (:mod:`tunnelbench.vm.machine`). Each package version is fetched
once and reused.

virtme-ng takes the paths it shares with the guest only when they are made of letters,
digits and ``_+ /.-``: a Debian version holds ``~`` (``6.12.57-1~bpo12+1``) and may
hold an epoch's ``:``, so a cache entry is named with those escaped
(:func:`entry_name`), and a kernel whose paths still hold another character (the cache
root, a directory given as ``lab.kernel``) is refused before a guest is booted.
"""

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.echo import shown
from tunnelbench.errors import UserError
from tunnelbench.model.kernelspec import (
    ALLOWED,
    DEBIAN,
    DEBIAN_META_PACKAGE,
    PACKAGE,
    parse_spec,
)
from tunnelbench.model.plan import HOST_KERNEL
from tunnelbench.system import programs
from tunnelbench.system.command import CommandError, run

#: Marks a cache entry as complete: written last, after depmod.
COMPLETE = ".complete"
#: Seconds allowed for the download of one kernel package (~70 MB).
DOWNLOAD_TIMEOUT_S = 600.0
#: What virtme-ng accepts in a path it shares with the guest (``--rodir``, ``--rwdir``:
#: its ``_SAFE_PATH_PATTERN``); it refuses anything else, and the guest never boots.
VNG_SAFE_PATH = re.compile(r"[a-zA-Z0-9_+ /.-]+")
#: Debian package names and versions never hold ``_``, so ``_`` and two hex digits
#: escape a character virtme-ng refuses without ever meeting another entry's name.
_UNSAFE_IN_NAME = re.compile(r"[^a-zA-Z0-9+.-]")


def cache_root() -> Path:
    """Where kernels are unpacked: outside the checkout, shared by every clone."""
    return Path(os.environ.get("TUNNELBENCH_KERNEL_CACHE", "/var/cache/tunnelbench/kernels"))


@dataclass(frozen=True)
class Kernel:
    """A kernel ready to boot: its image, its modules' tree and where it came from."""

    spec: str
    release: str
    image: Path
    #: The directory the guest mounts as ``/lib/modules`` (holds ``RELEASE/``).
    modules: Path
    package: str | None = None
    version: str | None = None

    def package_line(self) -> str | None:
        """``package=version`` of a kernel fetched from Debian; None for one given as a
        path."""
        if self.package is not None and self.version is not None:
            return f"{self.package}={self.version}"
        return None


def locate(spec: str) -> Kernel:
    """The kernel ``spec`` names, fetched and unpacked if it is a package not cached yet.

    Raises :class:`UserError` naming ``lab.kernel`` when it cannot be found or fetched.
    """
    if spec == HOST_KERNEL:
        raise ValueError("the host's kernel is not booted in a VM")
    if spec.startswith("/"):
        return unpacked(Path(spec), spec)
    package, version = _package(spec)
    entry = cache_root() / entry_name(package, version)
    _adopt_legacy_entry(cache_root() / f"{package}_{version}", entry)
    if not (entry / COMPLETE).exists():
        check_shareable(entry, spec)
        _fetch(package, version, entry)
    kernel = unpacked(entry, spec)
    return Kernel(spec, kernel.release, kernel.image, kernel.modules, package, version)


def check(spec: str) -> str | None:
    """What :func:`locate` checks of ``spec`` before it downloads anything, without root
    and without changing anything (``plan show``): :class:`UserError` with the message a
    run would give (apt-cache missing too: `run` needs it); else None, or what only the
    download can tell (a package not yet in the cache)."""
    if spec == HOST_KERNEL:
        return None
    if spec.startswith("/"):
        unpacked(Path(spec), spec)
        return None
    package, version = _package(spec)
    entry = cache_root() / entry_name(package, version)
    if (entry / COMPLETE).exists():
        unpacked(entry, spec)
        return None
    if (cache_root() / f"{package}_{version}" / COMPLETE).exists():
        return None  # an earlier tunnelbench's entry, which `run` renames and uses
    check_shareable(entry, spec)
    return (
        f"lab.kernel {spec!r}: {package}={version} is in apt's sources but not downloaded"
        " yet; whether it downloads is known when `run` fetches it"
    )


def _package(spec: str) -> tuple[str, str]:
    """The Debian package and version ``spec`` names, from the configured apt sources."""
    pinned = None
    if spec == DEBIAN:
        package, pinned = _stock_package()
    else:
        package = parse_spec("lab.kernel", spec)
    if not PACKAGE.fullmatch(package):  # apt would take anything else as a pattern
        raise UserError(f"lab.kernel: {shown(spec)} is not a kernel package; {ALLOWED}")
    # The version the meta-package depends on is the one it installs: no second
    # `apt-cache show` (1.4 s of every run's start here).
    return package, pinned or _candidate(package)


def entry_name(package: str, version: str) -> str:
    """The cache directory of one package version: ``PACKAGE_VERSION``, with every
    character virtme-ng would refuse (``~``, an epoch's ``:``) written ``_HH``."""

    def escape(match: re.Match[str]) -> str:
        return "".join(f"_{byte:02x}" for byte in match.group(0).encode())

    return f"{_UNSAFE_IN_NAME.sub(escape, package)}_{_UNSAFE_IN_NAME.sub(escape, version)}"


def _adopt_legacy_entry(legacy: Path, entry: Path) -> None:
    """A complete entry an earlier tunnelbench unpacked under the version as it is
    (``~`` and all) is renamed, not fetched again."""
    if legacy == entry or not (legacy / COMPLETE).exists() or entry.exists():
        return
    with contextlib.suppress(OSError):  # else it is fetched afresh
        legacy.rename(entry)


def check_shareable(path: Path, spec: str) -> None:
    """Refuse a kernel whose directory virtme-ng would not share with the guest, naming
    the character and what to do, before anything is fetched or booted."""
    text = str(path)
    if VNG_SAFE_PATH.fullmatch(text):
        return
    bad = "".join(sorted({c for c in text if not VNG_SAFE_PATH.fullmatch(c)}))
    where = (
        "the directory given"
        if spec.startswith("/")
        else "the kernel cache (set TUNNELBENCH_KERNEL_CACHE to another directory)"
    )
    raise UserError(
        f"lab.kernel: {spec!r}: {text!r} holds {bad!r}, which virtme-ng refuses in a path it"
        f" shares with the guest (letters, digits and _+ /.- only); move {where}"
    )


def unpacked(tree: Path, spec: str) -> Kernel:
    """The kernel in an unpacked tree: exactly one release in ``lib/modules`` and its
    image in ``boot``."""
    check_shareable(tree, spec)
    modules = tree / "lib" / "modules"
    releases = sorted(p.name for p in modules.iterdir()) if modules.is_dir() else []
    if len(releases) != 1:
        raise UserError(
            f"lab.kernel: {spec!r} holds {len(releases)} kernel releases in {modules}"
            f" ({', '.join(releases) or 'none'}); exactly one is needed"
        )
    release = releases[0]
    image = tree / "boot" / f"vmlinuz-{release}"
    if not image.is_file():
        raise UserError(f"lab.kernel: {spec!r} has no kernel image {image}")
    if not (modules / release / "modules.dep").is_file():
        raise UserError(
            f"lab.kernel: {spec!r} has no module index {modules / release / 'modules.dep'}"
            f" (run `depmod -b {tree} {release}`)"
        )
    return Kernel(spec, release, image, modules)


def _stock_package() -> tuple[str, str | None]:
    """The kernel package the Debian meta-package points at, and the version it asks
    for exactly (``(= VERSION)``), if it does."""
    fields = _show(DEBIAN_META_PACKAGE)
    depends = fields.get("Depends", "")
    first = depends.split(",")[0].strip()
    match = PACKAGE.match(first)
    if match is None:
        raise UserError(
            f"lab.kernel: 'debian': {DEBIAN_META_PACKAGE} depends on no kernel package"
            f" ({depends or 'no Depends'})"
        )
    exact = re.search(r"\(=\s*([^)\s]+)\s*\)", first[match.end() :])
    return match.group(0), exact.group(1) if exact else None


def _candidate(package: str) -> str:
    version = _show(package).get("Version")
    if not version:
        raise UserError(f"lab.kernel: package {package!r} has no version in apt's sources")
    return version


def _show(package: str) -> dict[str, str]:
    """The candidate version's fields of a package in the configured apt sources."""
    apt_cache = programs.require("apt-cache", "finding a Debian kernel for lab.kernel")
    try:
        out = run([apt_cache, "show", "--no-all-versions", package], timeout=60).stdout
    except CommandError as exc:
        raise UserError(
            f"lab.kernel: no package {package!r} in the configured apt sources"
            f" ({exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else 'not found'});"
            " run `apt-get update`, or name one `apt-cache search linux-image` lists"
        ) from None
    fields: dict[str, str] = {}
    for line in out.splitlines():
        if not line.strip():
            break  # the first record is the candidate's
        name, sep, value = line.partition(":")
        if sep and not line[0].isspace():
            fields[name] = value.strip()
    return fields


def _fetch(package: str, version: str, entry: Path) -> None:
    """Download and unpack one package into ``entry``, whole or not at all: the work is
    done in a temporary directory beside it and renamed into place."""
    apt_get = programs.require("apt-get", "downloading a Debian kernel for lab.kernel")
    dpkg_deb = programs.require("dpkg-deb", "unpacking a Debian kernel for lab.kernel")
    depmod = programs.require("/usr/sbin/depmod", "indexing a kernel's modules (Debian kmod)")
    entry.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=entry.parent))
    try:
        work.chmod(0o755)  # apt downloads as its own user, which must write here
        try:
            run([apt_get, "download", f"{package}={version}"], timeout=DOWNLOAD_TIMEOUT_S, cwd=work)
        except CommandError as exc:
            raise UserError(f"lab.kernel: could not download {package}={version}: {exc}") from None
        debs = sorted(work.glob("*.deb"))
        if len(debs) != 1:
            raise UserError(f"lab.kernel: apt-get download of {package} gave {len(debs)} files")
        tree = work / "tree"
        run([dpkg_deb, "-x", str(debs[0]), str(tree)], timeout=300)
        debs[0].unlink()
        releases = [p.name for p in (tree / "lib" / "modules").iterdir()]
        for release in releases:
            run([depmod, "-b", str(tree), release], timeout=300)
        (tree / COMPLETE).write_text(f"{package}={version}\n")
        try:
            tree.rename(entry)
        except OSError:
            if not (entry / COMPLETE).exists():  # else another run fetched it meanwhile
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
