"""``lab.kernel``: what it may name, how a VM guest is booted for it, and how a guest's
trials come back into the run's store."""

import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.cli_process import tunnelbench
from tests.report_fixtures import recorded as recorded_copy
from tunnelbench.analysis.advice import advise
from tunnelbench.analysis.diagnosis import Bound, Subject, diagnose, medians
from tunnelbench.analysis.summary import ConfigSummary, summarize_run, where
from tunnelbench.bench import guest_trials
from tunnelbench.bench.planfile import (
    BUSY_VM,
    KEPT_TRIAL_OVERHEAD_S,
    REPORT_PER_CONFIG_S,
    REPORT_S,
    RUN_START_S,
    TRIAL_OVERHEAD_S,
    VM_BOOT_S,
    VM_KEPT_TRIAL_OVERHEAD_S,
    VM_TRIAL_OVERHEAD_S,
    parse,
)
from tunnelbench.bench.store import Store
from tunnelbench.cli.guest import EventSink
from tunnelbench.errors import LabError, UserError
from tunnelbench.lab import state as lab_state
from tunnelbench.model.environment import Environment
from tunnelbench.model.fields import SETTINGS
from tunnelbench.model.kernelspec import parse_spec
from tunnelbench.model.plan import WARMUP_AUTO_ESTIMATE, Experiment, TrialConfig, VmSettings
from tunnelbench.model.records import KVM, TCG, Resolved, TrialStatus, TunnelSetup, WhereRan
from tunnelbench.report import compare as compare_report
from tunnelbench.report.markdown import guest_line
from tunnelbench.vm import guest_modules, kernels, machine
from tunnelbench.vm.kernels import Kernel


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("host", "host"),
        ("debian", "debian"),
        ("linux-image-6.1.0-56-amd64", "linux-image-6.1.0-56-amd64"),
        ("6.1.0-56-amd64", "linux-image-6.1.0-56-amd64"),
        ("6.12.117+deb12-amd64", "linux-image-6.12.117+deb12-amd64"),
        ("/srv/kernels/6.1//", "/srv/kernels/6.1"),
    ],
)
def test_a_kernel_is_named_in_one_canonical_form(given, canonical):
    assert parse_spec("lab.kernel", given) == canonical


@pytest.mark.parametrize("bad", ["", "latest", "linux-image-*", "../k", "6", 6.1, None, "a b"])
def test_anything_else_is_refused_naming_the_key(bad):
    with pytest.raises(UserError, match=r"^lab\.kernel: .* is not a kernel|not a directory"):
        parse_spec("lab.kernel", bad)


@pytest.mark.parametrize(
    ("given", "mib"), [("2G", 2048), ("512M", 512), ("1GiB", 1024), (768, 768), (" 4g ", 4096)]
)
def test_guest_memory_in_mib(given, mib):
    assert SETTINGS["lab.vm.memory"].parse("lab.vm.memory", given) == mib


@pytest.mark.parametrize("bad", ["2T", "lots", 100, 10**6, True, "0M"])
def test_guest_memory_out_of_range_or_not_a_size(bad):
    with pytest.raises(UserError, match=r"^lab\.vm\.memory: "):
        SETTINGS["lab.vm.memory"].parse("lab.vm.memory", bad)


def test_a_guest_size_on_the_host_kernel_is_one_configuration():
    plan = parse(
        '[base]\n"traffic.duration" = 1\n[matrix]\n"lab.kernel" = ["host", "debian"]\n'
        '"lab.vm.cpus" = [1, 2]\n',
        "p.toml",
    )
    labs = [(c.lab.kernel, c.lab.vm.cpus) for c in plan.experiment.configs]
    assert sorted(set(labs)) == [("debian", 1), ("debian", 2), ("host", 2)]


def test_an_old_configuration_keeps_its_key():
    """Stored before lab.kernel existed: the same key as today's on the host."""
    old = TrialConfig().to_dict()
    del old["lab"]["kernel"], old["lab"]["vm"]
    assert TrialConfig.from_dict(old).key() == TrialConfig().key()
    assert '"kernel"' not in TrialConfig().key()


