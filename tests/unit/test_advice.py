"""Advice on real recorded runs: measured alternatives judged by the comparison test,
suggestions that respect what the run's kernel could do, and crypto advice for every
encrypting tunnel.

tests/fixtures/runs/streams-5-runs.db: `tunnelbench run --tunnels none,wireguard --streams
1,4 --runs 5 --duration 2 --warmup 1` on the 2-core development VM (kernel without
WireGuard, fq_codel, cake or ESP AEADs; userspace wireguard-go), with the capabilities that
run recorded. tests/fixtures/runs/wireguard-implementations.db: 2 runs per configuration,
recorded before capabilities were.
"""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.report_fixtures import recorded, resolved_for
from tunnelbench.analysis import significance
from tunnelbench.analysis.advice import Advice, Sibling, advise, availability
from tunnelbench.analysis.cpu_advice import encrypting
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose, medians
from tunnelbench.analysis.summary import ConfigSummary, summarize_run
from tunnelbench.kinds import Cipher, Protection, TunnelKind
from tunnelbench.model.environment import Environment
from tunnelbench.model.kindfacts import OpenVpnFound, SetupFound, TunnelFacts
from tunnelbench.model.plan import TrialConfig
from tunnelbench.report import findings
from tunnelbench.tunnels import REGISTRY, strongswan
from tunnelbench.tunnels.base import TunnelSpec


def run_of(name: str, tmp: Path) -> tuple[list[ConfigSummary], dict[str, Any]]:
    store = recorded(name, tmp)
    run = store.run("latest")
    summaries = summarize_run(store.trials(run.id), run.environment)
    store.close()
    return summaries, run.environment.to_dict()


def pick(summaries: list[ConfigSummary], kind: str, streams: int) -> ConfigSummary:
    return next(
        s
        for s in summaries
        if s.config.tunnel.kind.value == kind and s.config.traffic.streams == streams
    )


def by_setting(advice: list[Advice], setting: str) -> Advice:
    (found,) = [a for a in advice if a.setting == setting]
    return found


def median(s: ConfigSummary) -> float:
    assert s.goodput is not None
    return s.goodput.median


def goodputs(s: ConfigSummary) -> list[float]:
    return [t.metrics["goodput_bps"] for t in s.trials if t.status == "ok"]


# --- B.4: a gain only when the comparison test says so ---


def test_a_significant_alternative_is_a_gain_with_its_interval_and_p(tmp_path):
    summaries, _ = run_of("streams-5-runs", tmp_path)
    one = pick(summaries, "none", 1)
    measured = by_setting(one.advice, "traffic.streams").measured
    assert measured is not None and measured.value == 4
    # The recorded runs do not overlap: 4 streams beat 1 in every pair, p = 2/252.
    assert max(goodputs(one)) < min(goodputs(pick(summaries, "none", 4)))
    assert measured.comparison is not None and measured.comparison.p < significance.ALPHA
    assert measured.outcome == "gain"
    text = measured.text()
    assert text.endswith("): gain") and "95% CI +" in text and "p = 0.0079" in text


def test_an_alternative_whose_runs_overlap_is_no_measurable_difference(tmp_path):
    summaries, _ = run_of("streams-5-runs", tmp_path)
    one, four = pick(summaries, "wireguard", 1), pick(summaries, "wireguard", 4)
    advice = by_setting(one.advice, "traffic.streams")
    measured = advice.measured
    assert measured is not None
    # wireguard-go, 1 vs 4 streams: medians a few % apart, ranges overlapping.
    assert min(goodputs(four)) < max(goodputs(one))
    assert measured.comparison is not None and measured.comparison.p >= significance.ALPHA
    assert measured.outcome == "no difference" and advice.refuted
    assert "no measurable difference (" in measured.text()
    assert f"{median(four) / 1e6:,.0f} vs {median(one) / 1e6:,.0f} Mbit/s" in (measured.text())
    assert "gain" not in advice.text()
    assert advice is one.advice[-1]  # refuted suggestions come last


