"""WireGuard's implementations: their names and programs, what "auto" picks, the versions
recorded with every trial, the command line, and the scripts that build the pinned ones.

The program outputs used here are the real builds' (``--version`` of each, captured on
the development VM).
"""

import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tests.report_fixtures import recorded
from tunnelbench.analysis.advice import Sibling, advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose, medians
from tunnelbench.analysis.summary import ConfigSummary, summarize_run
from tunnelbench.bench import capabilities
from tunnelbench.cli.main import parser
from tunnelbench.cli.options import build_experiment
from tunnelbench.errors import UserError
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.environment import Environment
from tunnelbench.system import probing, programs
from tunnelbench.system.probing import Program
from tunnelbench.tunnels import REGISTRY
from tunnelbench.tunnels import wireguard as wg

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
WG = REGISTRY.get(TunnelKind.WIREGUARD)
USERSPACE = ("wireguard-go", "wireguard-go-debian", "boringtun")
# What the real binaries print for --version (first lines).
WIREGUARD_GO_PRINTS = "wireguard-go v0.0.20250522\n\nUserspace WireGuard daemon for linux-amd64.\n"
BORINGTUN_PRINTS = "boringtun 0.7.1\n"


def pinned(script: str) -> str:
    """The version an install script pins: its ``version=`` line."""
    match = re.search(r"^version=(\S+)$", (SCRIPTS / script).read_text(), re.MULTILINE)
    assert match is not None, f"{script} has no version= line"
    return match.group(1)


