"""``lab.kernel``: what it may name, how a VM guest is booted for it, and how a guest's
trials come back into the run's store."""

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.helpers import tunnelbench
from tunnelbench.bench import guest_trials
from tunnelbench.bench.planfile import parse
from tunnelbench.bench.store import Store
from tunnelbench.cli.guest import EventSink
from tunnelbench.errors import UserError
from tunnelbench.model.fields import SETTINGS
from tunnelbench.model.kernelspec import parse_spec
from tunnelbench.model.plan import TrialConfig, VmSettings
from tunnelbench.model.records import KVM, TCG, Resolved, TrialStatus
from tunnelbench.vm import kernels, machine
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
    assert argv[:3] == ["/venv/bin/vng", "--disable-microvm", "--disable-kvm"]
    pairs = dict(zip(argv[3::2], argv[4::2], strict=False))
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


def test_a_guest_trial_is_stored_on_the_host_as_the_guest_recorded_it(tmp_path):
    events = tmp_path / "events.jsonl"
    config = TrialConfig.from_settings({"lab": {"kernel": "debian"}})
    resolved = Resolved(tunnel_implementation="kernel", virtualization=TCG, vm_cpus=2)
    with events.open("a") as stream:
        EventSink(stream).add_trial(
            0,
            seq=3,
            repetition=1,
            config_key=config.key(),
            config=config.to_dict(),
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
    run_id = store.start_run("t", {}, {})
    guest_trials._store(store, run_id, event["trial"])
    (trial,) = store.trials(run_id)
    assert trial.seq == 3 and trial.config_key == config.key()
    assert trial.resolved.virtualization == TCG and trial.resolved.vm_cpus == 2
    assert trial.metrics == {"goodput_bps": 1e6}
    assert store.artifact(trial.id, "iperf3") == [{"end": {}}]
    store.close()


def test_a_guest_environment_lands_under_the_runs_guests(tmp_path):
    store = Store(tmp_path / "s.db")
    run_id = store.start_run("t", {}, {"kernel": "host-k"})
    store.add_guest_environment(run_id, "debian", {"kernel": "6.1.0-9-amd64"})
    run = store.run(str(run_id))
    assert run.environment == {
        "kernel": "host-k",
        "guests": {"debian": {"kernel": "6.1.0-9-amd64"}},
    }
    store.close()