def test_three_runs_a_side_are_too_few_to_tell_however_large_the_change(tmp_path):
    # iperf2-vs-iperf3: 3 runs per configuration; 4 streams gave +78% over 1, with no
    # overlap, yet 3 against 3 cannot reach p < 0.05 (smallest possible p = 0.1).
    summaries, _ = run_of("iperf2-vs-iperf3", tmp_path)
    one = next(
        s
        for s in summaries
        if s.config.tunnel.kind is TunnelKind.NONE
        and s.config.traffic.streams == 1
        and s.config.traffic.generator.value == "iperf3"
    )
    advice = by_setting(one.advice, "traffic.streams")
    assert advice.measured is not None and advice.measured.change_pct > 50
    assert advice.measured.outcome == "too few runs" and not advice.refuted
    assert "too few runs to tell (3 runs each; a rank test needs at least 4 of each" in (
        advice.text()
    )
    assert ": gain" not in advice.text()


def test_the_json_advice_carries_the_outcome_and_the_test(tmp_path):
    summaries, _ = run_of("streams-5-runs", tmp_path)
    document = findings.configuration_json(pick(summaries, "none", 1))
    (streams,) = [a for a in document["advice"] if a["setting"] == "traffic.streams"]
    assert streams["measured"]["outcome"] == "gain"
    assert streams["measured"]["runs"] == [5, 5]
    assert streams["measured"]["p"] < 0.05
    low, high = streams["measured"]["ratio_ci95"]
    assert 1 < low <= high
    # The values `tune` would try, and what they are for.
    assert (streams["candidates"], streams["goal"]) == ([2, 4], "throughput")


# --- B.5: what this machine can do ---


def wireguard_cpu_bound(tmp_path: Path) -> tuple[ConfigSummary, dict[str, Any]]:
    summaries, env = run_of("streams-5-runs", tmp_path)
    s = pick(summaries, "wireguard", 4)
    assert s.diagnosis is not None and s.diagnosis.verdict.bound is Bound.CPU
    return s, env


def kernel_advice(s: ConfigSummary, env: dict[str, Any]) -> Advice:
    subject = Subject(
        s.config,
        s.resolved,
        s.metrics | {"goodput_bps": median(s)},
        None,
        Environment.from_dict(env),
        runs=tuple(t.metrics for t in s.trials),
    )
    (found,) = [
        a
        for a in advise(subject, diagnose(subject), [])
        if a.suggestion.startswith("prefer kernel WireGuard")
    ]
    return found


def test_kernel_wireguard_on_a_kernel_without_it_says_so_with_the_reason(tmp_path):
    s, env = wireguard_cpu_bound(tmp_path)
    # The run recorded what this kernel said when asked for a wireguard link.
    assert env["capabilities"]["links"]["wireguard"] == {
        "ok": False,
        "detail": "Unknown device type",
    }
    advice = kernel_advice(s, env)
    assert advice.available == "no"
    assert advice.phrased == (
        "kernel WireGuard is not available on this kernel (Unknown device type); on a kernel"
        " with it: prefer kernel WireGuard over userspace wireguard-go"
    )
    assert advice.text().startswith(advice.phrased)


def test_kernel_wireguard_on_a_kernel_with_it_is_plain_advice(tmp_path):
    s, env = wireguard_cpu_bound(tmp_path)
    links = env["capabilities"]["links"] | {"wireguard": {"ok": True, "detail": ""}}
    with_it = env | {"capabilities": env["capabilities"] | {"links": links}}
    advice = kernel_advice(s, with_it)
    assert advice.available == "yes"
    assert advice.phrased == "prefer kernel WireGuard over userspace wireguard-go"


def test_a_run_without_the_record_says_availability_not_recorded(tmp_path):
    s, env = wireguard_cpu_bound(tmp_path)
    old = {k: v for k, v in env.items() if k != "capabilities"}
    advice = kernel_advice(s, old)
    assert advice.available == "not recorded"
    assert advice.phrased.endswith("(kernel WireGuard: availability not recorded)")


def test_not_probed_names_why():
    env = {"capabilities": {"links": {"wireguard": {"ok": None, "detail": "unshare refused"}}}}
    found = availability(Environment.from_dict(env), "links", "wireguard", "kernel WireGuard")
    assert found.state == "not probed"
    assert found.phrase("x") == "x (kernel WireGuard: availability not probed: unshare refused)"


