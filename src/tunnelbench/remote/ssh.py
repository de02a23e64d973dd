"""One multiplexed OpenSSH connection per host, and the errors a user can act on.

The OpenSSH client, not a Python SSH library: a user's ``~/.ssh/config`` (aliases,
ProxyJump, ports, identities), agent and known_hosts then work exactly as their own
``ssh`` does, with nothing to install on either side. One master connection
(``ControlMaster``) per host carries every command of a run, so a probe started ten
times costs no new key exchange on a router's small CPU.

What is never relaxed: ``BatchMode`` (no prompt can hang a run: a key that needs a
passphrase without an agent is an authentication failure), ``StrictHostKeyChecking=yes``
(an unknown or changed host key is refused, never silently accepted), a connect
timeout, keep-alives that notice a dropped connection within seconds, and a timeout on
every command.
"""

import logging
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tunnelbench.errors import LabError, UserError

log = logging.getLogger("tunnelbench.remote.ssh")

#: Keep-alives: a silent peer is declared lost after about INTERVAL x COUNT seconds.
ALIVE_INTERVAL_S, ALIVE_COUNT = 2, 3
SSH_FAILED = 255  # ssh's own exit code: the connection, not the remote command, failed


class Unreachable(LabError):
    """The connection to a host could not be made or was lost."""


def explain(destination: str, stderr: str) -> str:
    """One line for what ssh said when it failed: what happened and what to do."""
    text = stderr.strip()
    lowered = text.lower()
    if "host key verification failed" in lowered or "no matching host key" in lowered:
        if "remote host identification has changed" in lowered:
            return (
                f"{destination}: its host key has CHANGED since it was recorded in known_hosts;"
                " refusing to connect (check the host, then update known_hosts)"
            )
        return (
            f"{destination}: its host key is not in known_hosts; refusing to accept it unseen"
            f" (connect once with `ssh {destination}` and check the fingerprint)"
        )
    if "permission denied" in lowered or "too many authentication failures" in lowered:
        return (
            f"{destination}: authentication failed (no key of the agent or the SSH config was"
            " accepted, and tunnelbench never asks for a password)"
        )
    if "could not resolve hostname" in lowered:
        return f"{destination}: unknown host name ({_last(text)})"
    for sign in ("connection refused", "timed out", "no route to host", "network is unreachable",
                 "connection closed", "connection reset", "broken pipe", "not responding",
                 "proxy dialer did not pass back a connection"):  # fmt: skip
        if sign in lowered:
            return f"{destination}: unreachable ({_last(text)})"
    return f"{destination}: ssh failed ({_last(text) or 'no error output'})"


def _last(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


class Connection:
    """A master connection to ``destination``; :meth:`run` and :meth:`popen` send commands
    over it. ``config``: an SSH config file to use instead of the user's own."""

    def __init__(
        self,
        destination: str,
        control_dir: Path,
        *,
        config: Path | None = None,
        connect_timeout: float = 10.0,
        name: str = "",
    ) -> None:
        self.destination = destination
        self.name = name or destination
        self.config = config
        self.connect_timeout = connect_timeout
        self.socket = control_dir / f"{name or 'host'}.sock"
        self.master: subprocess.Popen[bytes] | None = None
        self._log = control_dir / f"{name or 'host'}.ssh.log"

    def options(self) -> list[str]:
        config = ["-F", str(self.config)] if self.config else []
        return [
            *config,
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}",
            "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
            "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
            "-o", f"ControlPath={self.socket}",
        ]  # fmt: skip

    def open(self, started: Callable[[int], None] | None = None) -> None:
        """Start the master and wait until it carries commands; a failure to connect
        raises :class:`UserError` (nothing was created on the host yet). ``started`` is
        given the master's PID the moment it exists, to record it."""
        with self._log.open("wb") as err:
            self.master = subprocess.Popen(
                ["ssh", *self.options(), "-o", "ControlMaster=yes", "-o", "ControlPersist=no",
                 "-N", "-T", self.destination],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True,  # Ctrl-C reaches tunnelbench, which closes it in order
            )  # fmt: skip
        if started is not None:
            started(self.master.pid)
        deadline = time.monotonic() + self.connect_timeout + 5
        while time.monotonic() < deadline:
            if self.master.poll() is not None:
                raise UserError(explain(self.name, self._log.read_text(errors="replace")))
            if self.socket.exists() and self._check():
                return
            time.sleep(0.05)
        self.close()
        raise UserError(
            f"{self.name}: unreachable (no SSH session within {self.connect_timeout:.0f} s)"
        )

    def _check(self) -> bool:
        done = subprocess.run(
            ["ssh", *self.options(), "-O", "check", self.destination],
            capture_output=True, timeout=5,
        )  # fmt: skip
        return done.returncode == 0

    def alive(self) -> bool:
        return self.master is not None and self.master.poll() is None

    def command(self, argv: Sequence[str] | str) -> list[str]:
        """The local command that runs ``argv`` (a list, or a POSIX sh script) on the host."""
        remote = argv if isinstance(argv, str) else shlex.join(argv)
        return ["ssh", *self.options(), "-o", "ControlMaster=no", "-T", self.destination, remote]

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        check: bool = True,
        timeout: float = 30.0,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on the host to completion. A lost connection raises
        :class:`Unreachable`; with ``check`` a non-zero exit raises :class:`LabError`."""
        if not self.alive():
            raise Unreachable(f"{self.name}: the SSH connection is closed")
        shown = argv if isinstance(argv, str) else shlex.join(argv)
        log.debug("%s: %s", self.name, shown)
        try:
            done = subprocess.run(
                self.command(argv),
                input=input_text,
                stdin=None if input_text is not None else subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                errors="replace",
            )
        except subprocess.TimeoutExpired:
            raise LabError(
                f"{self.name}: `{_short(shown)}` did not finish within {timeout:.0f} s"
            ) from None
        if done.returncode == SSH_FAILED and not self.alive():
            raise Unreachable(
                explain(self.name, self._log.read_text(errors="replace") + done.stderr)
            )
        if check and done.returncode != 0:
            tail = _last(done.stderr) or _last(done.stdout) or "no error output"
            if done.returncode == 127:
                raise UserError(
                    f"{self.name}: `{_short(shown)}`: program not found on the host ({tail})"
                )
            raise LabError(
                f"{self.name}: `{_short(shown)}` failed (exit {done.returncode}): {tail}"
            )
        return done

    def popen(self, script: str) -> "subprocess.Popen[str]":
        """Start ``script`` on the host with its output streamed back line by line."""
        if not self.alive():
            raise Unreachable(f"{self.name}: the SSH connection is closed")
        return subprocess.Popen(
            self.command(script),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )

    def close(self) -> None:
        """End the master (our own process, by its PID) and its socket."""
        if self.master is None:
            return
        if self.master.poll() is None:
            os.kill(self.master.pid, signal.SIGTERM)
            try:
                self.master.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.master.pid, signal.SIGKILL)
                self.master.wait()
        self.socket.unlink(missing_ok=True)
        self.master = None


def _short(command: str) -> str:
    return command if len(command) <= 120 else command[:117] + "..."
