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


def test_the_live_line_shortens_by_whole_fields():
    """At 80 columns the line ended mid-unit ("... 3/10 s  (ETA 2m 10s)  last 941 Mbit/");
    it now drops whole fields: the last figure, then the ETA, then the configuration's
    items from its end; the position and the trial's seconds stay."""
    described = ["wireguard", "wireguard-go-debian", "mtu 1420", "4 streams", "upload",
                 "wan 1000M", "pfifo 1000", "delay 20ms±2ms"]  # fmt: skip
    args = ("[12/40+]", described, "run 3 ... 7/12 s", "(ETA 14m 05s)", "last 941 Mbit/s")
    full = progress.status_line(*args, 10**6)
    assert full == (
        "[12/40+] wireguard, wireguard-go-debian, mtu 1420, 4 streams, upload, wan 1000M,"
        " pfifo 1000, delay 20ms±2ms, run 3 ... 7/12 s  (ETA 14m 05s)  last 941 Mbit/s"
    )
    fields = {"last 941 Mbit/s", "(ETA 14m 05s)", "run 3 ... 7/12 s"}
    seen = set()
    for limit in range(20, len(full) + 1):
        line = progress.status_line(*args, limit)
        assert len(line) <= limit or line == "[12/40+] run 3 ... 7/12 s"
        assert line.startswith("[12/40+] ") and "run 3 ... 7/12 s" in line
        # Every field shown is whole; an item of the configuration too.
        for field in fields:
            assert field in line or field.split()[0] not in line.replace("run 3", ""), line
        if ", run 3" in line:
            shown = line.removeprefix("[12/40+] ").split(", run 3")[0].split(", ")
            assert all(item in described or item == "…" for item in shown), line
        seen.add(line)
    assert progress.status_line(*args, 80) == (
        "[12/40+] wireguard, wireguard-go-debian, mtu 1420, …, run 3 ... 7/12 s"
    )
    assert len(seen) > 5  # it shortens in steps, not all at once


def test_the_live_line_fits_a_narrow_terminal():
    """On a pseudo-terminal of 40 columns, every redraw fits in 39 characters (the
    plain line it leaves behind is a log line, whole)."""
    import fcntl
    import struct
    import termios

    leader, follower = pty.openpty()
    try:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
        with os.fdopen(follower, "w", closefd=False) as tty:
            display = progress.LiveProgress(tty, refresh_s=0.05)
            _play(display, 0.3)
        out = b""
        while True:
            chunk = os.read(leader, 65536)
            out += chunk
            if len(chunk) < 65536:
                break
    finally:
        os.close(leader)
        os.close(follower)
    drawn = re.findall(r"\r\033\[K(\[\d/2\][^\r\n]*)", out.decode())
    redraws = [r for r in drawn if re.search(r" \.\.\. \d/1 s", r)]
    assert redraws and all(len(line) <= 39 for line in redraws), redraws
    assert any(", …, run" in line for line in redraws), redraws
