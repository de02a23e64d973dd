"""Run ``tunnelbench.cli.main.main`` in-process on generated input and check that it fails
cleanly: the shared part of the fuzz suites (test_fuzz_plans.py, test_fuzz_cli.py).

A clean outcome is exit 0 or 2 (1 only for a documented fault of the machine, such as
writing a report to a full disk), no traceback and no "internal error" (main's last line
of defence, which names a bug), at most one error line and every line of bounded length,
and no file left in the working directory. Time is bounded by Hypothesis' deadline.

``TB_FUZZ_EXAMPLES`` sets the examples per property (default :data:`DEFAULT_EXAMPLES`),
for a long run by hand: ``TB_FUZZ_EXAMPLES=20000 .venv/bin/pytest -q tests/unit/test_fuzz_*``.
"""

import contextlib
import io
import os
import re
import shutil
import signal
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, settings

from tunnelbench.cli.main import main

DEFAULT_EXAMPLES = 150
#: A call that has not returned after this long is a hang (the deadline is 10 s).
HANG_S = 30
#: The longest line main may print on an error (a plan problem is capped at 300
#: characters; argparse's usage lines wrap).
LINE_MAX = 600
#: Exit 1 is a fault of the machine, and only these say so.
SYSTEM_FAULTS = re.compile(r"^tunnelbench: error: -o: cannot write ")


def examples(default: int = DEFAULT_EXAMPLES) -> int:
    return int(os.environ.get("TB_FUZZ_EXAMPLES", default))


def fuzz_settings(default: int = DEFAULT_EXAMPLES) -> settings:
    """Reproducible (derandomized, no example database written) and time-bounded."""
    return settings(
        max_examples=examples(default),
        derandomize=True,
        database=None,
        deadline=timedelta(seconds=10),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


@dataclass
class Tally:
    """What a fuzz run tried, for the line it prints at the end."""

    examples: int = 0
    codes: Counter[int] = field(default_factory=Counter)

    def line(self, what: str) -> str:
        codes = ", ".join(f"exit {c}: {n}" for c, n in sorted(self.codes.items()))
        return f"fuzz {what}: {self.examples} examples ({codes}); tracebacks: 0"


@contextlib.contextmanager
def empty_workdir() -> Iterator[Path]:
    """An empty working directory for the duration; main runs inside it."""
    before = os.getcwd()
    path = Path(tempfile.mkdtemp(prefix="tb-fuzz-"))
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(before)
        shutil.rmtree(path, ignore_errors=True)


class Hung(BaseException):
    """Raised by the alarm in a call of main that blocks (a FIFO opened without a
    reader): Hypothesis' deadline only measures calls that return."""


def _hung(signum: int, frame: object) -> None:
    raise Hung(f"main did not return within {HANG_S} s")


def run_main(argv: Sequence[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(HANG_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse: usage errors (2), --version (0)
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return Outcome(code, out.getvalue(), err.getvalue())


def check_clean(argv: Sequence[str], workdir: Path, tally: Tally) -> Outcome:
    """Run ``argv`` in ``workdir`` (empty) and assert a clean outcome; the workdir is
    emptied again afterwards so that one failure is reported once."""
    outcome = run_main(argv)
    tally.examples += 1
    tally.codes[outcome.code] += 1
    left = sorted(p.name for p in workdir.iterdir())
    for path in workdir.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    shown = f"argv={[a[:80] for a in argv]!r}\nstderr={outcome.stderr[:2000]!r}"
    assert "Traceback" not in outcome.stderr, shown
    assert "internal error" not in outcome.stderr, shown
    assert outcome.code in (0, 1, 2), shown
    if outcome.code == 1:
        assert SYSTEM_FAULTS.match(outcome.stderr), shown
    errors = [line for line in outcome.stderr.splitlines() if re.match(r"\S+.*error: ", line)]
    assert len(errors) <= 1, shown
    assert all(len(line) <= LINE_MAX for line in outcome.stderr.splitlines()), shown
    if outcome.code != 0:
        assert outcome.stderr.strip(), shown
    assert left == [], f"created {left}; {shown}"
    return outcome
