"""Real OpenSSH servers, one per lab role, for the tests of real hosts over SSH.

A test of that mode needs hosts that behave like remote machines: a real sshd with real
keys, host-key checking and login shells, not a mock of ``ssh``. Each role's sshd (Debian's,
unpacked by ``scripts/unpack-daemon``) listens on 127.0.0.1:22 of the role's network
namespace. ssh reaches it through ``ip netns exec NS nc -F``, which connects from inside the
namespace and hands the socket to ssh (ProxyUseFdpass): the host namespace gets no listener,
address or route, and ssh sees the connection close the moment sshd goes, as over a real
network (a plain ``nc`` in between would keep the client waiting).

sshd insists on /run/sshd and an ``sshd`` user, which the host must not get. So each sshd
runs in a private mount namespace with its own tmpfs /run (which also keeps the roles'
/run/tunnelbench and /run/wireguard apart, as on separate machines) and its own
/etc/passwd bound over the host's. Busybox roles imitate OpenWrt: PATH holds busybox
applets, iperf3 and iperf only, and root's login shell is busybox's ash.

Each machine has its own PID namespace, as a user's router has its own kernel: what runs
there sees its own PIDs in its own /proc, so a PID a host reports can never be taken for
one of this machine's. Its PID 1 is a small init (a shell) that outlives sshd: a test
that stops a host's sshd loses the logins and keeps what runs there, as on a real host,
and :meth:`SshdHosts.start` has the init start sshd again. Leaving the ``with`` block
ends the init, and with it everything still running on the machine.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SSHD = REPO / ".tools" / "bin" / "sshd"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SSHD_USER = "sshd:x:65534:65534:sshd privilege separation:/run/sshd:/usr/sbin/nologin"
# Keys only, root included; StrictModes off as the files live in a test's temporary directory.
SSHD_SETTINGS = """PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
LogLevel VERBOSE
PrintMotd no
Subsystem sftp internal-sftp
"""
STARTUP_SECONDS = 5.0
STOP_SECONDS = 5.0

# The machine's init, PID 1 of its PID namespace ($1 passwd, $2 sshd, $3 config, $4 the
# file whose presence keeps sshd down). -n: without it, mount creates the host's
# /run/mount for its bookkeeping (utab). The login records are bound to /dev/null: a
# lab's logins are none of the host's business. Waiting for sshd, the shell also reaps
# the orphans PID 1 inherits.
START = """set -e
mount -n -t tmpfs -o mode=0755,size=16m tb-sshd /run
mkdir -m 0755 /run/sshd
mount -n --bind "$1" /etc/passwd
for record in /var/log/wtmp /var/log/btmp /var/log/lastlog; do
  [ ! -e "$record" ] || mount -n --bind /dev/null "$record"
done
set +e
while :; do
  [ -e "$4" ] || "$2" -D -e -f "$3"
  sleep 0.05
