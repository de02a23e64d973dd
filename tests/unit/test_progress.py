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


def test_the_eta_counts_each_kind_of_trial_and_a_boot_until_trials_of_that_kind_ran():
    """Before a trial of a kind has run, the ETA counts this machine's figure for it (a
    guest's trial costs far more than the host's, and its boot more still); once one
    has, what it took."""
    from dataclasses import replace

    from tunnelbench.bench.planfile import REFERENCE
    from tunnelbench.bench.progress import format_duration

    guest = TrialConfig.from_dict({"lab": {"kernel": "debian"}})
    trials = [Trial(1, 1, BASE), Trial(2, 1, VXLAN), Trial(3, 1, guest), Trial(4, 2, guest)]
    overheads = replace(
        REFERENCE, built_s=1.0, kept_s=0.5, vm_built_s=10.0, vm_kept_s=6.0, vm_boot_s=50.0
    )
    progress = LineProgress(io.StringIO(), overheads)
    progress.run_started(1, 4, trials)
    traffic = BASE.traffic.duration + BASE.expected_warmup

    def eta(current: Trial) -> str:
        return progress._eta(current, elapsed=0.0).strip()

    progress.trial_started(trials[0])
    # two labs built on the host, one built and kept in the guest, and its boot
    first = 4 * traffic + 1.0 + 1.0 + 10.0 + 6.0 + 50.0
    assert eta(trials[0]) == f"(ETA {format_duration(first)})"
    progress.started -= traffic + 3.0  # the first trial took 3 s beyond its traffic
    progress.trial_finished(trials[0], TrialStatus.OK, "", 941e6)
    progress.trial_started(trials[1])
    assert eta(trials[1]) == f"(ETA {format_duration(first - traffic + 1.0)})"
    progress.trial_finished(trials[1], TrialStatus.OK, "", 941e6)
    progress.trial_started(trials[2])  # the guest has booted
    assert eta(trials[2]) == f"(ETA {format_duration(2 * traffic + 10.0 + 6.0)})"


def test_a_byte_fifo_is_described_by_its_bytes():
    """A bfifo's progress line showed the packet limit it does not use ("bfifo 1000")."""
    from tunnelbench.bench.progress import describe

    config = TrialConfig.from_dict(
        {"lab": {"wan": {"rate": 3_000_000, "queue": "bfifo", "queue_bytes": 225_000}}}
    )
    assert describe(config) == "none, 1 stream, upload, wan 3M, bfifo 225,000 bytes"
    pfifo = TrialConfig.from_dict({"lab": {"wan": {"rate": 3_000_000, "queue": "pfifo"}}})
    assert describe(pfifo).endswith("wan 3M, pfifo 1000")
