"""The guest's Python modules in one archive, compiled on the host.

An emulated guest reads this machine's files over 9p, where every lookup is a round trip:
importing the guest's side module by module (a directory stat per lookup, the source's
stat to check its bytecode, then the bytecode) took 15-18 s of a TCG guest's start, and
from one zip archive, whose directory is read once, 8-9 s. The archive holds bytecode
that is not checked against its source (the host checks, here, before each boot): all of
tunnelbench, and every standard-library package the guest's side imports, whole (a
package found in the archive is looked for nowhere else, so a module of it imported
later must be there too). Third-party packages are left where they are; the guest's side
imports none at start.

Run as ``python -m tunnelbench.vm.guest_modules ARCHIVE MODULE`` by the same interpreter the
guest runs: it rebuilds ``ARCHIVE`` only when a source, the set of tunnelbench's files or
the interpreter changed (the manifest beside it says what it was built from).
"""

import importlib
import importlib.util
import json
import marshal
import os
import sys
import sysconfig
import zipfile
from pathlib import Path

#: Standard-library folders of tests and their data (some of it is not Python 3).
TESTS = {"test", "tests", "idle_test"}
#: The hash-based bytecode flag with its check bit clear: loaded as it is.
UNCHECKED_HASH = (0b01).to_bytes(4, "little")


def _package_root() -> Path:
    """The directory that holds the ``tunnelbench`` package (``src``)."""
    return Path(__file__).resolve().parents[2]


def sources(first: str) -> dict[str, Path]:
    """Each module's path in the archive (``json/decoder.pyc``) and its source: every
    module of tunnelbench, and each standard-library module or whole package that
    importing ``first`` (the module the guest runs) loads."""
    importlib.import_module(first)
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    root = _package_root()
    found = {_entry(p, root): p for p in sorted((root / "tunnelbench").rglob("*.py"))}
    for module in list(sys.modules.values()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not origin or not origin.endswith(".py"):
            continue
        path = Path(origin).resolve()
        if stdlib not in path.parents or "site-packages" in path.parts:
            continue
        top = path.relative_to(stdlib).parts[0]
        if (stdlib / top).is_dir():  # a package: all of it
            for file in (stdlib / top).rglob("*.py"):
                if not TESTS.intersection(file.relative_to(stdlib).parts[1:-1]):
                    found[_entry(file, stdlib)] = file
        else:
            found[_entry(path, stdlib)] = path
    return found


def _entry(path: Path, base: Path) -> str:
    return str(path.relative_to(base).with_suffix(".pyc"))


def manifest(files: dict[str, Path]) -> dict[str, object]:
    """What an archive was built from: the interpreter, and each source's size and time."""
    stats = {}
    for name, path in sorted(files.items()):
        info = path.stat()
        stats[name] = [str(path), info.st_size, info.st_mtime_ns]
    return {"python": sys.version, "magic": importlib.util.MAGIC_NUMBER.hex(), "files": stats}


def build(archive: Path, first: str) -> bool:
    """Write ``archive`` (and its manifest) unless it was built from these very sources;
    True when it was (re)written. ``first``: the module the guest runs."""
    files = sources(first)
    wanted = manifest(files)
    record = archive.with_suffix(".json")
    try:
        if json.loads(record.read_text()) == wanted and archive.is_file():
            return False
    except (OSError, ValueError):
        pass
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.{os.getpid()}")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as out:
        for name, path in sorted(files.items()):
            source = path.read_bytes()
            # Named by its real path: a traceback in the guest shows the host's source.
            code = compile(source, str(path), "exec", dont_inherit=True)
            header = importlib.util.MAGIC_NUMBER + UNCHECKED_HASH
            out.writestr(name, header + importlib.util.source_hash(source) + marshal.dumps(code))
    partial.replace(archive)
    record.write_text(json.dumps(wanted))
    return True


if __name__ == "__main__":
    build(Path(sys.argv[1]), sys.argv[2])
