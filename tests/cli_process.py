"""The real command in a process of its own, forked from the test's process with
tunnelbench already imported.

A fresh ``python -m tunnelbench`` spends 0.4-0.6 s here starting Python and importing
the tool before it reads its first argument; the unit tests' ~400 command lines spent
most of their time on that. A forked child still parses its own arguments, writes to
its own descriptors, exits with its own code and changes nothing in the test's process,
which is what the tests hold it to (tests/unit/test_cli_process.py, against a new
interpreter's answers). What only a new interpreter shows (start-up, the ``__main__``
module, the environment read at import) is run by the tests that start ``python -m
tunnelbench`` themselves: Ctrl-C, concurrent runs, ``sudo``, full disks, the kernel suite.
"""

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from tunnelbench.cli.main import main as cli_main

#: What a child that raised exits with (Python's own code for an uncaught exception).
UNCAUGHT = 1
#: Variables tunnelbench reads when it is imported (module constants): a value other than
#: this process's needs a new interpreter to take effect.
READ_AT_IMPORT = ("TUNNELBENCH_STATE_DIR", "TUNNELBENCH_LOCK")


def run(
    args: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``tunnelbench ARGS`` as :func:`subprocess.run` with ``capture_output=True,
    text=True`` would return it. ``env`` replaces the environment, as it does there."""
    argv = ["tunnelbench", *args]
    if env is not None and any(env.get(k) != os.environ.get(k) for k in READ_AT_IMPORT):
        return subprocess.run(
            [sys.executable, "-m", "tunnelbench", *args],
            cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    # Files, not pipes: the child may write more than a pipe holds before it exits.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        stdin_r, stdin_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(stdin_w)
            _child(argv, cwd, env, stdin_r, out.fileno(), err.fileno())
        os.close(stdin_r)
        # The child may exit without reading its input.
        with contextlib.suppress(BrokenPipeError), os.fdopen(stdin_w, "w") as feed:
            feed.write(input or "")
        code = _wait(pid, timeout, argv)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            argv, code, out.read().decode(errors="replace"), err.read().decode(errors="replace")
        )


def _wait(pid: int, timeout: float, argv: list[str]) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(argv, timeout)
        time.sleep(0.005)


def _child(
    argv: list[str],
    cwd: Path | str | None,
    env: Mapping[str, str] | None,
    stdin: int,
    stdout: int,
    stderr: int,
) -> None:
    code = UNCAUGHT
    try:
        os.setsid()  # the test's Ctrl-C and terminal are not the child's
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.close(stdin)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        sys.argv = argv
        # pytest's log capture sits on the root logger; the command's -v configures its own.
        logging.root.handlers.clear()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            handler = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
            signal.signal(sig, handler)
        try:
            code = cli_main(argv[1:])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            if not isinstance(exit_.code, int | None):
                print(exit_.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = UNCAUGHT
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else UNCAUGHT)


def tunnelbench(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """:func:`tests.integration.helpers.tunnelbench`'s signature, for the unit tests."""
    return run(args, cwd=cwd, timeout=timeout)