def test_vm_options_without_a_kernel_are_an_error(tmp_path):
    done = tunnelbench("run", "--vm-cpus", "1", "--db", "x.db", cwd=tmp_path)
    assert done.returncode == 2
    assert "--vm-cpus: sizes the VM of a lab on another kernel; give --kernel too" in done.stderr
    assert not (tmp_path / "x.db").exists()


def test_a_kernel_apt_does_not_know_is_an_error_before_anything_runs(tmp_path):
    done = tunnelbench("run", "--kernel", "linux-image-0.0.0-nosuch", "--db", "x.db", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "lab.kernel: no package 'linux-image-0.0.0-nosuch' in the configured apt" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()


def _tree(root: Path, releases: list[str], image: bool = True, index: bool = True) -> Path:
    for release in releases:
        (root / "lib" / "modules" / release).mkdir(parents=True)
        if index:
            (root / "lib" / "modules" / release / "modules.dep").write_text("")
        if image:
            (root / "boot").mkdir(exist_ok=True)
            (root / "boot" / f"vmlinuz-{release}").write_bytes(b"\0")
    return root


def test_an_unpacked_kernel_is_found_by_its_one_release(tmp_path):
    kernel = kernels.unpacked(_tree(tmp_path, ["6.1.0-9-amd64"]), str(tmp_path))
    assert kernel.release == "6.1.0-9-amd64"
    assert kernel.image == tmp_path / "boot" / "vmlinuz-6.1.0-9-amd64"
    assert kernel.modules == tmp_path / "lib" / "modules"


@pytest.mark.parametrize(
    ("releases", "image", "index", "message"),
    [
        ([], True, True, "holds 0 kernel releases"),
        (["6.1.0-1-amd64", "6.1.0-2-amd64"], True, True, "holds 2 kernel releases"),
        (["6.1.0-1-amd64"], False, True, "has no kernel image"),
        (["6.1.0-1-amd64"], True, False, "has no module index .*run `depmod -b"),
    ],
)
def test_an_unpacked_kernel_that_cannot_boot_is_refused(tmp_path, releases, image, index, message):
    _tree(tmp_path, releases, image, index)
    with pytest.raises(UserError, match=message):
        kernels.unpacked(tmp_path, str(tmp_path))


KERNEL = Kernel("debian", "6.1.0-9-amd64", Path("/c/boot/vmlinuz"), Path("/c/lib/modules"))


def test_the_guest_is_booted_with_its_size_its_modules_and_the_exchange(monkeypatch):
    monkeypatch.setattr(machine, "vng", lambda: "/venv/bin/vng")
    argv = machine.boot_argv(
        KERNEL, VmSettings(cpus=1, memory=768), Path("/run/x"), "cmd", accel=TCG
    )
    assert argv[:4] == ["/venv/bin/vng", "--disable-microvm", "--disable-kvm", "--force-9p"]
    pairs = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert pairs["--run"] == "/c/boot/vmlinuz"
    assert pairs["--cpus"] == "1" and pairs["--memory"] == "768M"
    assert pairs["--rodir"] == "/lib/modules=/c/lib/modules"
    assert pairs["--rwdir"] == "/run/x" and pairs["--exec"] == "cmd"
    kvm = machine.boot_argv(KERNEL, VmSettings(), Path("/run/x"), "cmd", accel=KVM)
    assert "--disable-kvm" not in kvm


def test_the_guest_command_writes_output_and_exit_code_into_the_exchange(tmp_path):
    """Run as the guest's shell would: the exit code of the command, not of the echo."""
    line = machine.guest_command(tmp_path, ["sh", "-c", 'echo "it\'s here"; exit 3'])
    subprocess.run(["sh", "-c", line], check=True)
    assert (tmp_path / machine.OUTPUT).read_text() == "it's here\n"
    assert (tmp_path / machine.EXIT_CODE).read_text().strip() == "3"


def test_the_guest_loads_what_the_probes_need_while_its_python_starts(tmp_path):
    from tunnelbench.bench import capabilities
    from tunnelbench.system import probing

    modules = capabilities.probed_modules()
    # Every module a probed capability's hint names, once: what the probe would load.
    for capability in [*capabilities.link_probes(), *probing.QDISC_ARGS, *probing.ESP_ARGS]:
        hint = capabilities.module_hint(capability)
        if hint is not None:
            assert set(hint.split()[1:]) - {"-a"} <= set(modules), capability
    assert len(modules) == len(set(modules)) and {"wireguard", "sch_cake", "esp4"} <= set(modules)
    # The modules, and beside them one SA of each ESP algorithm, each in a namespace of
    # its own (the probe's own SA, so it instantiates what the probe will ask for).
    loads, sas = capabilities.guest_preload()
    assert loads == [["modprobe", "-q", "-a", *modules]]
    assert sas == [
        ["unshare", "--net", "--", *probing.esp_probe_argv(name)] for name in probing.ESP_ARGS
    ]
    line = machine.guest_command(tmp_path, ["python3", "-m", "x"], preload=True)
    # In the background (&, not ;), quietly, so a module the kernel lacks stops nothing.
    script = tmp_path / machine.PRELOAD
    assert line.startswith(f"sh {script} >/dev/null 2>&1 & python3 -m x >")
    assert machine.guest_command(tmp_path, ["true"]).startswith("true >")


def test_the_preload_script_runs_its_groups_side_by_side_and_passes_over_failures(tmp_path):
    """Run as the guest would: the second group finishes while the first still sleeps,
    and a command that fails does not stop the rest of its group."""
    out = tmp_path / "order"
    slow = [["sleep", "0.5"], ["sh", "-c", f"echo slow >> {out}"]]
    fast = [["false"], ["sh", "-c", f"echo fast >> {out}"]]
    script = tmp_path / machine.PRELOAD
    script.write_text(machine.preload_script([slow, fast]))
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert out.read_text().split() == ["fast", "slow"]  # it waited for both


def test_the_guest_reads_its_modules_from_an_archive_the_host_built(tmp_path, monkeypatch):
    """The guest cannot write this machine's files, and reads them over 9p a round trip a
    lookup: what it imports must come compiled, from one archive its Python is told of.
    The archive holds all of tunnelbench and whole standard-library packages; a Python
    started as the guest's is (but here) imports the guest's side from it, and the next
    boot rebuilds it only when a source changed."""
    prefix = tmp_path / "bytecode"
    monkeypatch.setattr(machine, "BYTECODE_DIR", prefix)
    monkeypatch.setattr(machine, "vng", lambda: "/venv/bin/vng")
    guest = machine.Guest(KERNEL, VmSettings(), {}, machine.Accel(TCG))
    try:
        line = guest._argv[-1]
    finally:
        guest.__exit__(None, None, None)
    archive = prefix / machine.MODULES
    argv = machine.guest_argv(archive, machine.GUEST_MODULE, str(guest.exchange))
    assert shlex.join(argv) in line
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"tunnelbench/cli/guest.pyc", "tunnelbench/report/html.pyc"} <= names
    assert {"json/decoder.pyc", "json/tool.pyc", "encodings/idna.pyc"} <= names  # whole
    assert not any(n.startswith(("sqlite3/test/", "json/tests/")) for n in names)
    first = archive.stat().st_mtime_ns
    done = subprocess.run(
        [sys.executable, "-c", f"import {machine.GUEST_MODULE} as m; print(m.__file__)"],
        env={**os.environ, "PYTHONPATH": str(archive)}, capture_output=True, text=True,
        check=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.stdout.strip() == f"{archive}/tunnelbench/cli/guest.pyc"
    # The guest's own command, here: the archive copied, and the guest side run from the
    # copy up to its first read, of the job in an exchange directory that is missing.
    # Without the site packages (-S) the copy is where tunnelbench can come from.
    copy = tmp_path / "copy.zip"
    argv = machine.guest_argv(archive, machine.GUEST_MODULE, str(tmp_path / "x"), copy=str(copy))
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 1 and copy.read_bytes() == archive.read_bytes()
    assert f"No such file or directory: '{tmp_path / 'x' / machine.JOB}'" in done.stderr
    assert 'exec "$p" -S -m' in argv[2]
    assert machine.module_archive() == archive and archive.stat().st_mtime_ns == first


def test_the_archive_is_rebuilt_when_a_source_changes(tmp_path, monkeypatch):
    source = tmp_path / "mod.py"
    source.write_text("X = 1\n")
    monkeypatch.setattr(guest_modules, "sources", lambda first: {"mod.pyc": source})
    archive = tmp_path / "modules.zip"
    assert guest_modules.build(archive, "mod")
    assert not guest_modules.build(archive, "mod")
    source.write_text("X = 22\n")
    assert guest_modules.build(archive, "mod")
    done = subprocess.run(
        [sys.executable, "-c", "import mod; print(mod.X, mod.__file__)"],
        env={**os.environ, "PYTHONPATH": str(archive)}, capture_output=True, text=True,
        check=True, cwd=tmp_path / "..",
    )  # fmt: skip
    assert done.stdout.split() == ["22", f"{archive}/mod.pyc"]


def test_a_guest_that_cannot_boot_leaves_no_exchange_directory(tmp_path, monkeypatch):
    """A missing program (or a failed compile) refuses the guest in its constructor,
    where no ``with`` block will remove what it made."""
    monkeypatch.setattr(machine, "EXCHANGE_ROOT", tmp_path / "exchange")
    monkeypatch.setattr(machine, "BYTECODE_DIR", tmp_path / "bytecode")
    monkeypatch.setattr(lab_state, "STATE_ROOT", tmp_path / "labs")
    real_python = sys.executable
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python3"))
    with pytest.raises(UserError, match="virtme-ng"):
        machine.Guest(KERNEL, VmSettings(), {}, machine.Accel(TCG), command=["true"])
    assert list((tmp_path / "exchange").iterdir()) == []
    monkeypatch.setattr(sys, "executable", real_python)
    monkeypatch.setattr(machine, "GUEST_MODULE", "tunnelbench.no_such_module")
    with pytest.raises(LabError, match="compiling tunnelbench for the guest failed"):
        machine.Guest(KERNEL, VmSettings(), {}, machine.Accel(TCG))
    assert list((tmp_path / "exchange").iterdir()) == []
    assert list((tmp_path / "labs").iterdir()) == []  # nor a record of it


def test_a_guest_trial_is_stored_on_the_host_as_the_guest_recorded_it(tmp_path):
    events = tmp_path / "events.jsonl"
    config = TrialConfig.from_settings({"lab.kernel": "debian"})
    resolved = Resolved(TunnelSetup("kernel"), where=WhereRan(virtualization=TCG, vm_cpus=2))
    with events.open("a") as stream:
        EventSink(stream).add_trial(
            0,
            seq=3,
            repetition=1,
            config_key=config.key(),
            config=config,
            resolved=resolved,
            status=TrialStatus.OK,
            error=None,
            started_at=1.5,
            metrics={"goodput_bps": 1e6},
            artifacts={"iperf3": [{"end": {}}]},
        )
    event = json.loads(events.read_text())
    assert event["event"] == "trial"
    store = Store(tmp_path / "s.db")
    run_id = store.start_run("t", Experiment(()), Environment())
    guest_trials._store(store, run_id, event["trial"])
    (trial,) = store.trials(run_id)
    assert trial.seq == 3 and trial.config_key == config.key()
    assert trial.resolved.where.virtualization == TCG and trial.resolved.where.vm_cpus == 2
    assert trial.metrics == {"goodput_bps": 1e6}
    assert store.artifact(trial.id, "iperf3") == [{"end": {}}]
    store.close()


def test_a_guest_environment_lands_under_the_runs_guests(tmp_path):
    store = Store(tmp_path / "s.db")
    run_id = store.start_run("t", Experiment(()), Environment(kernel="host-k"))
    store.add_guest_environment(run_id, "debian", Environment(kernel="6.1.0-9-amd64"))
    run = store.run(str(run_id))
    assert run.environment.to_dict() == {
        "kernel": "host-k",
        "guests": {"debian": {"kernel": "6.1.0-9-amd64"}},
    }
    store.close()


def _recorded(name: str, tmp: Path) -> tuple[list[ConfigSummary], Environment]:
    store = recorded_copy(name, tmp)
    run = store.run("latest")
    summaries = summarize_run(store.trials(run.id))
    store.close()
    return summaries, run.environment


def _subject(s: ConfigSummary, env: Environment, ceiling: float | None = None) -> Subject:
    ok = [t.metrics for t in s.trials if t.status == "ok"]
    return Subject(s.config, s.resolved, medians(ok), ceiling, env, runs=tuple(ok))


def test_an_emulated_cpus_shortfall_is_its_own_verdict_with_no_advice(tmp_path):
    """The generator-bound single stream of a recorded run, as if measured under TCG."""
    summaries, env = _recorded("l2-tunnel-mtu", tmp_path)
    base = summaries[0]
    assert diagnose(_subject(base, env)).verdict.bound is Bound.GENERATOR
    base.resolved.where.virtualization, base.resolved.where.kernel_release = TCG, "6.1.0-9-amd64"
    subject = _subject(base, env)
    found = diagnose(subject)
    assert found.verdict.bound is Bound.EMULATED
    assert "emulated CPU (QEMU TCG, kernel 6.1.0-9-amd64)" in found.verdict.summary
    assert "the rules would have said generator-bound" in found.verdict.summary
    assert advise(subject, found, []) == []


def test_a_link_bound_figure_stays_valid_under_tcg(tmp_path):
    summaries, env = _recorded("queue-comparison", tmp_path)
    shaped = next(s for s in summaries if s.goodput and s.config.tunnel.kind.value == "none")
    shaped.resolved.where.virtualization = TCG
    found = diagnose(_subject(shaped, env, 1448 / 1514 * 1e9))
    assert found.verdict.bound is Bound.LINK


def _summary_in(mode: str | None, tmp_path: Path) -> ConfigSummary:
    where_to = tmp_path / (mode or "none")
    where_to.mkdir(parents=True, exist_ok=True)
    summaries, _ = _recorded("queue-comparison", where_to)
    first = summaries[0]
    first.resolved.where.virtualization = mode
    return first


def test_compare_refuses_an_emulated_figure_against_a_real_cpus(tmp_path):
    with pytest.raises(UserError, match=r"ran with virtualization tcg in A and none in B"):
        compare_report._refuse_emulated(
            compare_report.Row(_summary_in(TCG, tmp_path), _summary_in(None, tmp_path))
        )
    # tcg against tcg is a comparison; so is one side alone.
    compare_report._refuse_emulated(
        compare_report.Row(_summary_in(TCG, tmp_path), _summary_in(TCG, tmp_path / "b"))
    )
    compare_report._refuse_emulated(compare_report.Row(_summary_in(TCG, tmp_path / "c"), None))


def test_advice_reads_the_capabilities_of_the_kernel_the_configuration_ran_on():
    host = Environment.from_dict(
        {"kernel": "host-k", "guests": {"debian": {"kernel": "6.1.0-9-amd64"}}}
    )
    on_host = TrialConfig()
    in_guest = TrialConfig.from_settings({"lab.kernel": "debian"})
    assert where(on_host, host) is host
    assert where(in_guest, host) == Environment(kernel="6.1.0-9-amd64")


def test_the_report_names_each_guest_and_says_when_its_cpu_is_emulated():
    line = guest_line(
        "debian",
        Environment.from_dict(
            {
                "kernel": "6.1.0-9-amd64",
                "kernel_package": "linux-image-6.1.0-9-amd64=6.1.1-1",
                "virtualization": TCG,
                "vm_cpus": 1,
                "vm_memory_mib": 512,
            }
        ),
    )
    assert line == (
        "lab.kernel debian: kernel 6.1.0-9-amd64 (linux-image-6.1.0-9-amd64=6.1.1-1), tcg,"
        " 1 vCPUs, 512 MiB; QEMU emulates its CPU: CPU-bound figures measure the emulator"
    )


def test_plan_show_says_which_trials_need_a_vm_and_counts_the_boots(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text(
        'repetitions = 2\n[base]\n"traffic.duration" = 1\n[matrix]\n'
        '"lab.kernel" = ["host", "debian"]\n"lab.vm.cpus" = [1, 2]\n'
    )
    # A database of no trials: the reference machine's overheads, which the sum counts.
    none = ["--db", str(tmp_path / "none.db")]
    shown = json.loads(tunnelbench("plan", "show", "--json", str(plan), *none).stdout)
    assert shown["vm_boots"] == 2
    vm = [t for t in shown["trials"] if t["vm"]]
    # The host's configuration is one (its guest size normalized away), each guest's two.
    assert len(vm) == 4 and len(shown["trials"]) == 6
    # Trials of 1 s after the warm-up expected, and their overhead, on the host or in a
    # VM, its lab built for the first run and kept for the second; two boots; the run's
    # start and reports.
    trial = 1 + WARMUP_AUTO_ESTIMATE
    expected = (
        trial + TRIAL_OVERHEAD_S + trial + KEPT_TRIAL_OVERHEAD_S
        + 2 * (trial + VM_TRIAL_OVERHEAD_S + trial + VM_KEPT_TRIAL_OVERHEAD_S)
        + 2 * VM_BOOT_S + RUN_START_S + REPORT_S + 3 * REPORT_PER_CONFIG_S
    )  # fmt: skip
    assert shown["estimated_seconds"]["min"] == pytest.approx(expected, abs=0.1)
    # Until this machine has taught its own, the high end is the busy day's VM figures.
    busy = BUSY_VM
    expected_busy = expected + (
        2 * (busy.vm_built_s - VM_TRIAL_OVERHEAD_S + busy.vm_kept_s - VM_KEPT_TRIAL_OVERHEAD_S)
        + 2 * (busy.vm_boot_s - VM_BOOT_S)
    )  # fmt: skip
    assert shown["estimated_seconds"]["busy_max"] == pytest.approx(expected_busy, abs=0.1)
    assert expected_busy > 1.2 * expected
    table = tunnelbench("plan", "show", str(plan), *none).stdout
    assert "in a VM: 4 trials on another kernel, 2 boot(s)" in table
    assert "with other work on the machine, up to" in table


def test_tune_refuses_a_lab_on_another_kernel(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text('[base]\n"lab.kernel" = "debian"\n')
    done = tunnelbench("tune", str(plan), "--db", "t.db", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "lab.kernel: tune runs on this machine's kernel only, not 'debian'" in done.stderr
    assert not (tmp_path / "t.db").exists()


# --- the cache's paths, as virtme-ng takes them (kernel-comparison's 6.12 guest never
# booted: its cache entry held the "~" of Debian's version 6.12.117-1~bpo12+1) ---

BACKPORT = ("linux-image-6.12.117+deb12-amd64", "6.12.117-1~bpo12+1")


@pytest.mark.parametrize(
    ("package", "version", "name"),
    [
        ("linux-image-6.1.0-56-amd64", "6.1.158-1", "linux-image-6.1.0-56-amd64_6.1.158-1"),
        (*BACKPORT, "linux-image-6.12.117+deb12-amd64_6.12.117-1_7ebpo12+1"),
        ("linux-image-6.1.0-9-amd64", "1:6.1.27~rc1", "linux-image-6.1.0-9-amd64_1_3a6.1.27_7erc1"),
    ],
)
def test_a_cache_entry_is_named_with_what_virtme_ng_takes(package, version, name):
    assert kernels.entry_name(package, version) == name
    assert kernels.VNG_SAFE_PATH.fullmatch(name)


def test_virtme_ng_itself_takes_the_modules_of_a_backport_from_the_cache():
    """The --rodir argument boot_argv gives, checked by virtme-ng's own pattern: the
    entry named as before (the version as it is) is the one it refused."""
    from virtme.commands.run import _RWDIR_RE  # type: ignore[import-untyped]

    root = Path("/var/cache/tunnelbench/kernels")
    entry = root / kernels.entry_name(*BACKPORT)
    assert _RWDIR_RE.fullmatch(f"/lib/modules={entry / 'lib' / 'modules'}")
    before = root / "_".join(BACKPORT)
    assert not _RWDIR_RE.fullmatch(f"/lib/modules={before / 'lib' / 'modules'}")


def _unpacked_tree(tree: Path, release: str = "6.12.117+deb12-amd64") -> Path:
    (tree / "lib" / "modules" / release).mkdir(parents=True)
    (tree / "lib" / "modules" / release / "modules.dep").write_text("")
    (tree / "boot").mkdir()
    (tree / "boot" / f"vmlinuz-{release}").write_text("")
    return tree


def test_a_kernel_directory_virtme_ng_would_not_share_is_refused_before_booting(tmp_path):
    tree = _unpacked_tree(tmp_path / "k~1")
    with pytest.raises(UserError) as caught:
        kernels.unpacked(tree, str(tree))
    assert str(caught.value) == (
        f"lab.kernel: {str(tree)!r}: {str(tree)!r} holds '~', which virtme-ng refuses in a"
        " path it shares with the guest (letters, digits and _+ /.- only); move the"
        " directory given"
    )
    assert caught.value.exit_code == 2


def test_a_kernel_cache_virtme_ng_would_not_share_is_refused_before_fetching(tmp_path):
    cache = tmp_path / "cache:1"
    with pytest.raises(UserError, match=r"holds ':', .*set TUNNELBENCH_KERNEL_CACHE"):
        kernels.check_shareable(cache / kernels.entry_name(*BACKPORT), "debian")
    assert not cache.exists()


def test_an_entry_unpacked_under_its_raw_version_is_renamed_not_fetched_again(tmp_path):
    legacy = _unpacked_tree(tmp_path / "_".join(BACKPORT))
    (legacy / kernels.COMPLETE).write_text("=".join(BACKPORT) + "\n")
    entry = tmp_path / kernels.entry_name(*BACKPORT)
    kernels._adopt_legacy_entry(legacy, entry)
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry.name]
    assert kernels.unpacked(entry, "linux-image-6.12.117+deb12-amd64").release == (
        "6.12.117+deb12-amd64"
    )


@pytest.mark.parametrize(
    ("depends", "expected"),
    [
        # Debian 12's linux-image-amd64, as apt-cache showed it on this machine.
        ("linux-image-6.1.0-56-amd64 (= 6.1.192-2)", ("linux-image-6.1.0-56-amd64", "6.1.192-2")),
        ("linux-image-6.12.9+bpo-amd64 (= 6.12.9-1~bpo12+1), foo", ("linux-image-6.12.9+bpo-amd64",
                                                                    "6.12.9-1~bpo12+1")),
        ("linux-image-6.1.0-56-amd64 (>= 6.1)", ("linux-image-6.1.0-56-amd64", None)),
        ("linux-image-6.1.0-56-amd64", ("linux-image-6.1.0-56-amd64", None)),
    ],
)  # fmt: skip
def test_the_meta_packages_exact_dependency_is_the_version_fetched(monkeypatch, depends, expected):
    monkeypatch.setattr(kernels, "_show", lambda package: {"Depends": depends})
    assert kernels._stock_package() == expected
