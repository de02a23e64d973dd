"""Progress of a run with adaptive repetitions: the total grows, and says so."""

import io
import json

from tunnelbench.analysis.precision import Precision, State
from tunnelbench.bench.progress import JsonProgress, LineProgress
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.plan import Trial, TrialConfig, TunnelSettings
from tunnelbench.model.records import TrialStatus

BASE = TrialConfig()
VXLAN = TrialConfig(tunnel=TunnelSettings(kind=TunnelKind.VXLAN))
PLANNED = [Trial(1, 1, BASE), Trial(2, 1, VXLAN), Trial(3, 2, BASE), Trial(4, 2, VXLAN)]
ADDED = [Trial(5, 3, VXLAN)]
STANDING = {VXLAN.key(): Precision(State.MORE, 10.0, runs=2, attempts=2)}


def test_lines_mark_a_growing_total_and_announce_each_added_round():
    out = io.StringIO()
    progress = LineProgress(out)
    progress.run_started(1, 4, PLANNED, growing=True)
    progress.trial_started(PLANNED[0])
    progress.trial_finished(PLANNED[0], TrialStatus.OK, "", 941e6)
    progress.round_added(ADDED, STANDING, 2.0)
    progress.trial_started(ADDED[0])
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "run 1: 4 trial(s) to run, more if a configuration's median is not precise enough"
    )
    assert lines[1].startswith("[1/4+] none, 1 stream, upload, run 1 ... 941 Mbit/s")
    assert lines[2] == (
        "round 3: 1 more trial(s), not yet within ±2%: vxlan, 1 stream, upload ±10.0% after 2 runs"
    )
    assert lines[3] == "[5/5+] vxlan, 1 stream, upload, run 3 ..."


def test_a_fixed_run_shows_a_fixed_total():
    out = io.StringIO()
    progress = LineProgress(out)
    progress.run_started(1, 4, PLANNED)
    progress.trial_started(PLANNED[1])
    assert out.getvalue().splitlines()[1] == "[2/4] vxlan, 1 stream, upload, run 1 ..."


def test_json_events_for_an_added_round_and_the_final_precision():
    out = io.StringIO()
    progress = JsonProgress(out)
    progress.run_started(1, 4, PLANNED, growing=True)
    progress.round_added(ADDED, STANDING, 2.0)
    final = Precision(State.NOT_MET, 3.4, runs=10, attempts=10)
    progress.precision_final([(VXLAN, final)], 2.0)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert events[0] == {
        "event": "run_started", "run_id": 1, "trials": 4, "pending": 4, "adaptive": True
    }  # fmt: skip
    assert events[1] == {
        "event": "round_added",
        "repetition": 3,
        "trials": 5,
        "added": 1,
        "target_pct": 2.0,
        "configurations": [
            {
                "seq": 5,
                "configuration": "vxlan, 1 stream, upload",
                "state": "more",
                "half_width_pct": 10.0,
                "runs": 2,
                "attempts": 2,
            }
        ],
    }
    assert events[2]["event"] == "precision"
    assert events[2]["configurations"][0]["text"] == "target not met (±3.4% after 10 runs)"


def test_a_generator_other_than_iperf3_is_named():
    from dataclasses import replace

    from tunnelbench.bench.progress import describe
    from tunnelbench.kinds import Generator

    iperf2 = replace(VXLAN, traffic=replace(VXLAN.traffic, generator=Generator.IPERF2, streams=4))
    assert describe(iperf2) == "vxlan, 4 streams, upload, iperf2"
    assert describe(VXLAN) == "vxlan, 1 stream, upload"
