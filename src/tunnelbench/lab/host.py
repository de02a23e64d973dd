"""The seam between a lab role and the machine it runs on.

Everything a role does — every command it runs, every process it starts, every file it
writes or reads back — goes through one :class:`Host`. Tunnels, traffic generators and
probes talk to ``lab.host(role)`` (or the :class:`~tunnelbench.lab.netns.Lab` methods
that delegate to it) and never to a namespace, a shell or a path of their own, so that a
role can live somewhere else without them changing: today in a network namespace of
this machine (:class:`NetnsHost`); later in a VM guest or on a real router over SSH.

Contract (what every implementation guarantees, and all it must provide):

- :meth:`Host.run` runs ``argv`` in the role's network context to completion within
  ``timeout`` seconds and returns its exit code and text output. With ``check`` a
  non-zero exit raises :class:`~tunnelbench.system.command.CommandError` naming the
  command and its error output; a missing program raises
  :class:`~tunnelbench.errors.UserError`; a timeout raises
  :class:`~tunnelbench.errors.LabError`. ``input_text`` is the command's standard input.
- :meth:`Host.spawn` starts ``argv`` in the role's network context, in a session of its
  own (so Ctrl-C in the terminal reaches tunnelbench, which ends it in order), with its
  standard output and error written to files of the host's own (``None``: discarded;
  :data:`SAME_AS_STDOUT` for stderr: into the stdout file). The process is recorded
  before ``spawn`` returns, so teardown ends it even if tunnelbench dies right after.
- :meth:`Host.write` creates (or replaces) a file with ``text`` and ``mode`` on the host
  and records it for teardown; a file private to its owner (no group or other bits) is
  always created new and never readable by others, not even while it is written.
  :meth:`Host.read` returns a file's text (files the role's processes wrote, e.g. a
  generator's output). Paths are the host's own: for this
  machine, under the lab's directory.
- :meth:`Host.record` adds a resource the role created by other means (a cgroup, a
  directory) to what teardown removes. Teardown removes exactly what was recorded, on
  success, failure and Ctrl-C alike, and nothing else.
- :meth:`Host.set_sysctls`, :meth:`Host.set_offloads`, :meth:`Host.links_up` and
  :meth:`Host.qdiscs` set a role's ``net.*`` sysctls and a device's GRO/GSO/TSO, tell
  whether devices have carrier and read the queue disciplines' statistics; the base
  class runs ``sysctl``, ``ethtool``, ``ip`` and ``tc``, a namespace host asks the kernel
  from a thread inside the namespace (:mod:`tunnelbench.system.netdev`,
  :mod:`tunnelbench.system.rtnetlink`).
- :meth:`Host.interrupt` and :meth:`Host.interrupt_between_calls` stop a process
  :meth:`Host.spawn` started, by its PID on the host; :meth:`Host.read_net` reads the
  role's ``/proc/net`` files (a generator's sockets, its links' counters). With these a
  generator runs, waits and stops through any host (:mod:`tunnelbench.traffic.base`).
- Nothing here may change the machine outside what is recorded: a host never touches
  interfaces, routes, sysctls or firewall rules of any namespace it did not create.
"""

import json
import os
import signal
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Final

from tunnelbench.errors import LabError
from tunnelbench.lab.state import LabState
from tunnelbench.system import netdev, netns_files, rtnetlink, sockdiag, stopping
from tunnelbench.system.command import in_netns, run, spawn

#: ``stderr`` for :meth:`Host.spawn`: into the same file as standard output.
SAME_AS_STDOUT: Final = "stdout"


def ethtool_words(features: Mapping[str, bool]) -> list[str]:
    """``ethtool -K`` arguments after the device: ``gro on tso off``."""
    return [word for name, on in features.items() for word in (name, "on" if on else "off")]