def executable(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def prints(text: str) -> str:
    return f"#!/bin/sh\nprintf '{text.replace(chr(10), chr(92) + 'n')}'\n"


@pytest.fixture
def fresh_probes():
    """Program and package probes are cached per process: start and end with none."""
    probing.program.cache_clear()
    probing.debian_package.cache_clear()
    yield
    probing.program.cache_clear()
    probing.debian_package.cache_clear()


# --- names, programs, "auto" ---


def test_the_implementations_and_the_ones_auto_may_choose():
    assert WG.implementations == ("kernel", *USERSPACE)
    assert WG.auto_order == ("kernel", "wireguard-go")
    # Advice and the capability probe know the tunnel's own names and programs.
    assert WG.userspace_implementations == tuple(wg.USERSPACE) == USERSPACE
    probed = set(capabilities.program_names())
    assert {daemon.program for daemon in wg.USERSPACE.values()} <= probed


def test_each_implementation_needs_wg_and_its_own_daemon():
    needs = {name: [program for program, _ in WG.programs(name)] for name in WG.implementations}
    assert needs == {
        "kernel": ["wg"],
        "wireguard-go": ["wg", "wireguard-go"],  # the pinned build: .tools/bin only
        "wireguard-go-debian": ["wg", "/usr/bin/wireguard-go"],  # Debian's, by its path
        "boringtun": ["wg", "boringtun-cli"],
    }


def test_each_daemon_runs_in_the_foreground_and_boringtun_keeps_root():
    device = "tbab12wgcc"
    assert wg.USERSPACE["wireguard-go"].argv("/t/wireguard-go", device) == [
        "/t/wireguard-go", "-f", device,
    ]  # fmt: skip
    assert wg.USERSPACE["wireguard-go-debian"].argv("/usr/bin/wireguard-go", device) == [
        "/usr/bin/wireguard-go", "-f", device,
    ]  # fmt: skip
    # Without --disable-drop-privileges boringtun switches to the login user's ids,
    # which fails without a terminal (and would lose its control socket). Its defaults
    # are explicit: WG_THREADS in the environment must not change them unrecorded.
    assert wg.USERSPACE["boringtun"].argv("/t/boringtun-cli", device) == [
        "/t/boringtun-cli", "--foreground", "--disable-drop-privileges",
        "--threads", "4", "--verbosity", "error", device,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("refusal", "auto"), [(None, "kernel"), ("Unknown device type", "wireguard-go")]
)
def test_auto_is_the_kernel_when_it_has_wireguard_else_the_pinned_wireguard_go(
    monkeypatch, refusal, auto
):
    monkeypatch.setattr(probing, "kernel_link_type", lambda kind, args=(): refusal)
    assert WG.resolve_implementation(None) == auto  # none asked for: "auto"
    for name in USERSPACE:
        assert WG.resolve_implementation(name) == name  # a named one is kept


def test_kernel_wireguard_on_a_kernel_without_it_is_refused_with_the_alternatives(monkeypatch):
    monkeypatch.setattr(probing, "kernel_link_type", lambda kind, args=(): "Unknown device type")
    with pytest.raises(UserError) as refused:
        WG.resolve_implementation("kernel")
    assert str(refused.value) == (
        "tunnel.implementation: this kernel cannot create a wireguard link (Unknown device"
        " type); use a userspace implementation ('wireguard-go', 'wireguard-go-debian',"
        " 'boringtun') or 'auto'"
    )


def test_an_unknown_implementation_lists_every_one():
    with pytest.raises(UserError) as refused:
        WG.resolve_implementation("wg-go")
    assert str(refused.value) == (
        "tunnel.implementation: 'wg-go' is not an implementation of wireguard; allowed: auto,"
        " kernel, wireguard-go, wireguard-go-debian, boringtun"
    )


# --- finding the binaries: the pinned build is never another one ---


def test_the_pinned_builds_are_taken_from_the_tools_directory_only(tmp_path, monkeypatch):
    tools, path = tmp_path / "tools", tmp_path / "bin"
    for name in ("wireguard-go", "boringtun-cli", "iperf3"):
        executable(path / name)
    monkeypatch.setenv("TUNNELBENCH_TOOLS_DIR", str(tools))
    monkeypatch.setenv("PATH", str(path))
    # A same-named program on PATH (Debian's wireguard-go is /usr/bin/wireguard-go) is
    # another build: using it under the pinned name would mislabel the results.
    assert programs.find("wireguard-go") is None
    assert programs.find("boringtun-cli") is None
    assert programs.find("iperf3") == str(path / "iperf3")  # other programs: PATH
    daemon = wg.USERSPACE["boringtun"]
    with pytest.raises(UserError) as missing:
        programs.require(daemon.program, daemon.purpose)
    assert str(missing.value) == (
        "required program 'boringtun-cli' (boringtun, built into .tools/bin by `make setup`)"
        f" was not found in {tools}; run `make run`"
    )
    built = executable(tools / "wireguard-go")
    assert programs.find("wireguard-go") == str(built)


def test_a_program_named_by_its_path_is_that_file(tmp_path):
    debian = executable(tmp_path / "usr" / "bin" / "wireguard-go")
    assert programs.find(str(debian)) == str(debian)
    debian.chmod(0o644)
    assert programs.find(str(debian)) is None
    assert programs.find(str(tmp_path / "nowhere")) is None


# --- the versions recorded with every trial ---


def test_the_pinned_builds_record_what_they_were_built_from(tmp_path, monkeypatch, fresh_probes):
    tools = tmp_path / "tools"
    go_pin, crate = pinned("install-wireguard-go"), pinned("install-boringtun")
    executable(tools / "wireguard-go", prints(WIREGUARD_GO_PRINTS))
    (tools / "wireguard-go.version").write_text(go_pin + "\n")
    executable(tools / "boringtun-cli", prints(BORINGTUN_PRINTS))
    (tools / "boringtun-cli.version").write_text(crate + "\n")
    monkeypatch.setenv("TUNNELBENCH_TOOLS_DIR", str(tools))
    # wireguard-go prints its last release tag; the pinned commit is the precise part.
    assert WG.version("wireguard-go") == (
        f"wireguard-go v0.0.20250522, built from golang.zx2c4.com/wireguard@{go_pin}"
        f" ({tools}/wireguard-go)"
    )
    assert WG.version("boringtun") == (
        f"boringtun 0.7.1, built from crates.io boringtun-cli {crate} ({tools}/boringtun-cli)"
    )
    assert probing.program("boringtun-cli").pinned == crate


def test_a_build_without_its_stamp_records_what_it_prints(tmp_path, monkeypatch, fresh_probes):
    executable(tmp_path / "wireguard-go", prints(WIREGUARD_GO_PRINTS))
    monkeypatch.setenv("TUNNELBENCH_TOOLS_DIR", str(tmp_path))
    assert WG.version("wireguard-go") == f"wireguard-go v0.0.20250522 ({tmp_path}/wireguard-go)"


def test_debians_wireguard_go_records_the_package_version():
    daemon = wg.USERSPACE["wireguard-go-debian"]
    found = Program(True, "", path="/usr/bin/wireguard-go", version="wireguard-go v0.0.20220316")
    assert wg.describe_version(daemon, found, "0.0.20220316-1+b4") == (
        "wireguard-go v0.0.20220316, Debian package wireguard-go 0.0.20220316-1+b4"
        " (/usr/bin/wireguard-go)"
    )
    assert wg.describe_version(daemon, found, None) == (
        "wireguard-go v0.0.20220316, Debian package wireguard-go (version unknown)"
        " (/usr/bin/wireguard-go)"
    )


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("installed 0.0.20220316-1+b4", "0.0.20220316-1+b4"),
        ("config-files 0.0.20220316-1+b4", None),  # removed, not purged
        ("not-installed ", None),
    ],
)
def test_debian_package_version_from_dpkg(tmp_path, monkeypatch, fresh_probes, output, version):
    executable(tmp_path / "dpkg-query", f"#!/bin/sh\nprintf '%s' '{output}'\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probing.debian_package("wireguard-go") == version


def test_no_dpkg_means_no_package_version(tmp_path, monkeypatch, fresh_probes):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probing.debian_package("wireguard-go") is None


# --- the command line ---


def experiment(*args: str):
    return build_experiment(parser().parse_args(["run", *args]))


def test_a_comma_list_of_implementations_compares_them_against_one_baseline():
    configs = experiment(
        "--tunnels", "none,wireguard", "--wireguard-impl", "wireguard-go,boringtun",
        "--streams", "1,4",
    ).configs  # fmt: skip
    assert [(c.tunnel.kind.value, c.tunnel.implementation, c.traffic.streams) for c in configs] == [
        ("none", None, 1), ("none", None, 4),
        ("wireguard", "wireguard-go", 1), ("wireguard", "wireguard-go", 4),
        ("wireguard", "boringtun", 1), ("wireguard", "boringtun", 4),
    ]  # fmt: skip


def test_the_implementation_applies_to_wireguard_only():
    configs = experiment("--tunnels", "vxlan,wireguard", "--wireguard-impl", "boringtun").configs
    assert [c.tunnel.implementation for c in configs] == [None, None, "boringtun", "boringtun"]
    # "auto" as it is stored: the configurations of earlier runs keep their keys
    assert configs[0].settings()["tunnel.implementation"] == "auto"


# --- the install scripts ---


def test_install_scripts_pin_exact_versions():
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned("install-boringtun"))
    assert re.fullmatch(r"v0\.0\.0-\d{14}-[0-9a-f]{12}", pinned("install-wireguard-go"))
    # The README names the pinned boringtun.
    assert f"boringtun-cli {pinned('install-boringtun')}" in (ROOT / "README.md").read_text()


