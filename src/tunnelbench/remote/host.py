"""A role on a real machine over SSH: the host seam (:mod:`tunnelbench.lab.host`) for
hosts tunnelbench does not own.

Everything it leaves on a host is inside one directory, ``/tmp/tunnelbench.<tag>``, or
named by a line of that directory's ``undo`` file, written *before* the change is made:
the processes it started (PID and start time, written by the process's own shell before
it becomes the program, so no moment exists in which a started process is unrecorded),
and a command that reverses each change to the host (a link, a route). Cleanup ends
exactly those processes, runs those commands in reverse order and removes the
directory, in one POSIX sh script that busybox runs. It needs nothing of this machine,
so ``lab clean --hosts`` can finish what a killed run left, from the host's record alone.

Every command is POSIX sh and uses only what busybox provides (OpenWrt has no Python,
bash, or GNU tools).
"""

import json
import logging
import os
import secrets
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tunnelbench.errors import LabError
from tunnelbench.lab.host import SAME_AS_STDOUT, Host
from tunnelbench.lab.state import process_start_time
from tunnelbench.remote.ssh import Connection
from tunnelbench.system import stopping

log = logging.getLogger(__name__)

#: Where a host's directories live; the tag makes each run's its own.
REMOTE_ROOT = "/tmp"
PREFIX = "tunnelbench."

#: The shell lines that record the shell's own PID and start time (field 22 of
#: /proc/PID/stat, after the command name, which may hold spaces) before it execs.
RECORD_SELF = 'read -r s </proc/$$/stat; s=${s##*) }; set -- $s; echo "$$ ${20}" >>"$TB_DIR/pids"'

#: Ends the recorded processes whose start time still matches, undoes the recorded
#: changes newest first, removes the directory. ``$1``: the directory. Nothing is run
#: from a directory that is a link, is not the connecting user's, or that others may
#: write to (anyone can make a directory in /tmp; its undo lines would run as root):
#: exit status 3 and one line on stderr.
CLEANUP = r"""
D=$1
if [ -L "$D" ]; then echo "refused: $D is a symbolic link" >&2; exit 3; fi
[ -d "$D" ] || exit 0
if [ ! -O "$D" ]; then
  set -- $(ls -ldn "$D"); echo "refused: $D belongs to uid $3, not to this user" >&2; exit 3
fi
mode=$(ls -ldn "$D"); mode=${mode%% *}
case "$mode" in
  d????[!w]??[!w]*) ;;
  *) echo "refused: $D is writable by others ($mode)" >&2; exit 3 ;;
esac
alive() {
  want=$2; { read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
  s=${s##*) }; set -- $s; [ "$1" != Z ] && [ "${20}" = "$want" ]
}
if [ -f "$D/pids" ]; then
  while read -r pid start; do alive "$pid" "$start" && kill "$pid" 2>/dev/null; done <"$D/pids"
  n=0
  while [ $n -lt 30 ]; do
    left=0
    while read -r pid start; do alive "$pid" "$start" && left=1; done <"$D/pids"
    [ $left = 0 ] && break
    sleep 0.1; n=$((n+1))
  done
  while read -r pid start; do alive "$pid" "$start" && kill -9 "$pid" 2>/dev/null; done <"$D/pids"
fi
status=0
if [ -f "$D/undo" ]; then
  awk '{ line[NR] = $0 } END { for (i = NR; i > 0; i--) print line[i] }' "$D/undo" >"$D/undo.rev"
  while read -r line; do
    out=$(sh -c "$line" 2>&1) || case "$out" in
      *"Cannot find"*|*"can't find"*|*"No such"*|*"does not exist"*|*"not found"*) ;;
      *"handle of zero"*) ;;  # a root qdisc deleted already: the kernel's own is back
      *) echo "undo failed: $line: $out" >&2; status=1 ;;
    esac
  done <"$D/undo.rev"
fi
rm -rf "$D"
exit $status
"""


#: SIGINT to one recorded process (``$1``: its PID, ``$2``: its start time) if it is
#: still that process; one already gone is success.
INTERRUPT = (
    'p=$1; want=$2; { read -r s <"/proc/$p/stat"; } 2>/dev/null || exit 0;'
    ' s=${s##*) }; set -- $s; [ "${20}" = "$want" ] && kill -INT "$p"; exit 0'
)

