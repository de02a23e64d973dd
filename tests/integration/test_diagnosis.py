"""The diagnosis of real runs: each test builds one situation in a real lab with the real
command, then checks the verdict, its evidence and the advice computed from the stored
run. Trials are short (2 s measured after 1 s of warm-up, one run each): the verdicts
rest on shares of a ceiling or of a core, which settle within a second or two."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.analysis.diagnosis import Bound
from tunnelbench.analysis.summary import ConfigSummary, summarize_run
from tunnelbench.bench.store import Store
from tunnelbench.system import probing

SHORT = ["--runs", "1", "--duration", "2", "--warmup", "1"]


def _summaries(tmp_path: Path, *args: str) -> dict[str, ConfigSummary]:
    """Runs ``tunnelbench run ARGS`` into a fresh database and summarizes the stored run,
    one summary per tunnel kind."""
    db = tmp_path / "r.db"
    done = tunnelbench("run", *args, "-q", "--no-reports", "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    store = Store.open_existing(db)
    try:
        run = store.run("latest")
        trials = store.trials(run.id)
    finally:
        store.close()
    for trial in trials:
        assert trial.status == "ok", trial.error
    summaries = summarize_run(trials, run.environment)
    by_kind = {s.config.tunnel.kind.value: s for s in summaries}
    assert len(by_kind) == len(summaries), "one configuration per tunnel kind expected"
    return by_kind


def _explain(summary: ConfigSummary) -> str:
    """Everything the diagnosis said, for an assertion's message."""
    assert summary.diagnosis is not None, f"{summary.label}: no successful trial"
    lines = [f"{summary.label}: {summary.pct_of_ceiling=}"]
    for finding in summary.diagnosis.findings:
        evidence = "; ".join(e.text() for e in finding.evidence)
        lines.append(f"  {finding.bound} [{finding.subject}] {finding.summary} ({evidence})")
    lines += [f"  advice: {advice.text()}" for advice in summary.advice]
    return "\n".join(lines)


def _settings(summary: ConfigSummary) -> set[str | None]:
    return {advice.setting for advice in summary.advice}


def _undisturbed(
    tmp_path: Path, verdict: Bound, *args: str, attempts: int = 3, judged: str | None = None
) -> dict[str, ConfigSummary]:
    """:func:`_summaries` of the first of up to ``attempts`` runs whose every verdict is
    ``verdict`` or in which the tool found no disturbance of the machine (hypervisor
    steal, outside load). Steal on one vCPU stalls the pipeline's work on the other, so
    a CPU-bound verdict cannot be expected of a disturbed run (seen in CI: cpu0 4.7%
    stolen in 3 of 3 runs, the busiest core 88.5% busy, "no limit identified"); an
    undisturbed run gets no second chance, unless the tool itself found no limit
    ("undetermined"): a fresh clone's CI once read a shaped 1 Gbit/s baseline at 93.9% of
    its ceiling with 0 retransmits and no busy core. When every attempt was disturbed the
    last one is returned, and the caller's assertions judge it.

    ``judged``: only that tunnel kind's verdict counts. The baseline the run adds is
    held to nothing here, and asking it for ``verdict`` too repeated every run whose
    baseline had another verdict (three runs, 60 s, in a CI run)."""
    disturbances = {Bound.STEAL, Bound.OUTSIDE_LOAD}
    for attempt in range(attempts):
        run_dir = tmp_path / f"attempt-{attempt}"
        run_dir.mkdir()
        by_kind = _summaries(run_dir, *args)
        held = [s for kind, s in by_kind.items() if judged in (None, kind)]
        diagnoses = [s.diagnosis for s in held if s.diagnosis is not None]
        if all(d.verdict.bound is verdict for d in diagnoses):
            return by_kind
        found = [f.summary for d in diagnoses for f in d.findings if f.bound in disturbances]
        found += [d.verdict.summary for d in diagnoses if d.verdict.bound is Bound.UNDETERMINED]
        if not found:
            return by_kind
        print(f"attempt {attempt + 1} of {attempts} was disturbed or undecided: {'; '.join(found)}")
    return by_kind


def test_a_shaped_wan_is_the_limit_with_and_without_a_tunnel(tmp_path):
    # 1 Gbit/s: at 500 Mbit/s tbf's work on wireguard-go's traffic filled both cores in one
    # CI run (80.6% of the ceiling, CPU-bound), at 1 Gbit/s a run with steal read 90.6%
    # with no limit identified; a run the tool finds disturbed is repeated.
    by_kind = _undisturbed(
        tmp_path, Bound.LINK, "--tunnels", "none,wireguard", "--streams", "1",
        "--rate", "1gbit", *SHORT,
    )  # fmt: skip
    # What tbf counts per full-sized segment is the L3 packet + the 14-byte Ethernet header:
    # none: TCP payload 1500 - 20 IP - 20 TCP - 12 timestamps = 1448 of 1500 + 14 = 1514;
    # WireGuard (MTU 1420): payload 1420 - 52 = 1368, and the outer packet is
    # 1420 + 16 header + 16 tag + 8 UDP + 20 IP = 1480, so 1368 of 1480 + 14 = 1494.
    expected = {"none": 1448 / 1514 * 1e9, "wireguard": 1368 / 1494 * 1e9}
    for kind, ceiling_bps in expected.items():
        summary = by_kind[kind]
        assert summary.ceiling is not None and summary.diagnosis is not None
        assert abs(summary.ceiling.goodput_bps - ceiling_bps) < 0.1e6
        assert summary.diagnosis.verdict.bound is Bound.LINK, _explain(summary)
        assert summary.pct_of_ceiling is not None
        assert 95 <= summary.pct_of_ceiling <= 101, _explain(summary)


