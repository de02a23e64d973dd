"""Debian's stock kernel in a VM: every lab feature this machine's kernel lacks, end to
end, from one run of ``kernel-suite.toml`` (one boot), plus ``doctor --kernel``, a
PPPoE session on one core against plain traffic on two, and Ctrl-C during a guest's
trials while a busy neighbour on the host marks them disturbed.

Every trial must run on the guest's kernel (not the host's), be link-bound from 95% of
its ceiling up to what the link can carry (101% plus the shaper's bucket), and show in
the lab's own counters that the feature carried the traffic: the kernel's tunnel device,
the kernel's ESP, the queue discipline asked for, netem's delay, the congestion control.
"""

import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.integration.helpers import run_plan, tunnelbench
from tests.kernel.conftest import exchanges, qemu_processes
from tunnelbench.analysis.diagnosis import SPARE_IDLE_PCT, Bound
from tunnelbench.analysis.significance import ALPHA, compare
from tunnelbench.analysis.verdicts import above_ceiling_pct
from tunnelbench.bench import planfile
from tunnelbench.bench.store import Store
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import KVM, TCG, TrialRecord, TrialStatus
from tunnelbench.model.wan import burst_bytes, shaper_lead_bytes
from tunnelbench.probes import rtt
from tunnelbench.report import view