class Host(ABC):
    """Where one role of a lab runs (see the module's contract)."""

    #: How this host is named in messages: a namespace, an SSH destination.
    name: str
    #: Whether :meth:`qdiscs` and :meth:`read_net` are answered in this process, without
    #: starting one (a namespace's, over rtnetlink and its /proc/net): cheap enough to
    #: read ten times a second through a trial (:mod:`tunnelbench.probes.backlog`).
    reads_in_process: bool = False

    @abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float = 30.0,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]: ...

    @abstractmethod
    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | str | None = None,
    ) -> "subprocess.Popen[bytes]": ...

    @abstractmethod
    def write(self, path: Path, text: str, *, mode: int = 0o644) -> None: ...

    @abstractmethod
    def make_directory(self, path: Path, *, mode: int = 0o700) -> None:
        """Create a directory (its parent exists; it does not) and record it."""

    @abstractmethod
    def read(self, path: Path) -> str: ...

    @abstractmethod
    def record(self, path: Path, *, kind: str) -> None:
        """``kind``: ``"file"``, ``"directory"`` or ``"cgroup"``."""

    def interrupt(self, proc: "subprocess.Popen[bytes]") -> None:
        """Stop a process :meth:`spawn` started as Ctrl-C would (SIGINT: ping then prints
        its summary), by its PID; ``proc`` is what :meth:`spawn` returned."""
        proc.send_signal(signal.SIGINT)

    def interrupt_between_calls(self, proc: "subprocess.Popen[bytes]") -> None:
        """SIGINT to a generator's client only while it blocks in one of its send loop's
        system calls, where iperf3's handler cannot break its heap
        (:mod:`tunnelbench.system.stopping`); after a bounded look, wherever it is."""
        self.interrupt(proc)

    def read_net(self, names: Sequence[str]) -> str:
        """The host's ``/proc/net/<name>`` files (its network namespace's), concatenated."""
        return self.run(["cat", *(f"/proc/net/{name}" for name in names)]).stdout

    def qdiscs(self) -> str:
        """Every queue discipline of the host with its statistics, as
        ``tc -s -j qdisc show`` prints them."""
        return self.run(["tc", "-s", "-j", "qdisc", "show"]).stdout

    def tcp_sockets(self) -> sockdiag.TcpSockets:
        """The host's TCP sockets and counters, asked of its kernel from this process
        (:attr:`reads_in_process`); a :class:`LabError` where it cannot be."""
        raise LabError(f"{self.name}'s TCP sockets cannot be read from this process")

    def set_sysctls(self, values: Mapping[str, str]) -> None:
        """Set network sysctls of the role (``net.ipv4.ip_forward`` -> ``1``)."""
        self.run(["sysctl", "-q", "-w", *(f"{key}={value}" for key, value in values.items())])

    def set_offloads(self, device: str, features: Mapping[str, bool]) -> None:
        """Turn ``tso``, ``gso`` or ``gro`` on or off on ``device``; a :class:`LabError`
        names each change the device did not take."""
        done = self.run(["ethtool", "-K", device, *ethtool_words(features)], check=False)
        # ethtool lists what did not take as "[requested on]" (and exits 1 when nothing
        # did, 0 when some changes took).
        refused = [line.strip() for line in done.stdout.splitlines() if "[requested" in line]
        if done.returncode != 0 and not refused:
            refused = [done.stderr.strip() or f"ethtool exited with status {done.returncode}"]
        if refused:
            raise LabError(
                f"offloads of {device} on {self.name} did not apply: {'; '.join(refused)}"
            )

    def links_up(self, devices: Sequence[str]) -> bool:
        """Whether each of ``devices`` is up with its operational state up (carrier)."""
        state = {
            link["ifname"]: link["operstate"]
            for link in json.loads(self.run(["ip", "-j", "link", "show"]).stdout)
        }
        return all(state.get(device) == "UP" for device in devices)


