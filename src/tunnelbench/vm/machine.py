"""A VM that runs tunnelbench on another kernel: booted with virtme-ng on this
machine's root file system (read-only; the guest's writes land in its own tmpfs).

The host and the guest talk through one exchange directory, shared read-write: the host
writes the job, the guest appends its events (one JSON object a line) and its exit code.
Nothing else is relied on: virtme-ng's own console and exit status depend on the host
having udev, and this machine has none.

A guest is a resource its run owns, recorded as labs are (:mod:`tunnelbench.lab.state`,
a state of its own per guest): its exchange directory before it is made, virtme-ng's
process group before virtme-ng starts (a shell that waits for a line on its standard
input is spawned, recorded, and only then let ``exec`` virtme-ng, so that no instant
exists where a VM runs unrecorded). A run killed while its guest boots leaves a record
from which ``lab clean`` ends QEMU, virtme-ng and virtme and removes the directory.

Hardware virtualisation is used when it works, which is found out by booting once and
remembered per host kernel and QEMU (``/dev/kvm`` can exist and a guest still fail);
otherwise QEMU emulates the CPU (TCG), about fifteen times slower.
"""

import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tunnelbench.errors import LabError, UserError
from tunnelbench.lab import state as lab_state
from tunnelbench.model.plan import VmSettings
from tunnelbench.model.records import KVM, TCG
from tunnelbench.system import interrupts, programs
from tunnelbench.system.command import run
from tunnelbench.vm.kernels import Kernel, cache_root

#: Seconds a guest may take from start to its first event (TCG boots in ~15 s here).
BOOT_TIMEOUT_S = 180.0
#: Seconds the KVM probe waits for a guest to come up before calling KVM unusable.
KVM_PROBE_TIMEOUT_S = 60.0
#: Where exchange directories are made: the host's tmpfs, cleared at its boot.
EXCHANGE_ROOT = Path("/run/tunnelbench/vm")
EVENTS, EXIT_CODE, JOB, OUTPUT = "events.jsonl", "exit-code", "job.json", "guest.log"
PRELOAD = "preload.sh"
#: Where the guest copies the module archive before its Python starts: its /run, a
#: tmpfs. zipimport opens the archive once for each module it loads (417 times), each
#: open a round trip over 9p; copied, and without the site packages, the guest's imports
#: took 9.6-14.0 s against 16.7-18.3 s (two of each in one emulated boot).
GUEST_ARCHIVE = "/run/tunnelbench-modules.zip"
#: Set in the guest's environment: its labs are built there, not in another VM.
IN_GUEST = "TUNNELBENCH_IN_GUEST"
#: Seconds between two reads of the guest's events.
POLL_S = 0.05
#: What the guest imports first; compiled on the host before a boot (:func:`module_archive`).
GUEST_MODULE = "tunnelbench.cli.guest"
#: Where that bytecode is kept: a path the guest sees (its /var/cache and /tmp are
#: tmpfs of its own; /var/lib is this machine's, read through).
BYTECODE_DIR = Path("/var/lib/tunnelbench/guest-bytecode")
#: The archive of the guest's modules in it (:mod:`tunnelbench.vm.guest_modules`).
MODULES = "modules.zip"


@dataclass(frozen=True)
class Accel:
    """How the guest's CPU runs: ``kvm`` or ``tcg``, and why not KVM."""

    mode: str
    reason: str = ""


def vng() -> str:
    """virtme-ng's launcher, from tunnelbench's own environment."""
    path = Path(sys.executable).parent / "vng"
    if not path.exists():
        raise UserError("lab.kernel: virtme-ng (vng) is not installed; run `make run`")
    programs.require(
        "qemu-system-x86_64", "booting a kernel for lab.kernel (Debian qemu-system-x86)"
    )
    programs.require("busybox", "the guest's initramfs for lab.kernel (Debian busybox-static)")
    return str(path)


def boot_argv(
    kernel: Kernel, vm: VmSettings, exchange: Path, command: str, *, accel: str
) -> list[str]:
    """virtme-ng's command line: ``kernel`` with its modules from the cache, ``vm``'s
    vCPUs and memory, the exchange directory shared read-write, ``command`` run as root."""
    argv = [
        vng(),
        "--disable-microvm",  # microvm has no PCI: no virtio-pci for 9p on Debian's kernel
        # The root over 9p at once: virtme-ng tries virtiofs first, and Debian 12's
        # virtiofsd (QEMU 7.2's) refuses the options it is given, so every boot waited
        # 6.2 s for two daemons that had exited before falling back to 9p.
        "--force-9p",
        "--run",
        str(kernel.image),
        "--cpus",
        str(vm.cpus),
        "--memory",
        f"{vm.memory}M",
        "--rodir",
        f"/lib/modules={kernel.modules}",
        "--rwdir",
        str(exchange),
        "--exec",
        command,
    ]
    if accel == TCG:
        argv.insert(2, "--disable-kvm")
    return argv