FAKE_CARGO = """#!/bin/sh
printf '%s\\n' "$CARGO_TARGET_DIR" "$@" > "$CARGO_LOG"
while [ $# -gt 0 ]; do [ "$1" = --root ] && root=$2; shift; done
mkdir -p "$root/bin"
printf '#!/bin/sh\\necho boringtun\\n' > "$root/bin/boringtun-cli"
"""


def install_boringtun(tmp_path: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    """Run the install script with a fake cargo first on PATH, which logs its call."""
    executable(tmp_path / "fake" / "cargo", FAKE_CARGO)
    env = {
        "PATH": f"{tmp_path / 'fake'}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "CARGO_LOG": str(tmp_path / "cargo.log"),
    }
    return subprocess.run(
        [str(SCRIPTS / "install-boringtun"), str(dest)],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_install_boringtun_builds_the_pin_with_the_cache_outside_the_checkout(tmp_path):
    dest, version = tmp_path / "tools", pinned("install-boringtun")
    executable(dest / "boringtun-cli")
    (dest / "boringtun-cli.version").write_text("0.6.0\n")  # an older pin: rebuild
    done = install_boringtun(tmp_path, dest)
    assert done.returncode == 0, done.stderr
    cache = tmp_path / "home" / ".cache" / "tunnelbench" / "cargo-target"
    assert done.stdout == (
        f"tunnelbench set-up: building boringtun-cli {version} (cargo cache in {cache})\n"
    )
    target_dir, *argv = (tmp_path / "cargo.log").read_text().splitlines()
    assert target_dir == str(cache)
    assert argv[:6] == ["install", "--quiet", "--locked", "--version", version, "--root"]
    assert argv[7:] == ["boringtun-cli"]
    assert os.access(dest / "boringtun-cli", os.X_OK)
    assert (dest / "boringtun-cli.version").read_text() == version + "\n"


def test_install_boringtun_is_silent_and_builds_nothing_the_second_time(tmp_path):
    dest = tmp_path / "tools"
    executable(dest / "boringtun-cli")
    (dest / "boringtun-cli.version").write_text(pinned("install-boringtun") + "\n")
    done = install_boringtun(tmp_path, dest)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not (tmp_path / "cargo.log").exists()


def test_install_boringtun_without_cargo_says_so_and_lets_set_up_go_on(tmp_path):
    if Path("/usr/bin/cargo").exists():
        pytest.skip("/usr/bin/cargo exists here")
    done = subprocess.run(
        [str(SCRIPTS / "install-boringtun"), str(tmp_path / "tools")],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0
    assert done.stderr.startswith("tunnelbench set-up: cargo not found, so boringtun is not built")
    assert not (tmp_path / "tools" / "boringtun-cli").exists()


# --- diagnosis and advice, on a recorded run of every userspace implementation ---
# tests/fixtures/runs/wireguard-implementations.db: `tunnelbench run --tunnels
# none,wireguard --wireguard-impl wireguard-go,wireguard-go-debian,boringtun --streams 1,4
# --stream-mode single --runs 2 --duration 2` on the 2-core development VM.


def recorded_run(tmp_path: Path) -> tuple[list[ConfigSummary], Environment]:
    store = recorded("wireguard-implementations", tmp_path)
    run = store.run("latest")
    summaries = summarize_run(store.trials(run.id))
    store.close()
    return summaries, run.environment


def saturated(s: ConfigSummary, env: Environment) -> Subject:
    """The configuration's medians with its busiest core driven to saturation, so that
    it is CPU-bound whatever this recording's verdict was."""
    subject = Subject(s.config, s.resolved, medians([t.metrics for t in s.trials]), None, env)
    hot = max(subject.cores, key=subject.busy)
    return replace(subject, metrics=dict(subject.metrics) | {f"cpu{hot}.idle": 3.0})


def test_the_recorded_run_stored_each_implementation_and_its_version(tmp_path):
    summaries, env = recorded_run(tmp_path)
    wireguard = [s for s in summaries if s.config.tunnel.kind is TunnelKind.WIREGUARD]
    assert [(s.label, s.config.traffic.streams) for s in wireguard] == [
        (f"wireguard ({name})", streams) for name in USERSPACE for streams in (1, 4)
    ]
    assert (env.versions or {})["wireguard/wireguard-go-debian"].startswith(
        "wireguard-go v0.0.20220316, Debian package wireguard-go 0.0.20220316-1+b4"
    )
    assert (env.versions or {})["wireguard/boringtun"].startswith(
        "boringtun 0.7.1, built from crates.io boringtun-cli 0.7.1"
    )


@pytest.mark.parametrize("name", USERSPACE)
def test_cpu_bound_userspace_wireguard_is_named_in_the_diagnosis_and_advice(tmp_path, name):
    summaries, env = recorded_run(tmp_path)
    for s in [s for s in summaries if s.resolved.to_dict().get("tunnel_implementation") == name]:
        subject = saturated(s, env)
        diagnosis = diagnose(subject)
        assert diagnosis.verdict.bound is Bound.CPU
        # The daemons are named <implementation>@<role>.
        assert diagnosis.verdict.subject is not None
        assert diagnosis.verdict.subject.startswith(f"{name}@"), diagnosis.verdict.summary
        siblings = [Sibling(o.config, o.goodput.median) for o in summaries if o.goodput]
        advice = {a.suggestion: a for a in advise(subject, diagnosis, siblings)}
        kernel = advice[f"prefer kernel WireGuard over userspace {name}"]
        assert kernel.setting == "tunnel.implementation" and kernel.measured is None
        assert f"{name} copies every packet between the kernel and userspace" in kernel.because
        faster = [a for a in advice.values() if a.suggestion.startswith("use ")]
        faster = [a for a in faster if a.setting == "tunnel.implementation"]
        if name == "wireguard-go":
            assert faster == []  # the fastest measured here: nothing to switch to
        else:
            (switch,) = faster
            assert switch.suggestion.startswith(f"use wireguard-go rather than {name}")
            assert switch.measured is not None and switch.measured.value == "wireguard-go"
            assert switch.measured.change_pct > 50


def test_a_slower_implementation_is_told_the_faster_one_the_run_measured(tmp_path):
    """Debian's wireguard-go and boringtun lose packets here (loss-heavy, not CPU-bound):
    the run measured wireguard-go with the same settings, and the advice cites it."""
    summaries, env = recorded_run(tmp_path)
    siblings = [Sibling(o.config, o.goodput.median) for o in summaries if o.goodput]
    for s in summaries:
        implementation = s.resolved.to_dict().get("tunnel_implementation")
        subject = Subject(s.config, s.resolved, medians([t.metrics for t in s.trials]), None, env)
        switch = [
            a
            for a in advise(subject, diagnose(subject), siblings)
            if a.suggestion.startswith("use ") and a.setting == "tunnel.implementation"
        ]
        if implementation in ("wireguard-go-debian", "boringtun"):
            (advice_,) = switch
            assert advice_.measured is not None and advice_.measured.value == "wireguard-go"
            assert advice_.measured.change_pct > 100
            assert advice_.because.startswith(diagnose(subject).verdict.summary)
        else:
            assert switch == []
