"""What killed remote runs left on a host, and whether tunnelbench may act on it.

A run's directory on a host (:mod:`tunnelbench.remote.host`) holds the commands that
undo its changes, and ``lab clean --hosts`` runs them, as the user tunnelbench connects
as (root, to change links and routes). Its directories are in ``/tmp``, where anyone on
the host can make one: a directory is acted on only when it has the name tunnelbench
gives, is a directory (not a link to one), belongs to the connecting user and nobody
else may write to it, as :data:`host.CLEANUP` checks again on the host just before it
runs anything.
"""

import json
import re
import shlex
from dataclasses import dataclass

from tunnelbench.errors import LabError
from tunnelbench.remote.host import CLEANUP, PREFIX, REMOTE_ROOT
from tunnelbench.remote.hostsfile import LAYOUTS
from tunnelbench.remote.ssh import Connection

#: ``tunnelbench.<tag>.<role>``: the tag is 4 random bytes in hex (Session.tag).
NAME = re.compile(
    re.escape(PREFIX)
    + r"[0-9a-f]{8}\.(?:"
    + "|".join(sorted({r for roles in LAYOUTS.values() for r in roles}))
    + ")"
)


def list_script(root: str = REMOTE_ROOT) -> str:
    """POSIX sh that prints one line per entry of ``root`` named like a run's directory:
    its name (characters outside [A-Za-z0-9._-] shown as '?', so that no name can forge
    a line), its mode and owner as ``ls -ldn`` shows them, whether it is the connecting
    user's, and its owner record (the run that made it) on one line."""
    return rf"""
for d in {shlex.quote(root)}/{PREFIX}*; do
  [ -e "$d" ] || [ -L "$d" ] || continue
  n=$(printf '%s' "${{d##*/}}" | tr -c 'A-Za-z0-9._-' '?')
  set -- $(ls -ldn "$d")
  if [ -O "$d" ]; then m=yes; else m=no; fi
  o=$(head -c 4096 "$d/owner" 2>/dev/null | tr -d '\r\n')
  echo "$n $1 $3 $m $o"
done
"""


@dataclass(frozen=True)
class Leftover:
    """One directory named like a run's, as the host listed it."""

    name: str
    mode: str  # as ``ls -l`` shows it: ``drwx------``
    uid: int | None
    mine: bool  # owned by the user tunnelbench connects as
    record: dict[str, object]  # its owner record: the run that made it

    @property
    def path(self) -> str:
        return f"{REMOTE_ROOT}/{self.name}"


def parse(text: str) -> list[Leftover]:
    found = []
    for line in text.splitlines():
        parts = line.split(" ", 4)
        if len(parts) < 4:
            continue
        name, mode, uid, mine = parts[:4]
        try:
            record = json.loads(parts[4]) if len(parts) == 5 and parts[4] else {}
        except json.JSONDecodeError:
            record = {}
        found.append(
            Leftover(
                name,
                mode,
                int(uid) if uid.isdigit() else None,
                mine == "yes",
                record if isinstance(record, dict) else {},
            )
        )
    return found


def listed(connection: Connection) -> list[Leftover]:
    """The directories on a host named like a run's, with their owners' records."""
    return parse(connection.run(list_script()).stdout)


def refusal(leftover: Leftover) -> str | None:
    """Why nothing may be run from ``leftover``; None when it is a directory tunnelbench
    made as this user, which only this user (and root) can have written to."""
    if not NAME.fullmatch(leftover.name):
        return f"the name is not one tunnelbench gives ({PREFIX}<8 hex digits>.<role>)"
    if leftover.mode.startswith("l"):
        return "it is a symbolic link, not a directory"
    if not leftover.mode.startswith("d"):
        return f"it is not a directory ({leftover.mode})"
    if not leftover.mine:
        who = f"uid {leftover.uid}" if leftover.uid is not None else "another user"
        return f"it belongs to {who}, not to the user tunnelbench connects as"
    if len(leftover.mode) < 10 or "w" in (leftover.mode[5], leftover.mode[8]):
        return f"others may write to it ({leftover.mode})"
    return None


def clean_directory(connection: Connection, path: str) -> str | None:
    """Cleanup of one run directory (a killed run's); what failed, or None."""
    name = path.removeprefix(f"{REMOTE_ROOT}/")
    if name == path or not NAME.fullmatch(name):
        raise LabError(f"{path}: not a tunnelbench run directory")
    done = connection.run(["sh", "-c", CLEANUP, "cleanup", path], check=False, timeout=60)
    return (done.stderr.strip() or "cleanup failed") if done.returncode else None