def guest_argv(archive: Path, module: str, *args: str, copy: str = GUEST_ARCHIVE) -> list[str]:
    """The guest's Python running ``module`` from ``archive`` (:func:`module_archive`),
    copied first into the guest's own memory (``copy``), without the site packages
    (``-S``: the guest side needs none of them)."""
    script = 'cp "$1" "$2" && export PYTHONPATH="$2" && p=$3 m=$4 && shift 4'
    script += ' && exec "$p" -S -m "$m" "$@"'
    return ["sh", "-c", script, "sh", str(archive), copy, sys.executable, module, *args]


def guest_command(exchange: Path, argv: list[str], *, preload: bool = False) -> str:
    """The shell line the guest runs: ``argv`` with its output and exit code written
    into the exchange directory (the only channel that works without udev), with the
    exchange's preload script (:func:`preload_script`) started in the background first
    when there is one."""
    out, code = shlex.quote(str(exchange / OUTPUT)), shlex.quote(str(exchange / EXIT_CODE))
    script = shlex.quote(str(exchange / PRELOAD))
    load = f"sh {script} >/dev/null 2>&1 & " if preload else ""
    return f"{load}{shlex.join(argv)} >{out} 2>&1; echo $? >{code}"


def preload_script(groups: Sequence[Sequence[Sequence[str]]]) -> str:
    """A script that runs each group of commands in the background, the commands of a
    group one after another. It is a file in the exchange directory, not part of the
    guest's command: virtme-ng passes that on the kernel's command line, whose length is
    limited (a guest given ESP's three SAs there never started its command). A command
    that fails is passed over quietly: the probes that follow find out and say so."""
    jobs = ["{ " + " ; ".join(shlex.join(c) for c in group) + " ; } &" for group in groups]
    return "\n".join([*jobs, "wait", ""])