#: SIGINT to one recorded process (``$1``, ``$2`` as above) while it blocks in one of the
#: calls of its machine's safe list (``$3``...: ``machine:numbers``, from
#: :data:`tunnelbench.system.stopping.SAFE_CALLS`), as :func:`~tunnelbench.system.stopping.
#: interrupt` does on this machine: frozen (SIGSTOP), looked at in ``/proc/PID/syscall``,
#: signalled there or let go and looked at again. A process waiting for a busy core
#: freezes only once it runs: the wait for its stop sleeps 10 ms at a time, about 1.5 s
#: in all (a trial's client on a host both of whose cores a tunnel's daemon filled
#: failed 100 quick looks). After 100 looks, that wait, or where the calls cannot be
#: read, it is signalled wherever it is, which the script says on its error output.
BETWEEN_CALLS = (
    "p=$1; want=$2; shift 2; m=$(uname -m); safe=;"
    ' for pair in "$@"; do [ "${pair%%:*}" = "$m" ] && safe=" ${pair#*:} "; done;'
    ' look() { st=; { read -r s <"/proc/$p/stat"; } 2>/dev/null || return 1; s=${s##*) };'
    ' set -- $s; [ "${20}" = "$want" ] || return 1; st=$1; };'
    " look || exit 0; n=0; w=0;"
    ' while [ -n "$safe" ] && [ $n -lt 100 ] && [ $w -lt 150 ]; do'
    ' kill -STOP "$p" 2>/dev/null || exit 0;'
    ' while look && [ "$st" != T ] && [ "$st" != t ] && [ $w -lt 150 ]; do'
    " sleep 0.01 2>/dev/null; w=$((w+1)); done;"
    ' c=; { read -r c rest <"/proc/$p/syscall"; } 2>/dev/null;'
    ' if [ -n "$c" ]; then case "$safe" in *" $c "*)'
    ' kill -INT "$p"; kill -CONT "$p"; exit 0;; esac; fi;'
    ' kill -CONT "$p" 2>/dev/null; [ -n "$c" ] || break; n=$((n+1)); done;'
    ' look || exit 0; kill -INT "$p" 2>/dev/null;'
    ' echo "no safe point after $n looks (waited $w times for the stop)" >&2; exit 0'
)

#: Ends one recorded process (``$1``: its PID, ``$2``: its start time) if it is still
#: that process, and waits until it is gone (3 s, then SIGKILL): the undo line of a
#: daemon, so a tunnel removed between trials takes its daemon with it, and the next
#: one's device name is free again. A process already gone is success.
END_PROCESS = (
    'alive() { want=$2; { read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1;'
    ' s=${s##*) }; set -- $s; [ "$1" != Z ] && [ "${20}" = "$want" ]; };'
    ' alive "$1" "$2" || exit 0; kill "$1" 2>/dev/null; n=0;'
    ' while [ $n -lt 30 ] && alive "$1" "$2"; do sleep 0.1; n=$((n+1)); done;'
    ' alive "$1" "$2" && kill -9 "$1" 2>/dev/null; exit 0'
)  # one line: the undo file holds a command per line
#: How long a spawned process may take to record itself (its shell's first line).
RECORD_WAIT_S = 5.0


def owner() -> dict[str, object]:
    """This process, as the owner of what it leaves on hosts: a killed owner's leftovers
    are cleanable, a live one's are not."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return {"boot_id": boot, "pid": os.getpid(), "start_time": process_start_time(os.getpid()) or 0}


def owner_alive(record: dict[str, object]) -> bool | None:
    """Whether the owner still runs; None when it ran on another machine (not ours to say)."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    if record.get("boot_id") != boot:
        return None
    pid = record.get("pid")
    return isinstance(pid, int) and process_start_time(pid) == record.get("start_time")


