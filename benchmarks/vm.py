"""A lab in a VM (lab.kernel = debian) against the same lab on the host, side by side:
the guest's start (boot, tunnelbench's start and capability probe) and what a trial
costs besides its traffic, with the ratio to a host trial; then two guests started one
after the other against two at once (`tunnelbench doctor --kernel debian`, a boot and
the capability probe). Run it alone (about 4 min)."""

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RUNS = 5
DURATION, WARMUP = 2, 1
PLAN = """name = "vm-overhead"
repetitions = {runs}
[base]
"lab.kernel" = "{kernel}"
"lab.wan.rate" = "20mbit"
"lab.wan.shaper" = "htb"
"traffic.duration" = {duration}
"traffic.warmup" = {warmup}
[matrix]
"tunnel.kind" = ["vxlan"]
"""


def timed_run(kernel: str) -> tuple[float, list[float]]:
    """Seconds from the command's start to its first trial's start, and each trial's
    wall time, as the run's JSON progress events arrive."""
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "p.toml"
        plan.write_text(PLAN.format(runs=RUNS, kernel=kernel, duration=DURATION, warmup=WARMUP))
        argv = [sys.executable, "-m", "tunnelbench", "run", str(plan), "--json", "-q"]
        began = time.monotonic()
        proc = subprocess.Popen(
            [*argv[:-1], "--db", str(Path(tmp) / "b.db")],
            cwd=tmp, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        first: float | None = None
        started: dict[int, float] = {}
        walls: list[float] = []
        for line in proc.stdout:
            event, now = json.loads(line), time.monotonic()
            if event["event"] == "trial_started":
                first = first or now - began
                started[event["seq"]] = now
            elif event["event"] == "trial_finished" and event["seq"] in started:
                assert event["status"] == "ok", event
                walls.append(now - started[event["seq"]])
        assert proc.wait() == 0
        assert first is not None
        return first, walls


def guest_starts(at_once: int) -> list[float]:
    """Wall seconds of each of ``at_once`` guests' starts begun together."""
    argv = [sys.executable, "-m", "tunnelbench", "doctor", "--kernel", "debian", "--json"]
    seconds: list[float] = []

    def start() -> None:
        began = time.monotonic()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        seconds.append(time.monotonic() - began)

    threads = [threading.Thread(target=start) for _ in range(at_once)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seconds) == at_once, "a guest did not start"
    return sorted(seconds)


def main() -> None:
    host_start, host = timed_run("host")
    vm_start, vm = timed_run("debian")
    traffic = DURATION + WARMUP
    h, v = statistics.median(host), statistics.median(vm)
    print(f"{RUNS} trials of vxlan at 20 Mbit/s, {traffic} s of traffic each")
    print(f"until the first trial:  host {host_start:5.1f} s   VM {vm_start:5.1f} s")
    print(f"trial wall (median):    host {h:5.1f} s   VM {v:5.1f} s   ratio {v / h:.2f}")
    print(
        f"besides the traffic:    host {h - traffic:5.1f} s   VM {v - traffic:5.1f} s"
        f"   ratio {(v - traffic) / (h - traffic):.1f}"
    )
    one = guest_starts(1)[0]
    both = guest_starts(2)
    print(
        f"two guests' starts:     one after the other {2 * one:5.1f} s   at once {both[-1]:5.1f} s"
        f" ({both[0]:.1f} s, {both[1]:.1f} s)   ratio {both[-1] / (2 * one):.2f}"
    )


if __name__ == "__main__":
    main()
