"""What a program says of its version, asked once per program file.

A run asks its tools what they are (``iperf3 --version``, strongSwan's charon, OpenVPN,
``dpkg-query`` for a package's version): a process each, nothing on this machine but
0.2-0.5 s each in an emulated VM guest, where the capability probe's fourteen of them
took 5 s of every start. The answer depends only on a file (the program, or dpkg's
database), so it is kept in :data:`ANSWERS`, keyed by the command and the file's size and
modification time. A guest reads this machine's files (its root is this machine's, over
9p) and finds there what the host asked before it booted; a program replaced or upgraded
has another size or time and is asked again. A process that may not write the file (a
guest, a user other than root) keeps its answers in memory only.
"""

import json
import logging
import os
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunnelbench.system.command import CommandError, run

log = logging.getLogger("tunnelbench.system.versions")

ANSWERS = Path("/var/lib/tunnelbench/versions.json")

_lock = threading.Lock()
_known: dict[str, Any] | None = None


def ask(
    argv: Sequence[str], *, file: str | None = None, check: bool = True, timeout: float = 10.0
) -> "subprocess.CompletedProcess[str]":
    """``run(argv)``, answered from :data:`ANSWERS` while ``file`` (by default the
    program, ``argv[0]``, a path) has the size and time it had when it was asked."""
    args = list(argv)
    identity = _identity(file or args[0])
    key = json.dumps(args)
    if identity is not None:
        with _lock:
            entry = _answers().get(key)
        if entry is not None and entry.get("file") == identity:
            done = subprocess.CompletedProcess(args, *entry["answer"])
            if check and done.returncode != 0:
                raise CommandError(args, done.returncode, done.stderr)
            return done
    done = run(args, check=False, timeout=timeout)
    if identity is not None:
        answer = [done.returncode, done.stdout, done.stderr]
        _keep(key, {"path": file or args[0], "file": identity, "answer": answer})
    if check and done.returncode != 0:
        raise CommandError(args, done.returncode, done.stderr)
    return done


def _identity(path: str) -> list[int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None  # run() says what is wrong with it
    return [found.st_size, found.st_mtime_ns]


def _answers() -> dict[str, Any]:
    global _known
    if _known is None:
        try:
            loaded = json.loads(ANSWERS.read_text())
            _known = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            _known = {}
    return _known


def _keep(key: str, entry: dict[str, Any]) -> None:
    """Add an answer, in memory and (where this process may) on disk, without the
    answers of files that are gone: written whole to a temporary file renamed over the
    old, so a reader never sees half of it."""
    with _lock:
        answers = _answers()
        answers[key] = entry
        for gone in [k for k, e in answers.items() if not os.path.exists(e.get("path", ""))]:
            del answers[gone]
        try:
            ANSWERS.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=ANSWERS.parent, prefix=".versions-")
            os.fchmod(handle, 0o644)  # other users read the answers too
        except OSError as exc:
            log.debug("version answers kept in memory only: %s", exc)
            return
        try:
            with os.fdopen(handle, "w") as out:
                json.dump(answers, out)
            os.replace(temporary, ANSWERS)
        except OSError as exc:
            Path(temporary).unlink(missing_ok=True)
            log.debug("version answers kept in memory only: %s", exc)