class SshHost(Host):
    """One role on a host reached by ``connection``; its files are under :attr:`directory`."""

    def __init__(self, role: str, connection: Connection, tag: str) -> None:
        self.role = role
        self.name = f"{role} ({connection.destination})"
        self.connection = connection
        # The role in the name: one machine may play two roles (and the tests' hosts
        # share one file system).
        self.directory = Path(REMOTE_ROOT) / f"{PREFIX}{tag}.{role}"
        self.started = False
        #: local ``ssh`` PID -> the file its remote process recorded itself in.
        self._pid_files: dict[int, Path] = {}

    # -- the directory and its record --------------------------------------------------

    def begin(self) -> None:
        """Create the host's directory (private, new) with its owner record."""
        d = shlex.quote(str(self.directory))
        record = shlex.quote(json.dumps(owner()))
        self.connection.run(f"umask 077 && mkdir {d} && echo {record} >{d}/owner && : >{d}/pids")
        self.started = True

    def env(self) -> str:
        return f"TB_DIR={shlex.quote(str(self.directory))}; export TB_DIR; "

    def undo(self, command: Sequence[str]) -> None:
        """Record ``command`` as the reversal of a change about to be made."""
        line = shlex.quote(shlex.join(command))
        self.connection.run(f'{self.env()}echo {line} >>"$TB_DIR/undo"')

    def cleanup(self, timeout: float = 30.0) -> str | None:
        """End, undo and remove what this run left on the host; what failed, or None."""
        if not self.started:
            return None
        done = self.connection.run(
            ["sh", "-c", CLEANUP, "cleanup", str(self.directory)], check=False, timeout=timeout
        )
        self.started = False
        return done.stderr.strip() or None if done.returncode else None

    # -- the seam ------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float = 30.0,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return self.connection.run(argv, check=check, timeout=timeout, input_text=input_text)

    def recorded(self, argv: Sequence[str]) -> str:
        """A script that records its PID in the directory, then becomes ``argv``."""
        return f"{self.env()}{RECORD_SELF}; exec {shlex.join(argv)}"

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | str | None = None,
    ) -> "subprocess.Popen[bytes]":
        """Start ``argv`` on the host, recorded; its output goes to files on the host
        (paths inside :attr:`directory`). The local ``ssh`` process stands for it: it
        ends when the program does."""
        out = shlex.quote(str(stdout)) if stdout else "/dev/null"
        if stderr == SAME_AS_STDOUT:
            err = "&1"
        else:
            err = shlex.quote(str(stderr)) if isinstance(stderr, Path) else "/dev/null"
        # Its own record too, by a name of this spawn's: the process can be ended alone.
        pid_file = self.directory / f"pid.{secrets.token_hex(6)}"
        own = f'echo "$$ ${{20}}" >{shlex.quote(str(pid_file))}'
        script = (
            f"{self.env()}{RECORD_SELF}; {own}; exec {shlex.join(argv)} >{out} 2>{err} </dev/null"
        )
        proc = subprocess.Popen(
            self.connection.command(script),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._pid_files[proc.pid] = pid_file
        return proc

    def interrupt(self, proc: "subprocess.Popen[bytes]") -> None:
        """SIGINT to the program ``proc`` stands for, on the host, by the PID and start
        time it recorded (the local ``ssh`` passes no signal on); nothing once it is
        gone."""
        pid, start = self._recorded(proc)
        self.run(["sh", "-c", INTERRUPT, "interrupt", pid, start])

    def interrupt_between_calls(self, proc: "subprocess.Popen[bytes]") -> None:
        pid, start = self._recorded(proc)
        lists = [f"{m}:{' '.join(map(str, calls))}" for m, calls in stopping.SAFE_CALLS.items()]
        done = self.run(["sh", "-c", BETWEEN_CALLS, "interrupt", pid, start, *lists])
        if said := done.stderr.strip():
            log.warning("%s: process %s: %s", self.name, pid, said)

    def read_net(self, names: Sequence[str]) -> str:
        """The tables the host has (a router without IPv6 has no ``tcp6``): ``cat``
        prints those it can read; an error only when it read none."""
        done = self.run(["cat", *(f"/proc/net/{name}" for name in names)], check=False)
        if done.returncode != 0 and not done.stdout:
            raise LabError(f"{self.name}: cannot read /proc/net: {done.stderr.strip()[:200]}")
        return done.stdout

    def _recorded(self, proc: "subprocess.Popen[bytes]") -> tuple[str, str]:
        """(PID, start time) the program ``proc`` stands for recorded on the host."""
        pid_file = self._pid_files[proc.pid]
        deadline = time.monotonic() + RECORD_WAIT_S
        while True:
            found = self.run(["cat", str(pid_file)], check=False).stdout.split()
            if len(found) == 2:
                return found[0], found[1]
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LabError(f"{self.name}: a process it started did not record itself")
            time.sleep(0.05)

    def end_on_undo(self, proc: "subprocess.Popen[bytes]") -> list[str]:
        """Record, as an undo line, the ending of the process ``proc`` stands for (it
        spawned it), once the process has recorded itself; the line, for the caller's
        own list of what to undo."""
        line = ["sh", "-c", END_PROCESS, "end", *self._recorded(proc)]
        self.undo(line)
        return line

    def write(self, path: Path, text: str, *, mode: int = 0o644) -> None:
        """Create ``path`` (inside the directory, so cleanup removes it) with ``mode`` set
        before any text is in it."""
        if not str(path).startswith(f"{self.directory}/"):
            raise LabError(f"{self.name}: {path} is outside the run's directory")
        p = shlex.quote(str(path))
        self.connection.run(
            f"rm -f {p} && (umask 077 && : >{p}) && chmod {mode:o} {p} && cat >{p}", input_text=text
        )

    def make_directory(self, path: Path, *, mode: int = 0o700) -> None:
        if not str(path).startswith(f"{self.directory}/"):
            raise LabError(f"{self.name}: {path} is outside the run's directory")
        self.record(path, kind="directory")
        self.connection.run(["mkdir", "-m", f"{mode:o}", str(path)])

    def read(self, path: Path) -> str:
        return self.connection.run(["cat", str(path)]).stdout

    def record(self, path: Path, *, kind: str) -> None:
        self.undo(["rm", "-rf", str(path)])


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