done
"""


def keygen(path: Path, comment: str) -> None:
    if not path.exists():
        argv = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]
        subprocess.run(argv, check=True)


def private_passwd(home: Path, shell: str | None) -> str:
    """The host's /etc/passwd with an ``sshd`` user, and root's home (and shell) replaced.

    root's home is empty: bash reads ~/.bashrc when sshd starts it, and the host's may put
    its own directories in front of PATH.
    """
    lines = []
    for line in Path("/etc/passwd").read_text().splitlines():
        if line.startswith("root:"):
            fields = line.split(":")
            line = ":".join([*fields[:5], str(home), shell or fields[6]])
        lines.append(line)
    if not any(line.startswith("sshd:") for line in lines):
        lines.append(SSHD_USER)
    return "\n".join(lines) + "\n"


def _children(pid: int) -> list[int]:
    """``pid``'s children, oldest first."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class SshdHosts:
    """One sshd per role (role name -> network namespace) while the ``with`` block runs."""

    def __init__(
        self,
        workdir: Path,
        roles: dict[str, str],
        busybox: frozenset[str] = frozenset(),
        path_dirs: Sequence[str] = (),
        own_pids: bool = True,
    ) -> None:
        if unknown := busybox - roles.keys():
            raise ValueError(f"busybox roles that are not roles: {sorted(unknown)}")
        self.workdir, self.roles, self.busybox = workdir, dict(roles), busybox
        self.path_dirs = list(path_dirs)
        #: Whether each machine has its own PID namespace (False: for processes started
        #: outside the machines, such as a lab's tunnel daemons, to be seen there).
        self.own_pids = own_pids
        self.ssh_config = workdir / "ssh_config"
        self.known_hosts = workdir / "known_hosts"
        self.identity = workdir / "id_ed25519"
        self.wrong_key = workdir / "wrong_key"
        #: role -> the machine: ``unshare``, whose forked child is the machine's init.
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    def alias(self, role: str) -> str:
        return role

    def pid(self, role: str) -> int:
        """The role's sshd listener, as this machine numbers it (0: sshd is down)."""
        init = self._init(role)
        found = [p for p in _children(init) if Path(_exe(p)).name == "sshd"] if init else []
        return found[0] if found else 0

    def inside(self, role: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run on the role's machine, as a process of its own there would: in
        its network, mount and PID namespaces (seen in its /proc)."""
        init = self._init(role)
        if not init:
            raise RuntimeError(f"the machine of {role} is not up")
        return ["nsenter", "--target", str(init), "--net", "--mount", "--pid", "--", *argv]

    def _init(self, role: str) -> int:
        """The machine's PID 1, as this machine numbers it (0: not up)."""
        children = _children(self._processes[role].pid)
        return children[0] if children else 0

    def log(self, role: str) -> str:
        return (self.workdir / role / "sshd.log").read_text(errors="replace")

    def __enter__(self) -> "SshdHosts":
        if not os.access(SSHD, os.X_OK):
            raise RuntimeError(f"{SSHD} is missing: run `make setup`")
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            keygen(self.identity, "tunnelbench-test")
            keygen(self.wrong_key, "tunnelbench-test-unauthorized")
            (self.workdir / "authorized_keys").write_bytes(
                self.identity.with_suffix(".pub").read_bytes()
            )
            for role in self.roles:
                (self.workdir / role / "home").mkdir(parents=True, exist_ok=True)
                keygen(self.workdir / role / "ssh_host_ed25519_key", role)
            self.known_hosts.write_text(self._known_hosts(self.roles))
            self.ssh_config.write_text(self._client_config(self.known_hosts))
            for role in self.roles:
                self._start(role)
            for role in self.roles:
                self._wait_ready(role)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for role, machine in self._processes.items():
            self.stop(role)
            # unshare --kill-child: the init is killed with it, and every process of
            # the machine with the init.
            machine.kill()
            machine.wait()

    def unknown_host_config(self, role: str) -> Path:
        """An ssh_config like :attr:`ssh_config` whose known_hosts lacks ``role``'s key."""
        known_hosts = self.workdir / f"known_hosts.unknown-{role}"
        known_hosts.write_text(self._known_hosts(r for r in self.roles if r != role))
        config = self.workdir / f"ssh_config.unknown-{role}"
        config.write_text(self._client_config(known_hosts))
        return config

    def _known_hosts(self, roles: Iterable[str]) -> str:
        # Keyed by HostKeyAlias: to ssh, every role is 127.0.0.1:22.
        return "".join(
            f"{self.alias(role)} " + (self.workdir / role / "ssh_host_ed25519_key.pub").read_text()
            for role in roles
        )

    def _client_config(self, known_hosts: Path) -> str:
        return "".join(
            f"Host {self.alias(role)}\n"
            "  HostName 127.0.0.1\n"
            "  Port 22\n"
            "  User root\n"
            f'  IdentityFile "{self.identity}"\n'
            "  IdentitiesOnly yes\n"
            f"  HostKeyAlias {self.alias(role)}\n"
            f'  UserKnownHostsFile "{known_hosts}"\n'
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
            f"  ProxyCommand ip netns exec {namespace} nc -F %h %p\n"
            "  ProxyUseFdpass yes\n"
            for role, namespace in self.roles.items()
        )

    def _busybox_dir(self) -> Path:
        """A directory of busybox applets, iperf3 and iperf: PATH on a busybox role."""
        directory = self.workdir / "busybox-bin"
        if not directory.exists():
            busybox = shutil.which("busybox") or "/bin/busybox"
            directory.mkdir()
            listed = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
            for applet in listed.stdout.split():
                (directory / applet).symlink_to(busybox)
            # OpenWrt ships iperf3 and iperf (2) as packages of their own, not as applets.
            (directory / "iperf3").symlink_to(shutil.which("iperf3") or "/usr/bin/iperf3")
            (directory / "iperf").symlink_to(shutil.which("iperf") or "/usr/bin/iperf")
        return directory

    def _start(self, role: str) -> None:
        namespace, here = self.roles[role], self.workdir / role
        if role in self.busybox:
            path, shell = str(self._busybox_dir()), str(self._busybox_dir() / "sh")
        else:
            path = ":".join([*self.path_dirs, str(REPO / ".tools" / "bin"), SYSTEM_PATH])
            shell = None
        (here / "passwd").write_text(private_passwd(here / "home", shell))
        (here / "passwd").chmod(0o644)
        # sshd applies SetEnv last (after its default PATH, ~/.ssh/environment and PAM's), so
        # PATH is this; only the shell's startup files could change it (see private_passwd).
        (here / "sshd_config").write_text(
            f"# sshd of role {role} in network namespace {namespace} (tests/sshd.py)\n"
            "ListenAddress 127.0.0.1:22\n"
            f'HostKey "{here / "ssh_host_ed25519_key"}"\n'
            f'AuthorizedKeysFile "{self.workdir / "authorized_keys"}"\n'
            f"{SSHD_SETTINGS}"
            f'SetEnv "PATH={path}"\n'
        )
        subprocess.run(["ip", "-n", namespace, "link", "set", "lo", "up"], check=True)
        (here / "down").unlink(missing_ok=True)
        argv = ["ip", "netns", "exec", namespace, "unshare", "--mount", "--propagation", "private"]
        argv += ["--fork", "--kill-child"]
        if self.own_pids:
            argv += ["--pid", "--mount-proc"]
        argv += ["sh", "-c", START, "sh"]  # and START's $1, $2, $3, $4:
        argv += [str(here / "passwd"), str(SSHD), str(here / "sshd_config"), str(here / "down")]
        with open(here / "sshd.log", "ab") as log:
            self._processes[role] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )

    def _wait_ready(self, role: str) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        process, ssh = self._processes[role], ["ssh", "-F", str(self.ssh_config)]
        ssh += ["-o", "BatchMode=yes", "-o", "ConnectTimeout=2", self.alias(role), "true"]
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"sshd of {role} exited ({process.returncode}):\n{self.log(role)}"
                )
            done = subprocess.run(ssh, capture_output=True, text=True, timeout=10)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"sshd of {role} lets no one in ({done.stderr.strip()}):\n{self.log(role)}"
                )
            time.sleep(0.1)

    def _connections(self, listener: int) -> list[int]:
        """The sshd processes serving the connections of ``listener``.

        They run in sessions of their own (sshd calls setsid), so neither the listener's
        exit nor a process-group signal ends them; but they share its private mount
        namespace, which nothing else has, and its binary. Commands run over SSH are left
        alone, as on a host whose sshd goes: what a test leaves running must stay visible.
        """
        try:
            mount_ns, exe = (os.readlink(f"/proc/{listener}/{n}") for n in ("ns/mnt", "exe"))
        except OSError:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if (
                    entry.name.isdigit()
                    and entry.name != str(listener)
                    and os.readlink(entry / "ns" / "mnt") == mount_ns
                    and os.readlink(entry / "exe") == exe
                ):
                    found.append(int(entry.name))
        return found

    def sessions(self, role: str) -> list[int]:
        """The sshd processes serving the role's connections now (its logins)."""
        return self._connections(self.pid(role))

    def start(self, role: str) -> None:
        """Starts the role's sshd again (after :meth:`stop`): the host is back. Its init
        starts it, in the machine's namespaces, with what still runs there."""
        (self.workdir / role / "down").unlink(missing_ok=True)
        self._wait_ready(role)

    def stop(self, role: str) -> None:
        """Ends the role's sshd and its connections now (SIGTERM, then SIGKILL); the
        machine, and what else runs on it, stays."""
        if self._processes[role].poll() is not None:
            return
        (self.workdir / role / "down").touch()
        listener = self.pid(role)
        if not listener:
            return
        connections = self._connections(listener)
        for pid in (listener, *connections):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        # Not this process's children: watch them go, there is no exit code.
        deadline = time.monotonic() + STOP_SECONDS
        watched = [listener, *connections]
        while (alive := [p for p in watched if _running(p)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
