"""The live progress line on a terminal (issue 16, item 5): it redraws one line while a
trial runs (trial k/N, its seconds, the run's ETA, the configuration's last figure) and
leaves exactly the lines the plain mode prints; anything that is not a terminal gets the
plain lines."""

import io
import os
import pty
import re
import time

from tunnelbench.bench import progress
from tunnelbench.model.plan import TrafficSettings, Trial, TrialConfig
from tunnelbench.model.records import RunStatus, TrialStatus


def _trials() -> list[Trial]:
    config = TrialConfig(traffic=TrafficSettings(duration=1, warmup=0))
    return [Trial(seq=1, repetition=1, config=config), Trial(seq=2, repetition=2, config=config)]


def _play(display: progress.Progress, pause: float) -> None:
    trials = _trials()
    display.run_started(7, len(trials), trials)
    for trial, goodput in zip(trials, (941e6, 952e6), strict=True):
        display.trial_started(trial)
        time.sleep(pause)
        display.trial_finished(trial, TrialStatus.OK, "", goodput)
    display.run_finished(7, RunStatus.COMPLETE)


def _final(text: str) -> str:
    """What a terminal shows in the end: each line as its last redraw left it."""
    lines = []
    for line in text.split("\n"):
        kept = line.rsplit("\r\033[K", 1)[-1]
        lines.append(kept)
    return "\n".join(lines)


def test_the_live_line_redraws_and_leaves_the_plain_lines():
    live, plain = io.StringIO(), io.StringIO()
    _play(progress.LiveProgress(live, refresh_s=0.05), 0.3)
    _play(progress.LineProgress(plain), 0.0)
    text = live.getvalue()
    drawn = re.findall(r"\r\033\[K(\[\d/2\][^\r\n]*)", text)
    redraws = [r for r in drawn if re.search(r" \.\.\. \d/1 s", r)]
    assert len(redraws) >= 4  # several per trial
    assert all("ETA" in r for r in redraws)
    # The second run of the configuration shows the figure of the first.
    assert any(r.startswith("[2/2]") and "last 941 Mbit/s" in r for r in redraws)
    assert not any(r.startswith("[1/2]") and "last" in r for r in redraws)
    # Once drawn, the terminal holds the plain mode's lines, but for the ETA, which
    # the live mode computes from a different elapsed time.
    strip = re.compile(r"  \(ETA [^)]*\)")
    assert strip.sub("", _final(text)) == strip.sub("", plain.getvalue())


def test_only_a_terminal_gets_the_live_line(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    assert type(progress.for_terminal(io.StringIO())) is progress.LineProgress
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            assert type(progress.for_terminal(tty)) is progress.LiveProgress
            monkeypatch.setenv("TERM", "dumb")
            assert type(progress.for_terminal(tty)) is progress.LineProgress
    finally:
        os.close(leader)
        os.close(follower)