def test_unshaped_userspace_wireguard_is_held_by_its_daemon(tmp_path):
    # Three runs: the verdict is read from their medians. The busiest core of one 2 s
    # run sat at 89.4% once in CI (below the 90% a saturated core needs; five others
    # here read 91.7-94.0%), and one run called it "no limit identified".
    runs = ["--runs", "3", "--duration", "2", "--warmup", "1"]
    by_kind = _undisturbed(
        tmp_path, Bound.CPU, "--tunnels", "wireguard", "--streams", "1", *runs, judged="wireguard"
    )
    wireguard = by_kind["wireguard"]
    assert wireguard.diagnosis is not None
    verdict = wireguard.diagnosis.verdict
    assert verdict.bound is Bound.CPU, _explain(wireguard)
    assert (verdict.subject or "").startswith("wireguard-go@"), _explain(wireguard)
    assert "tunnel.implementation" in _settings(wireguard), _explain(wireguard)
    # The run recorded what this kernel can do, and the advice follows it.
    (kernel,) = [a for a in wireguard.advice if a.suggestion.startswith("prefer kernel")]
    probed = probing.link("wireguard")
    if probed.ok is False:
        assert kernel.available == "no", _explain(wireguard)
        assert kernel.phrased.startswith(
            f"kernel WireGuard is not available on this kernel ({probed.detail})"
        )
    else:
        assert kernel.available == ("yes" if probed.ok else "not probed")


def test_a_tiny_fifo_under_the_shaper_drops_packets_of_several_streams(tmp_path):
    # One iperf3 process for the four streams: with one process per stream, a SYN the
    # tiny queue drops would start one process a second late, and the runner refuses to
    # add up processes whose windows do not coincide.
    by_kind = _summaries(
        tmp_path, "--tunnels", "none", "--streams", "4", "--stream-mode", "single",
        "--rate", "100mbit", "--queue-limit", "5", *SHORT,
    )  # fmt: skip
    none = by_kind["none"]
    assert none.diagnosis is not None
    assert Bound.QUEUE_DROPS in {f.bound for f in none.diagnosis.findings}, _explain(none)
    (trial,) = none.trials
    assert trial.metrics["qdisc.client.wan.drops"] > 0
    assert trial.metrics["retransmits"] > 0
    assert _settings(none) & {"lab.wan.queue", "lab.wan.queue_limit"}, _explain(none)


def test_a_cpu_budget_on_the_tunnel_daemon_is_the_limit(tmp_path):
    plan = tmp_path / "budget.toml"
    plan.write_text(
        'name = "budget"\n'
        "repetitions = 1\n"
        "[base.tunnel]\n"
        'kind = "wireguard"\n'
        'implementation = "wireguard-go"\n'
        'cpu_budget = "20%"\n'
        "[base.traffic]\n"
        "streams = 1\n"
        "duration = 2\n"
        "warmup = 1\n"
    )
    by_kind = _summaries(tmp_path, str(plan))
    assert set(by_kind) == {"none", "wireguard"}  # the plan added the baseline
    wireguard = by_kind["wireguard"]
    assert wireguard.diagnosis is not None
    verdict = wireguard.diagnosis.verdict
    assert verdict.bound is Bound.CPU, _explain(wireguard)
    assert "budget" in verdict.summary, _explain(wireguard)
    assert (verdict.subject or "").startswith("wireguard-go@"), _explain(wireguard)
    assert "tunnel.cpu_budget" in _settings(wireguard), _explain(wireguard)


def test_several_streams_in_one_iperf3_process_peg_the_generator(tmp_path):
    # Measured on the quiet reference VM: in 2 of 3 trials the sending iperf3 process
    # used 99.0% of a core, in the third the receiving one 98.6%; the medians over three
    # trials name a pegged iperf3 process. (With other work on the machine the cores fill
    # first and the verdict is CPU-bound: run this alone, as CI does.) A run the tool
    # finds disturbed is repeated: in one CI run the hypervisor stole up to 17.4% of cpu1
    # in 3 of 3 trials, and the verdict was steal with cpu0 92% busy.
    by_kind = _undisturbed(
        tmp_path, Bound.GENERATOR, "--tunnels", "none", "--streams", "8",
        "--stream-mode", "single", "--runs", "3", "--duration", "2", "--warmup", "1",
    )  # fmt: skip
    none = by_kind["none"]
    assert none.diagnosis is not None
    verdict = none.diagnosis.verdict
    assert verdict.bound is Bound.GENERATOR, _explain(none)
    assert (verdict.subject or "").startswith("iperf3-"), _explain(none)
    assert "traffic.stream_mode" in _settings(none), _explain(none)


def test_a_busy_process_outside_the_lab_is_outside_load_not_the_labs_cpu_limit(tmp_path):
    """The audit's case: an unrelated niced busy loop on every core while a shaped link
    carries one stream. The cores read ~100% busy, but the lab's work is a small part of
    it: the verdict must not be CPU-bound, and the outside load is a finding of its own."""
    loops = [
        subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        by_kind = _summaries(
            tmp_path, "--tunnels", "none", "--streams", "1", "--rate", "100mbit", *SHORT
        )
    finally:
        for loop in loops:
            os.kill(loop.pid, signal.SIGKILL)
            loop.wait()
    none = by_kind["none"]
    (trial,) = none.trials
    if "load.outside_pct" not in trial.metrics:
        pytest.skip("this build records no outside load (load.outside_pct)")
    assert trial.metrics["load.outside_pct"] >= 100.0, trial.metrics
    assert none.diagnosis is not None
    bounds = {f.bound for f in none.diagnosis.findings}
    assert Bound.CPU not in bounds, _explain(none)
    assert Bound.OUTSIDE_LOAD in bounds, _explain(none)