class NetnsHost(Host):
    """A role in a network namespace of this machine; its files live in the lab's
    directory on this machine's file system, its processes are this machine's.

    ``cpus``: the cores the role is held to (:mod:`tunnelbench.lab.placement`); every
    process it starts runs under ``taskset`` on them, threads it starts later included.
    ``cgroup``: the role's CPU budget (:func:`tunnelbench.lab.cgroup.limit_roles`), which
    every process it starts enters before it executes.
    """

    reads_in_process = True

    def __init__(
        self,
        namespace: str,
        state: LabState,
        cpus: str | None = None,
        cgroup: Path | None = None,
    ) -> None:
        self.name = namespace
        self.state = state
        self.cpus = cpus
        self.cgroup = cgroup

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float = 30.0,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return run(self.command(argv), check=check, timeout=timeout, input_text=input_text)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as it runs in the namespace. ``ip`` and ``tc`` are pointed at it with
        ``-n`` (they enter it themselves, without ``ip netns exec``'s private mount of
        /sys: a probe reading counters ten times a second pays for that)."""
        if argv and argv[0] in ("ip", "tc") and "-n" not in argv[1:2]:
            return [argv[0], "-n", self.name, *argv[1:]]
        return in_netns(self.name, argv)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | str | None = None,
    ) -> "subprocess.Popen[bytes]":
        full = self.spawn_argv(argv)
        with ExitStack() as files:
            out = files.enter_context(stdout.open("wb")) if stdout else subprocess.DEVNULL
            err: int | IO[bytes]
            if stderr == SAME_AS_STDOUT:
                err = subprocess.STDOUT
            elif isinstance(stderr, Path):
                err = files.enter_context(stderr.open("wb"))
            else:
                err = subprocess.DEVNULL
            proc = spawn(full, stdout=out, stderr=err)
        self.state.add_process(proc.pid, full)
        return proc

    def spawn_argv(self, argv: Sequence[str]) -> list[str]:
        """What :meth:`spawn` runs for ``argv``: in the namespace, in the role's cgroup
        and under ``taskset`` on the role's cores when it has them."""
        pinned = ["taskset", "-c", self.cpus, *argv] if self.cpus else list(argv)
        if self.cgroup is None:
            return in_netns(self.name, pinned)
        # The shell moves itself, then becomes the program: no moment outside. Before
        # `ip netns exec`, whose fresh /sys has no cgroup file systems mounted.
        enter = 'echo $$ >"$0" && exec "$@"'
        return ["sh", "-c", enter, str(self.cgroup / "cgroup.procs"), *in_netns(self.name, pinned)]

    def interrupt_between_calls(self, proc: "subprocess.Popen[bytes]") -> None:
        stopping.interrupt(proc.pid)  # ours, by its PID

    def write(self, path: Path, text: str, *, mode: int = 0o644) -> None:
        if str(path) not in self.state.files:
            self.state.add_file(path)  # recorded first: teardown finds even a half-written one
        # Never through a symlink; the mode is set before the text is: a private key is
        # never readable by others, not even for a moment. A private file is always a new
        # one (never a file someone else created and could still open).
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        if not mode & 0o077:
            flags |= os.O_EXCL
        fd = os.open(path, flags, mode)
        with os.fdopen(fd, "w") as out:
            os.fchmod(fd, mode)
            out.write(text)

    def make_directory(self, path: Path, *, mode: int = 0o700) -> None:
        self.state.add_directory(path)
        path.mkdir(mode=mode)

    def read(self, path: Path) -> str:
        return path.read_text(errors="replace")

    def read_net(self, names: Sequence[str]) -> str:
        try:
            return netns_files.read(self.name, names)
        except OSError as exc:
            raise LabError(f"cannot read /proc/net in {self.name}: {exc}") from None

    # The five below go through the kernel from a thread in the namespace: no process
    # (an emulated guest takes 0.2-0.5 s to start each; a lab's build ran 10 of them,
    # and every trial nine tc).

    def qdiscs(self) -> str:
        try:
            return json.dumps(netns_files.inside(self.name, rtnetlink.qdiscs))
        except OSError as exc:
            raise LabError(f"cannot read the qdiscs of {self.name}: {exc}") from None

    def tcp_sockets(self) -> sockdiag.TcpSockets:
        try:
            return netns_files.inside(self.name, sockdiag.open_here)
        except OSError as exc:
            raise LabError(f"cannot open the TCP sockets of {self.name}: {exc}") from None

    def set_sysctls(self, values: Mapping[str, str]) -> None:
        try:
            netns_files.inside(self.name, lambda: netdev.write_sysctls(values))
        except OSError as exc:
            raise LabError(f"cannot set sysctls in {self.name}: {exc}") from None

    def set_offloads(self, device: str, features: Mapping[str, bool]) -> None:
        try:
            refused = netns_files.inside(self.name, lambda: netdev.set_offloads(device, features))
        except OSError as exc:
            raise LabError(f"cannot set the offloads of {device} in {self.name}: {exc}") from None
        if refused:
            raise LabError(
                f"offloads of {device} in {self.name} did not apply: {'; '.join(refused)}"
            )

    def links_up(self, devices: Sequence[str]) -> bool:
        try:
            return netns_files.inside(
                self.name, lambda: all(netdev.running(device) for device in devices)
            )
        except OSError as exc:
            raise LabError(
                f"cannot read the state of {', '.join(devices)} in {self.name}: {exc}"
            ) from None

    def record(self, path: Path, *, kind: str) -> None:
        adders = {
            "file": self.state.add_file,
            "directory": self.state.add_directory,
            "cgroup": self.state.add_cgroup,
        }
        adders[kind](path)