class Guest:
    """``with Guest(kernel, vm, job, accel) as guest``: boot, follow ``guest.events()``,
    and on leaving (however it is left) stop QEMU and remove the exchange directory."""

    def __init__(
        self,
        kernel: Kernel,
        vm: VmSettings,
        job: dict[str, Any],
        accel: Accel,
        *,
        command: list[str] | None = None,
        preload: Sequence[Sequence[Sequence[str]]] = (),
    ) -> None:
        """``command``: what the guest runs, by default tunnelbench's guest side
        (:mod:`tunnelbench.cli.guest`) on the job; ``preload``: groups of commands run
        meanwhile (:func:`preload_script`)."""
        self.kernel, self.vm, self.accel = kernel, vm, accel
        # Compiled before the exchange directory exists: a failed compile leaves nothing.
        modules = module_archive() if command is None else None
        EXCHANGE_ROOT.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(4)
        self.exchange = EXCHANGE_ROOT / f"{lab_state.GUEST_EXCHANGE_PREFIX}{token}"
        # Recorded before it is made (see the module's docstring).
        self.record = lab_state.GuestRecord(exchange=str(self.exchange))
        self.state = lab_state.LabState(
            lab_id=f"vm{token}", topology="vm guest", owner=lab_state.current_owner(),
            guests=[self.record],
        )  # fmt: skip
        self.state.save()
        try:
            self.exchange.mkdir(mode=0o700)
        except BaseException:
            _forget(self.state)
            raise
        try:
            (self.exchange / JOB).write_text(json.dumps(job))
            if preload:
                (self.exchange / PRELOAD).write_text(preload_script(preload))
            argv = command
            if argv is None:
                assert modules is not None  # built above when no command was given
                argv = guest_argv(modules, GUEST_MODULE, str(self.exchange))
            line = guest_command(self.exchange, argv, preload=bool(preload))
            self._argv = boot_argv(kernel, vm, self.exchange, line, accel=accel.mode)
        except BaseException:
            shutil.rmtree(self.exchange, ignore_errors=True)
            _forget(self.state)
            raise
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "Guest":
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
        console = (self.exchange / "console.log").open("wb")
        try:
            # A shell that starts virtme-ng (exec: the same PID) once it reads a line,
            # and exits without starting it when its input ends unread (we died first).
            self._proc = subprocess.Popen(
                ["sh", "-c", 'read -r _ && exec "$@" </dev/null', "sh", *self._argv],
                stdin=subprocess.PIPE,
                stdout=console,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # Ctrl-C reaches tunnelbench, which stops the VM
            )
        finally:
            console.close()
        assert self._proc.stdin is not None
        self.record.pid = self._proc.pid
        self.record.start_time = lab_state.process_start_time(self._proc.pid) or 0
        self.state.save()
        self._proc.stdin.write(b"go\n")
        self._proc.stdin.close()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
        shutil.rmtree(self.exchange, ignore_errors=True)
        _forget(self.state)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """virtme-ng's PID: the root of the VM's process tree (QEMU is its descendant)."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """End QEMU, virtme-ng and everything else of the process group this guest
        started, and wait until none of them is left (QEMU is virtme-ng's grandchild:
        virtme-ng's own exit does not mean QEMU's)."""
        proc = self._proc
        if proc is None:
            return
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while _group_alive(proc) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not _group_alive(proc):
                break
        proc.wait()

    def events(self, *, idle_timeout: float) -> Iterator[dict[str, Any]]:
        """The guest's events as they are written, until its command or the guest ends
        (every event it wrote before: whether it ended is asked before the file is read),
        each with the time it was read here (``host_at``, beside the guest's own ``at``). Raises
        :class:`LabError` when it is silent for ``idle_timeout`` seconds
        (:data:`BOOT_TIMEOUT_S` before its first event)."""
        path, offset, pending = self.exchange / EVENTS, 0, b""
        last = time.monotonic()
        first = True
        while True:
            # Its command's exit code ends it: what the guest does after (its shutdown,
            # 3-5 s under emulation) cannot add an event, and leaving stops it at once.
            alive = self.running and self.exit_code() is None
            chunk = b""
            if path.exists():
                with path.open("rb") as stream:
                    stream.seek(offset)
                    chunk = stream.read()
                offset += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            seen = time.time()
            for line in lines:
                if line.strip():
                    first, last = False, time.monotonic()
                    yield json.loads(line) | {"host_at": seen}
            if not alive:
                return  # a line cut short by the guest's end is no event
            limit = BOOT_TIMEOUT_S if first else idle_timeout
            if time.monotonic() - last > limit:
                self.stop()
                raise LabError(
                    f"the VM running kernel {self.kernel.release} said nothing for {limit:g} s;"
                    f" stopped it ({self.console_tail()})"
                )
            # Often: an event's delay here bounds how well the guest's windows map to
            # the host's clock (probes.vmhost.Clock).
            interrupts.sleep(POLL_S)

    def exit_code(self) -> int | None:
        try:
            return int((self.exchange / EXIT_CODE).read_text().strip())
        except (OSError, ValueError):
            return None

    def output(self) -> str:
        try:
            return (self.exchange / OUTPUT).read_text(errors="replace")
        except OSError:
            return ""

    def console_tail(self, lines: int = 3) -> str:
        """The last lines of what the guest and virtme-ng printed, for an error."""
        text = self.output().strip() or _read(self.exchange / "console.log").strip()
        tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " / ".join(tail) or "no output"


def _forget(state: lab_state.LabState) -> None:
    """Remove a guest's record once what it names is gone."""
    state.path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        state.directory.rmdir()


def module_archive() -> Path:
    """The archive of the guest's Python modules (:mod:`tunnelbench.vm.guest_modules`),
    built here by the guest's interpreter when a source changed; a second call costs
    one Python start-up and a stat of each source (about 0.5 s)."""
    archive = BYTECODE_DIR / MODULES
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench.vm.guest_modules", str(archive), GUEST_MODULE],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise LabError(f"compiling tunnelbench for the guest failed: {done.stderr.strip()[-500:]}")
    return archive


def _group_alive(proc: "subprocess.Popen[bytes]") -> bool:
    """Whether any process of ``proc``'s group (its session: it started one) still runs.
    Its zombies do not count: QEMU and virtme-run, orphaned when virtme-ng ends, wait
    for init to reap them, which took 1.2-1.5 s here (a signal to the group still
    reaches a zombie, so ``killpg(pgid, 0)`` called them alive)."""
    proc.poll()  # reap the leader, so that only the others count
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        # After the command name (which may hold spaces): state, parent, group.
        state, _, group = stat.rsplit(")", 1)[1].split()[:3]
        if int(group) == proc.pid and state != "Z":
            return True
    return False


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def accel(kernel: Kernel, vm: VmSettings) -> Accel:
    """KVM if a guest boots with it on this machine, else TCG; the answer of a real boot,
    remembered in the cache per host kernel and QEMU version."""
    if not Path("/dev/kvm").exists():
        return Accel(TCG, "/dev/kvm is absent")
    qemu = run(["qemu-system-x86_64", "--version"], timeout=30).stdout.splitlines()[0]
    key = f"{os.uname().release} / {qemu}"
    memo = cache_root() / "accel.json"
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return Accel(**known[key])
    found = _probe_kvm(kernel, vm)
    known[key] = {"mode": found.mode, "reason": found.reason}
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(json.dumps(known, indent=1))
    return found


def _probe_kvm(kernel: Kernel, vm: VmSettings) -> Accel:
    guest = Guest(kernel, vm, {}, Accel(KVM), command=["true"])
    with guest:
        deadline = time.monotonic() + KVM_PROBE_TIMEOUT_S
        while guest.running and time.monotonic() < deadline and guest.exit_code() is None:
            time.sleep(0.2)
        if guest.exit_code() == 0:
            return Accel(KVM)
        why = (
            guest.console_tail(1) if not guest.running else f"no boot in {KVM_PROBE_TIMEOUT_S:g} s"
        )
    return Accel(TCG, f"a KVM guest did not start: {why}")