def test_a_remote_runs_record_names_the_duts_kernel():
    """A remote run records what the DUT's kernel said, not this machine's: advice names
    whose kernel lacks the path it suggests."""
    esp = {"rfc4106(gcm(aes))": {"ok": False, "detail": "Requested AEAD algorithm not found"}}
    env = {"capabilities": {"where": "gw's kernel", "links": {}, "esp": esp}}
    found = availability(Environment.from_dict(env), "esp", "rfc4106(gcm(aes))", "the kernel's ESP")
    assert found.phrase("use it") == (
        "the kernel's ESP is not available on gw's kernel (Requested AEAD algorithm not"
        " found); on a kernel with it: use it"
    )
    # a lab run's record names no kernel: its own
    del env["capabilities"]["where"]
    assert "not available on this kernel" in availability(
        Environment.from_dict(env), "esp", "rfc4106(gcm(aes))", "x"
    ).phrase("y")


def test_fair_queue_advice_names_the_kernels_refusal_of_fq_codel_and_cake(tmp_path):
    summaries, env = run_of("streams-5-runs", tmp_path)
    s = pick(summaries, "none", 4)
    config = s.config.to_dict()
    config["lab"]["wan"] |= {"rate": 1_000_000_000, "queue_limit": 50}
    shaped = TrialConfig.from_dict(config)
    # The recorded 4-stream trials with the drops a small FIFO causes at the shaper.
    runs = tuple(
        t.metrics | {"qdisc.client.wan.drops": 400.0, "qdisc.client.wan.sent_packets": 1e5}
        for t in s.trials
    )
    subject = Subject(
        shaped, s.resolved, medians(runs), None, Environment.from_dict(env), runs=runs
    )
    diagnosis = diagnose(subject)
    assert Bound.QUEUE_DROPS in {f.bound for f in diagnosis.findings}
    queue = by_setting(advise(subject, diagnosis, []), "lab.wan.queue")
    assert queue.available == "no"
    assert queue.phrased == (
        "fq_codel and cake are not available on this kernel (fq_codel: Specified qdisc kind"
        " is unknown; cake: Specified qdisc kind is unknown); on a kernel with them: replace"
        " the FIFO with a fair, delay-managing queue (fq_codel or cake)"
    )
    qdiscs = env["capabilities"]["qdiscs"] | {"cake": {"ok": True, "detail": ""}}
    with_cake = env | {"capabilities": env["capabilities"] | {"qdiscs": qdiscs}}
    subject = replace(subject, environment=Environment.from_dict(with_cake))
    queue = by_setting(advise(subject, diagnosis, []), "lab.wan.queue")
    assert queue.phrased == "replace the FIFO with a fair, delay-managing queue (cake)"


@pytest.mark.parametrize(
    ("queue", "advised"), [("pfifo", True), ("fq_codel", False), ("cake", False)]
)
def test_a_larger_limit_is_advised_for_a_fifo_that_dropped_not_for_an_aqm(tmp_path, queue, advised):
    """fq_codel and cake drop on purpose, long before their limit: the same drops ask
    for a larger limit of a FIFO only (one of 8 packets, less than the 16 its 4 flows
    need)."""
    summaries, env = run_of("streams-5-runs", tmp_path)
    s = pick(summaries, "none", 4)
    config = s.config.to_dict()
    config["lab"]["wan"] |= {"rate": 20_000_000, "queue": queue, "queue_limit": 8}
    runs = tuple(
        t.metrics | {"qdisc.client.wan.drops": 400.0, "qdisc.client.wan.sent_packets": 1e5}
        for t in s.trials
    )
    subject = Subject(
        TrialConfig.from_dict(config),
        s.resolved,
        medians(runs),
        None,
        Environment.from_dict(env),
        runs=runs,
    )
    settings = {a.setting for a in advise(subject, diagnose(subject), [])}
    assert ("lab.wan.queue_limit" in settings) is advised


# --- B.8: every encrypting tunnel, from the registry ---


def relabelled(s: ConfigSummary, kind: TunnelKind, protection: Protection) -> TrialConfig:
    config = s.config.to_dict()
    config["tunnel"] |= {"kind": kind.value, "protection": protection.value}
    config["tunnel"]["implementation"] = "auto"
    return TrialConfig.from_dict(config)


