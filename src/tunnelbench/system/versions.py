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
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunnelbench.system.command import CommandError, run

log = logging.getLogger("tunnelbench.system.versions")

ANSWERS = Path("/var/lib/tunnelbench/versions.json")
#: How long a file must have been unchanged before an answer about it is kept.
SETTLED_NS = 2_000_000_000

_lock = threading.Lock()
_known: dict[str, Any] | None = None


def ask(
    argv: Sequence[str], *, file: str | None = None, check: bool = True, timeout: float = 10.0
) -> "subprocess.CompletedProcess[str]":
    """``run(argv)``, answered from :data:`ANSWERS` while the program (``argv[0]``, as
    PATH finds it) and ``file`` (what else its answer depends on) have the size and time
    they had when it was asked."""
    args = list(argv)
    # The program as PATH finds it now: another program of the same name is another key.
    program = shutil.which(args[0]) or args[0]
    key = json.dumps([program, *args[1:]])
    identity = _identity(program)
    if file is not None and identity is not None:
        found = _identity(file)
        identity = identity + found if found is not None else None
    if identity is not None:
        with _lock:
            entry = _answers().get(key)
        if entry is not None and entry.get("file") == identity:
            done = subprocess.CompletedProcess(args, *entry["answer"])
            if check and done.returncode != 0:
                raise CommandError(args, done.returncode, done.stderr)
            return done
    done = run(args, check=False, timeout=timeout)
    # A file changed within the clock's granularity of now could change again with the
    # same size and time (git's "racy" entries): kept only once it has settled.
    if identity is not None and max(identity[1::2]) < time.time_ns() - SETTLED_NS:
        answer = [done.returncode, done.stdout, done.stderr]
        _keep(key, {"path": program, "file": identity, "answer": answer})
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