SUITE = Path(__file__).with_name("kernel-suite.toml")
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "report-schema.json").read_text())
HOST_RELEASE = os.uname().release
RATE = 3e6  # the suite's WAN (kernel-suite.toml): what a TCG guest sustains with room


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The suite's run: its trials by case and its summaries by configuration key."""
    work = tmp_path_factory.mktemp("kernel-suite")
    # Its reports are written by `report` where a test reads them (the run's own would
    # be drawn twice).
    done = tunnelbench("run", str(SUITE), "--db", "k.db", "--no-reports", cwd=work, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    store = Store.read(work / "k.db")
    try:
        loaded = view.load(store, "latest")
    finally:
        store.close()
    return {
        "db": work / "k.db",
        "out": done.stdout,
        "trials": {t.config_key: t for t in loaded.trials},
        "summaries": {s.key: s for s in loaded.summaries},
        "run": loaded.run,
    }


CASES: dict[str, dict[str, Any]] = {
    "baseline": {
        "tunnel_kind": "none",
        "traffic_congestion": None,
        "traffic_family": 4,
        "lab_wan": None,
        "lab_queues": None,
    },
    "wireguard": {"tunnel_kind": "wireguard"},
    "esp-aes-gcm-tunnel": {"tunnel_kind": "ipsec", "tunnel_cipher": "aes-256-gcm"},
    "gre": {"tunnel_kind": "gre"},
    "gretap": {"tunnel_kind": "gretap", "tunnel_protection": "none"},
    "ipip": {"tunnel_kind": "ipip"},
    "geneve": {"tunnel_kind": "geneve"},
    "sit": {"tunnel_kind": "sit"},
    "gretap-in-esp-transport": {"tunnel_kind": "gretap", "tunnel_protection": "ipsec"},
    "fq_codel": {"lab_wan": "fq_codel"},
    "cake": {"lab_wan": "cake"},
    "fq": {"lab_wan": "fq"},
    "impaired": {"lab_wan": "loss"},
    "bbr": {"traffic_congestion": "bbr"},
    "pppoe": {"lab_queues": 2},
    "bfifo": {"lab_wan": "bfifo"},
    "mathis": {"lab_wan": "mathis"},
}


def _setting(config: TrialConfig, key: str) -> Any:
    """A setting of ``config`` by its CASES key: ``tunnel_kind`` is ``config.tunnel.kind``."""
    section, _, name = key.partition("_")
    return getattr(getattr(config, section), name)


def _case(suite: dict[str, Any], name: str) -> TrialRecord:
    wanted = dict(CASES[name])
    wan = wanted.pop("lab_wan", "unset")
    candidates = []
    for trial in suite["trials"].values():
        link = trial.config.lab.wan
        if not all(_setting(trial.config, key) == value for key, value in wanted.items()):
            continue
        if wan == "loss" and not (link.loss and link.jitter):
            continue
        if wan == "mathis" and not (link.loss and not link.jitter):
            continue
        if wan not in ("unset", "loss", "mathis", None) and link.queue != wan:
            continue
        # The suite's own baseline, not one a case at another rate brings.
        if wan is None and (link.queue or link.delay or link.rate != RATE):
            continue
        candidates.append(trial)
    assert len(candidates) == 1, (name, [t.config_key for t in candidates])
    return candidates[0]


@pytest.mark.parametrize("name", [name for name in CASES if name not in ("impaired", "mathis")])
def test_each_feature_runs_on_the_guest_kernel_and_reaches_the_link(suite, name):
    trial = _case(suite, name)
    assert trial.status is TrialStatus.OK, trial.error
    resolved = trial.resolved
    assert resolved.where.virtualization in (TCG, KVM)
    assert resolved.where.kernel_release and resolved.where.kernel_release != HOST_RELEASE
    assert resolved.where.kernel_package and resolved.where.kernel_package.startswith(
        "linux-image-"
    )
    summary = suite["summaries"][trial.config_key]
    assert summary.ceiling is not None
    # At 3 Mbit/s the shaper's bucket of ten frames is 2% of a 2 s window, and htb (the
    # suite's shaper) sends one aggregate more ahead of its rate: a window that opens on
    # both reads up to 111.8% (vxlan in ESP read 101.2%; plain TCP, whose aggregates reach
    # the shaper, read 107.0% in a CI run).
    bound = above_ceiling_pct(summary.config)
    low = 95.0
    if name == "bbr":
        # BBR paces at 0.75 of its estimate for one round trip in every eight, to drain
        # what it queued. Under TCG its loaded RTT reads hundreds of ms (365 ms in a CI
        # run, which read 93.6%), so a 2 s window can hold that round trip without the
        # 1.25 one that makes up for it: up to a quarter of one RTT's worth less. The
        # diagnosis asks the same of a BBR trial's link-bound verdict (a run that read 94%
        # with a 396 ms RTT was called latency-under-load before it did).
        rtt_s = trial.metrics["rtt.loaded_ms"] / 1000
        low -= 100 * 0.25 * rtt_s / trial.config.traffic.duration
    assert low <= summary.pct_of_ceiling <= bound, (name, summary.pct_of_ceiling, low, bound)
    # Lossy is still the link: fq_codel and cake drop to keep the queue short.
    verdict = summary.diagnosis.verdict
    assert verdict.bound.value in ("link-bound", "link-bound-lossy"), verdict


def _window_bytes(trial: TrialRecord) -> float:
    """What the generator counted over the measured window, in bytes."""
    return trial.metrics["goodput_bps"] * trial.config.traffic.duration / 8


def test_kernel_wireguard_carried_the_traffic(suite):
    trial = _case(suite, "wireguard")
    assert trial.resolved.setup.implementation == "kernel"
    # The tunnel device's counters over the window hold at least what the receiver got.
    assert trial.metrics["link.gw.tunnel.rx_packets"] * 1420 >= _window_bytes(trial)


@pytest.mark.parametrize(
    ("name", "cipher", "mode"),
    [
        ("esp-aes-gcm-tunnel", "aes-256-gcm", "tunnel"),
        ("gretap-in-esp-transport", "chacha20-poly1305", "transport"),
    ],
)
def test_kernel_esp_in_both_modes_and_both_aeads(suite, name, cipher, mode):
    resolved = _case(suite, name).resolved
    assert resolved.esp.implementation == "kernel"
    assert resolved.setup.cipher == cipher
    assert resolved.esp.mode == mode


@pytest.mark.parametrize("name", ["gre", "gretap", "ipip", "geneve", "sit"])
def test_kernel_tunnel_devices_counted_the_traffic(suite, name):
    trial = _case(suite, name)
    assert trial.resolved.setup.implementation == "kernel"
    mtu = trial.resolved.setup.mtu
    assert mtu is not None
    assert trial.metrics["link.gw.tunnel.rx_packets"] * mtu >= _window_bytes(trial)


@pytest.mark.parametrize("name", ["fq_codel", "cake", "fq"])
def test_the_queue_under_test_held_the_traffic(suite, name):
    trial = _case(suite, name)
    # The sender's WAN egress (client for upload): its queue sent at least what the
    # receiver counted.
    sent = [v for k, v in trial.metrics.items() if k.endswith(".sent_bytes") and "client" in k]
    assert sent and max(sent) >= _window_bytes(trial)
    assert trial.config.lab.wan.queue == name


def test_netem_delay_adds_its_round_trip(suite):
    """The Mathis case's 20 ms (its 1% loss costs a ping in a hundred, not time)."""
    delayed, plain = _case(suite, "mathis"), _case(suite, "baseline")
    delay_us = delayed.config.lab.wan.delay
    assert delay_us is not None
    delay_ms = delay_us / 1000
    added = delayed.metrics["rtt.idle_ms"] - plain.metrics["rtt.idle_ms"]
    # Both directions of the WAN link carry the delay: one round trip adds it twice.
    assert 2 * delay_ms * 0.9 <= added <= 2 * delay_ms * 1.5, added


def test_a_byte_fifo_at_steady_state_waits_what_it_holds(suite):
    """75 kB at 3 Mbit/s is 200 ms. The window opens once the queue stopped growing; the
    round trip then stays within what the queue holds plus what the shaper sent ahead of
    its rate, and reaches it at the top of cubic's sawtooth, less the aggregate that did
    not fit (measured: max 180 ms, p95 174; and max 253, p95 238).

    The median of the window's last third (the queue at steady state) is held to what
    the queue holds plus one bucket: a queue counted in packets, or half as large again,
    puts it above. Each ping may also wait out what htb (the suite's shaper) sent on
    credit: one whole GSO aggregate beyond the bucket (up to 64 KiB, 175 ms here,
    :func:`~tunnelbench.model.wan.shaper_lead_bytes`); a CI run had 11 of 39 pings at
    246-287 ms against 246 without it. Three pings in four are held to that, the rest
    left to the emulated CPU's stalls (two replies sent 100 ms apart once arrived 0.4 ms
    apart, 232 and 131 ms, which no FIFO gives)."""
    trial = _case(suite, "bfifo")
    assert trial.status is TrialStatus.OK, trial.error
    m = trial.metrics
    assert m["warmup.steady"] == 1, m.get("warmup.s")
    wan = trial.config.lab.wan
    assert wan.queue_bytes is not None
    full_ms = wan.queue_bytes * 8 / RATE * 1000
    bucket_ms = burst_bytes(int(RATE), 1500) * 8 / RATE * 1000
    lead_ms = shaper_lead_bytes(wan) * 8 / RATE * 1000
    idle = m["rtt.idle_ms"]
    steady = idle + full_ms + bucket_ms + 5
    bound = idle + full_ms + lead_ms + 5
    pings = _window_pings(suite, trial)
    above = [ms for ms in pings if ms > bound]
    print(f"bfifo: {len(pings)} pings, bound {bound:.1f} ms, above it: {above}")
    assert len(pings) >= 30
    assert m["rtt.loaded_last_ms"] <= steady, m["rtt.loaded_last_ms"]
    assert 4 * len(above) <= len(pings), (bound, sorted(pings))
    assert m["rtt.loaded_max_ms"] >= idle + 0.8 * full_ms, m["rtt.loaded_max_ms"]


def _window_pings(suite: dict[str, Any], trial: TrialRecord) -> list[float]:
    """The round trips (ms) of the replies that arrived in the trial's measured window,
    from the ping output the store keeps."""
    store = Store.read(suite["db"])
    try:
        readings = store.artifact(trial.id, "probe_readings")["rtt"]
    finally:
        store.close()
    start, end = readings["window"]
    output = rtt.parse_ping(readings["loaded"])
    pings = [r.rtt_ms for r in output.replies if start <= r.at <= end]
    assert len(pings) == trial.metrics["rtt.samples"]
    return pings


@pytest.mark.parametrize("name", ["fq_codel", "cake"])
def test_a_fair_aqm_keeps_the_probe_near_its_idle_round_trip(suite, name):
    """The ping is a sparse flow: a fair queue with CoDel serves it within CoDel's 5 ms
    target and a frame or two on the wire (4 ms each at 3 Mbit/s), where the FIFO of the
    same link holds it behind everything queued (measured: fq_codel 6.5 ms, cake 3.9 ms,
    the 75 kB FIFO 134 ms, over 0.9 ms idle)."""
    trial, fifo = _case(suite, name), _case(suite, "bfifo")
    m = trial.metrics
    frame_ms = 1514 * 8 / RATE * 1000
    assert m["rtt.loaded_ms"] <= m["rtt.idle_ms"] + 5 + 2 * frame_ms, m["rtt.loaded_ms"]
    assert 5 * m["rtt.loaded_ms"] <= fifo.metrics["rtt.loaded_ms"]


def test_tcp_under_random_loss_runs_at_mathis_rate(suite):
    """Mathis et al.: rate = MSS / RTT * C / sqrt(p), with C between 0.87 and 1.22 by
    their model; measured here 1.12-1.29 (2.8-2.9 Mbit/s at 42 ms and 1.2-1.5% loss),
    and once 2.07 (5.3 Mbit/s at 1.15%): some 15 random losses in a 4 s window, each
    halving the window, give the rate a wide spread. The bound of 2.5 still fails a loss
    that did not reach the flow (20 Mbit/s is a constant near 8). The link is far above
    it: the loss held the flow, and the verdict says so."""
    trial = _case(suite, "mathis")
    assert trial.status is TrialStatus.OK, trial.error
    m = trial.metrics
    lost, passed = m["qdisc.client.wan.netem_drops"], m["qdisc.client.wan.sent_packets"]
    p = lost / (lost + passed)
    constant = m["goodput_bps"] * (m["rtt.loaded_ms"] / 1000) * math.sqrt(p) / (1448 * 8)
    assert 0.6 <= constant <= 2.5, (constant, m["goodput_bps"], m["rtt.loaded_ms"], p)
    summary = suite["summaries"][trial.config_key]
    assert summary.pct_of_ceiling is not None and summary.pct_of_ceiling < 50
    verdict = summary.diagnosis.verdict
    assert verdict.bound not in (Bound.LINK, Bound.LINK_LOSSY), verdict
    assert "loss" in verdict.bound.value or "lab.wan.loss" in verdict.summary, verdict


def test_netem_loses_what_was_asked_apart_from_the_queues_drops(suite):
    """1% loss with jitter and reordering on a 20 ms round trip: netem's own drops are
    about 1% of what it was handed, counted apart from the queue's; the loss is named
    where it limited TCP."""
    trial = _case(suite, "impaired")
    assert trial.status is TrialStatus.OK, trial.error
    lost = trial.metrics["qdisc.client.wan.netem_drops"]
    passed = trial.metrics["qdisc.client.wan.sent_packets"]
    # about 750 packets at 3 Mbit/s: 1% is 7.5 of them, and 2-19 the Poisson's 99.5%
    assert 0.002 <= lost / (lost + passed) <= 0.025, (lost, passed)
    assert trial.metrics["qdisc.client.wan.drops"] == 0  # the queue under test lost nothing
    assert 18 <= trial.metrics["rtt.idle_ms"] <= 30
    # The loss is named where it limited TCP; at 3 Mbit/s a 20 ms round trip with 1% loss
    # still fills the link (98.2% of the ceiling on an AMD EPYC host): then it is link-bound.
    summary = suite["summaries"][trial.config_key]
    findings = summary.diagnosis.findings
    named = any("lab.wan.loss" in f.summary for f in findings)
    link = summary.diagnosis.verdict.bound in (Bound.LINK, Bound.LINK_LOSSY)
    assert named or link, [f.summary for f in findings]


def test_pppoe_carried_the_traffic_in_a_session_the_kernels_listed(suite):
    trial, plain = _case(suite, "pppoe"), _case(suite, "baseline")
    left, right = ("client", "gw")
    sessions = trial.resolved.lab.pppoe
    assert sessions is not None and set(sessions) == {left, right}
    assert {s["session"] for s in sessions.values()} == {1}
    assert sessions[left]["peer"] != sessions[right]["peer"]
    # Every data packet crossed the ppp devices, and the WAN veth carried them framed.
    metrics = trial.metrics
    segments = _window_bytes(trial) / 1440  # a full segment's payload at IP MTU 1492
    assert metrics["link.client.ppp.tx_packets"] >= segments
    assert metrics["link.gw.ppp.rx_packets"] == pytest.approx(
        metrics["link.client.ppp.tx_packets"], abs=5
    )
    # The shaper counted 1514 bytes for a full 1492-byte packet: L3 + 8 PPPoE + 14.
    # (The mean is a little lower: at 3 Mbit/s the probe's pings and PPP's echoes are a
    # few percent of the packets.)
    sent = metrics["qdisc.client.wan.sent_bytes"] / metrics["qdisc.client.wan.sent_packets"]
    assert 1300 < sent <= 1514, sent
    # Its ceiling is the baseline's less 8 bytes a packet and 8 bytes of MTU.
    ceilings = {s.key: s.ceiling for s in suite["summaries"].values()}
    here, there = ceilings[trial.config_key], ceilings[plain.config_key]
    assert here is not None and there is not None
    assert here.goodput_bps == pytest.approx(RATE * 1440 / 1514)
    assert there.goodput_bps == pytest.approx(RATE * 1448 / 1514)


def test_the_senders_used_cubic_by_default_and_bbr_when_asked(suite):
    assert _case(suite, "baseline").resolved.traffic.congestion == "cubic"
    assert _case(suite, "bbr").resolved.traffic.congestion == "bbr"


def test_the_report_names_the_guest(suite):
    run = suite["run"]
    guest = (run.environment.guests or {})["debian"]
    assert guest.virtualization in (TCG, KVM)
    assert guest.kernel != HOST_RELEASE
    # The guest's capabilities are what advice reads: cake is there.
    assert guest.capabilities is not None
    cake = guest.capabilities.found("qdiscs", "cake")
    assert cake is not None and cake.ok is True


def test_the_reports_of_a_run_in_a_guest_hold_to_the_schema_and_name_it(suite):
    doc = json.loads(
        tunnelbench("report", "latest", "--format", "json", "--db", str(suite["db"])).stdout
    )
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    markdown = tunnelbench("report", "latest", "--format", "md", "--db", str(suite["db"])).stdout
    assert "- **VM guest:** lab.kernel debian: kernel 6." in markdown
    html = tunnelbench("report", "latest", "--format", "html", "--db", str(suite["db"])).stdout
    assert "<th>VM guest</th><td>lab.kernel debian: kernel 6." in html


def test_doctor_reports_the_guest_kernel():
    done = tunnelbench("doctor", "--kernel", "debian", "--json", timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kernel"] != HOST_RELEASE
    assert report["vm"]["virtualization"] in (TCG, KVM)
    for section, name in [
        ("tunnels", "wireguard"),
        ("tunnels", "gretap"),
        ("qdiscs", "fq_codel"),
        ("qdiscs", "cake"),
        ("qdiscs", "netem"),
    ]:
        assert report[section][name]["status"] == "yes", (section, name, report[section][name])


ROUTER = """
name = "pppoe-one-core"
repetitions = 5
[base.lab]
kernel = "debian"
queues = 2
[base.traffic]
streams = 4
duration = 1
warmup = 0
stream_mode = "single"
[matrix]
"lab.wan.encapsulation" = ["none", "pppoe"]
"""
# One iperf3 process for the four streams: the four flows still hash across the two
# queues (or all onto the session's one), and a trial took 4.0-4.5 s instead of 6.3-7.2
# with four processes a side to start under TCG (busiest softirq 18-24% plain, 47-75%
# PPPoE; 492-696 against 180-246 Mbit/s).


def busiest_softirq(trial: TrialRecord) -> float:
    return max(v for k, v in trial.metrics.items() if k.endswith(".softirq"))


def test_pppoe_puts_the_session_on_one_core(tmp_path):
    """kernel-router-forwarding's PPPoE finding (the APU2 report): on two queues a plain
    WAN's receive work spreads over both cores, a PPPoE session's stays on one, which
    is busier in softirq while the other idles, and carries less."""
    scenario = planfile.load(ROOT / "scenarios" / "kernel-router-forwarding.toml").experiment
    assert {c.lab.wan.encapsulation.value for c in scenario.configs} == {"none", "pppoe"}
    loaded = run_plan(tmp_path, ROUTER, timeout=600)
    runs: dict[str, list[TrialRecord]] = {"none": [], "pppoe": []}
    for trial in loaded.trials:
        assert trial.status is TrialStatus.OK, trial.error
        runs[trial.config.lab.wan.encapsulation].append(trial)
    plain, session = runs["none"], runs["pppoe"]
    # Five a side: with four, one overlapping run leaves p at 0.057 (seen in CI).
    assert len(plain) == len(session) == 5
    softirq = compare([busiest_softirq(t) for t in plain], [busiest_softirq(t) for t in session])
    assert softirq.p is not None and softirq.p < ALPHA, softirq
    assert softirq.ratio is not None and softirq.ratio > 1.5, softirq
    goodput = compare(
        [t.metrics["goodput_bps"] for t in plain], [t.metrics["goodput_bps"] for t in session]
    )
    assert goodput.p is not None and goodput.p < ALPHA, goodput
    assert goodput.ratio is not None and goodput.ratio < 1, goodput
    # Each end steered its WAN veth to one core, and the verdict says why.
    assert all(t.resolved.lab.rps_pppoe_wan == {"client": "1", "gw": "1"} for t in session)
    verdicts = {
        s.config.lab.wan.encapsulation.value: s.diagnosis.verdict
        for s in loaded.summaries
        if s.diagnosis is not None
    }
    # The verdict says "one queue" only where another core was idle (SPARE_IDLE_PCT, half
    # a core free): on one host the other core idled 18-31%, on an AMD EPYC host 2%, the
    # generators filling it, and a queue cannot be what held a machine with no core to
    # spare.
    summary = next(s for s in loaded.summaries if s.config.lab.wan.encapsulation.value == "pppoe")
    ok = [t.metrics for t in summary.trials if t.status == "ok"]
    room = max(statistics.median(m[f"cpu{c}.idle"] for m in ok) for c in (0, 1))
    if room >= SPARE_IDLE_PCT:
        assert verdicts["pppoe"].bound is Bound.SINGLE_QUEUE, verdicts["pppoe"]
        assert "PPPoE session is one queue" in verdicts["pppoe"].summary
    else:
        assert verdicts["pppoe"].bound is not Bound.SINGLE_QUEUE, verdicts["pppoe"]
    assert verdicts["none"].bound is not Bound.SINGLE_QUEUE


#: A busy neighbour on the host: 40 ms of spinning in every 100 ms.
NEIGHBOUR = """
import time
while True:
    begin = time.monotonic()
    while time.monotonic() - begin < 0.04:
        pass
    time.sleep(0.06)
"""


def test_ctrl_c_stops_the_guest_and_keeps_its_finished_trials_flagged_by_a_busy_host(tmp_path):
    """One boot, two facts. Ctrl-C during a guest's trials stops it and keeps what
    finished. And a guest cannot see its host's contention (its own steal and outside
    load read 0): with a busy process on the host, its trials carry the host's figures
    over their window (``vmhost.*``), and the reports list them as disturbed. The
    neighbour spins 40% of a core beside a 1-core guest: a full core (even at nice 19,
    which the scheduler's autogroups ignore across sessions) beside a 2-core guest stalled
    it past its 180 s watchdog."""
    plan = tmp_path / "p.toml"
    plan.write_text(
        'name = "interrupted"\nrepetitions = 4\n[base]\n"lab.kernel" = "debian"\n'
        '"lab.wan.rate" = "3mbit"\n"traffic.duration" = 2\n"traffic.warmup" = 0\n'
        '"lab.vm.cpus" = 1\n'
    )
    program = tmp_path / "tb-neighbour"  # its name is the process's name on the host
    program.symlink_to(sys.executable)
    neighbour = subprocess.Popen([str(program), "-c", NEIGHBOUR], start_new_session=True)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tunnelbench", "run", str(plan), "--db", "i.db"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        stored = 0
        while time.monotonic() < deadline and stored == 0 and proc.poll() is None:
            time.sleep(1)
            try:
                with sqlite3.connect(tmp_path / "i.db") as db:
                    stored = db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
            except sqlite3.Error:
                continue
        assert stored >= 1, "no trial came back from the guest"
        assert qemu_processes(), "the guest is not running"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        os.killpg(neighbour.pid, signal.SIGKILL)
        neighbour.wait()
    assert proc.returncode == 130, out
    with sqlite3.connect(tmp_path / "i.db") as db:
        status = db.execute("SELECT status FROM runs").fetchone()[0]
        kept = db.execute("SELECT COUNT(*) FROM trials WHERE status = 'ok'").fetchone()[0]
    assert status == "interrupted"
    assert 1 <= kept < 4
    assert not exchanges()

    store = Store.read(tmp_path / "i.db")
    try:
        loaded = view.load(store, "latest")
        trial = loaded.trials[0]
        host = store.artifact(trial.id, "vmhost")
    finally:
        store.close()
    assert trial.status is TrialStatus.OK, trial.error
    m = trial.metrics
    assert m.get("load.outside_pct", 0.0) < 10.0  # what the guest saw of its host's load
    assert m["vmhost.vm_pct"] > 10.0  # QEMU ran the guest
    assert m["vmhost.outside_pct"] >= 10.0
    assert host["top_outside"].get("tb-neighbour", 0.0) >= 10.0
    assert m["vmhost.samples"] >= 3  # 2 s at 2 a second
    disturbed = {d.seq: d for d in loaded.noise.disturbed}
    assert trial.seq in disturbed
    what = disturbed[trial.seq].what
    assert any(w.startswith("on the VM's host, processes outside the VM") for w in what)