@pytest.mark.parametrize(
    ("kind", "protection", "cipher", "fires"),
    [
        (TunnelKind.WIREGUARD, Protection.NONE, "chacha20-poly1305", True),
        (TunnelKind.OPENVPN, Protection.NONE, "aes-256-gcm", True),
        (TunnelKind.IPSEC, Protection.NONE, "aes-256-gcm", True),
        (TunnelKind.VXLAN, Protection.IPSEC, "aes-256-gcm", True),
        (TunnelKind.VXLAN, Protection.NONE, None, False),
        (TunnelKind.NONE, Protection.NONE, None, False),
    ],
)
def test_crypto_advice_fires_for_every_encrypting_tunnel(tmp_path, kind, protection, cipher, fires):
    # The recorded CPU-bound wireguard-go trials' metrics, as the configuration named.
    s, env = wireguard_cpu_bound(tmp_path)
    config = relabelled(s, kind, protection)
    resolved = resolved_for(config, s.resolved.to_dict(facts=False) | {"tunnel_cipher": cipher})
    subject = Subject(
        config, resolved, s.metrics | {"goodput_bps": median(s)}, None, Environment.from_dict(env)
    )
    diagnosis = diagnose(subject)
    assert diagnosis.verdict.bound is Bound.CPU
    crypto = [a for a in advise(subject, diagnosis, []) if "crypto" in a.suggestion]
    assert bool(crypto) is fires
    assert encrypting(resolved) is fires
    if fires:
        # The recording CPU has AES-NI, PCLMULQDQ, VAES and AVX2 but not AVX-512.
        offered = {
            "aes-256-gcm": "AES-NI (AES-GCM), PCLMULQDQ (GHASH of AES-GCM), VAES",
            "chacha20-poly1305": "AVX2 (ChaCha20-Poly1305)",
        }[cipher]
        assert crypto[0].because.endswith(f"the CPU offers {offered} for {cipher}")
        assert crypto[0].suggestion.startswith("check that the tunnel's crypto uses")


def test_encrypting_is_what_the_kind_declared():
    encrypts = {TunnelKind.WIREGUARD, TunnelKind.OPENVPN, TunnelKind.IPSEC}
    for kind in TunnelKind:
        config = TrialConfig.from_dict({"tunnel": {"kind": kind.value}})
        ciphers = REGISTRY.get(kind).ciphers
        resolved = resolved_for(config, {"tunnel_cipher": ciphers[0] if ciphers else None})
        assert encrypting(resolved) is (kind in encrypts), kind


def test_libipsec_cpu_bound_is_told_about_kernel_esp_and_its_availability(tmp_path):
    s, env = wireguard_cpu_bound(tmp_path)
    config = relabelled(s, TunnelKind.IPSEC, Protection.NONE)
    resolved = resolved_for(
        config,
        s.resolved.to_dict(facts=False)
        | {
            "tunnel_implementation": strongswan.LIBIPSEC,
            "esp_implementation": strongswan.LIBIPSEC,
            "tunnel_cipher": Cipher.AES_256_GCM.value,
        },
    )
    assert resolved.tunnel is not None and resolved.tunnel.userspace
    subject = Subject(
        config, resolved, s.metrics | {"goodput_bps": median(s)}, None, Environment.from_dict(env)
    )
    esp = [a for a in advise(subject, diagnose(subject), []) if "kernel's ESP" in a.suggestion]
    (advice,) = esp
    assert advice.setting == "tunnel.implementation" and advice.available == "no"
    assert advice.phrased.startswith(
        "the kernel's ESP with aes-256-gcm is not available on this kernel (Requested AEAD"
        " algorithm not found); on a kernel with it: use the kernel's ESP"
    )


def test_openvpn_without_dco_names_dco_and_why_this_kernel_lacks_it(tmp_path):
    s, env = wireguard_cpu_bound(tmp_path)
    config = relabelled(s, TunnelKind.OPENVPN, Protection.NONE)
    changes = {"tunnel_implementation": "openvpn", "openvpn_dco": False}
    resolved = resolved_for(config, s.resolved.to_dict(facts=False) | changes)
    subject = Subject(
        config, resolved, s.metrics | {"goodput_bps": median(s)}, None, Environment.from_dict(env)
    )
    (dco,) = [a for a in advise(subject, diagnose(subject), []) if "ovpn-dco" in a.suggestion]
    assert dco.available == "no"
    assert dco.phrased.startswith(
        "OpenVPN's data channel offload (ovpn-dco) is not available on this kernel (no"
        " ovpn-dco-v2 netlink family"
    )


def test_siblings_without_their_runs_are_too_few_to_tell(tmp_path):
    summaries, env = run_of("streams-5-runs", tmp_path)
    one, four = pick(summaries, "none", 1), pick(summaries, "none", 4)
    subject = Subject(
        one.config,
        one.resolved,
        one.metrics | {"goodput_bps": median(one)},
        None,
        Environment.from_dict(env),
    )
    advice = advise(subject, diagnose(subject), [Sibling(four.config, median(four))])
    measured = by_setting(advice, "traffic.streams").measured
    assert measured is not None and measured.outcome == "too few runs"


def test_a_cpu_without_the_ciphers_instructions_expects_slow_crypto(tmp_path):
    s, env = wireguard_cpu_bound(tmp_path)
    without_aes = env | {"cpu_flags": [f for f in env["cpu_flags"] if f != "aes"]}
    config = relabelled(s, TunnelKind.IPSEC, Protection.NONE)
    for cipher, slow in (("aes-256-gcm", True), ("chacha20-poly1305", False)):
        resolved = resolved_for(config, s.resolved.to_dict(facts=False) | {"tunnel_cipher": cipher})
        subject = Subject(
            config,
            resolved,
            s.metrics | {"goodput_bps": median(s)},
            None,
            Environment.from_dict(without_aes),
        )
        (crypto,) = [a for a in advise(subject, diagnose(subject), []) if "crypto" in a.suggestion]
        assert crypto.suggestion.startswith("expect slow crypto") is slow
        if slow:
            assert crypto.because.endswith("the CPU lacks AES-NI (AES-GCM) for aes-256-gcm")


@pytest.mark.parametrize(
    ("kind", "spec", "found", "expected"),
    [
        (TunnelKind.WIREGUARD, TunnelSpec("kernel"), None, None),
        (TunnelKind.WIREGUARD, TunnelSpec("boringtun"), None,
         ("kernel WireGuard", "tunnel.implementation", "kernel", ("links", "wireguard"))),
        (TunnelKind.IPSEC, TunnelSpec("kernel", cipher=Cipher.AES_256_GCM,
                                      esp_implementation="kernel"), None, None),
        (TunnelKind.IPSEC, TunnelSpec("libipsec", cipher=Cipher.CHACHA20_POLY1305,
                                      esp_implementation="libipsec"), None,
         ("the kernel's ESP with chacha20-poly1305", "tunnel.implementation", "kernel",
          ("esp", "rfc7539esp(chacha20,poly1305)"))),
        # ESP around VXLAN: no setting of the VXLAN tunnel chooses ESP's implementation
        (TunnelKind.VXLAN, TunnelSpec("kernel", cipher=Cipher.AES_256_GCM,
                                      protection=Protection.IPSEC, esp_implementation="libipsec"),
         None, ("the kernel's ESP with aes-256-gcm", None, None, ("esp", "rfc4106(gcm(aes))"))),
        (TunnelKind.OPENVPN, TunnelSpec("openvpn"), SetupFound(openvpn=OpenVpnFound(True, "")),
         None),
        (TunnelKind.OPENVPN, TunnelSpec("openvpn"),
         SetupFound(openvpn=OpenVpnFound(False, "no module")),
         ("OpenVPN's data channel offload (ovpn-dco)", None, None, ("openvpn_dco", ""))),
    ],
)  # fmt: skip
def test_each_kind_declares_the_kernel_path_beside_its_userspace_one(kind, spec, found, expected):
    """What the one kernel-path rule advises comes from the kind (no kind is named in
    advice): stored with the trial, and read back the same."""
    facts = REGISTRY.get(kind).facts(spec, found)
    path = facts.kernel_path
    if expected is None:
        assert path is None
        return
    assert path is not None and (path.name, path.setting, path.value, path.capability) == expected
    assert facts.userspace
    assert TunnelFacts.from_dict(facts.to_dict()) == facts
    if kind is TunnelKind.OPENVPN:
        assert path.not_used == "no module"
