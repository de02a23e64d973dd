"""The kernel suite boots Debian's stock kernel in a VM (tunnelbench's ``lab.kernel``)
and runs there what this machine's kernel cannot: few boots, many checks per boot.

Each test is checked for leftovers on the host: no QEMU it started, no exchange
directory, no virtme-ng temporary file, no lab namespace and no change to the host's own
network configuration (the integration suite's check).
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import host_snapshot, tb_namespaces
from tunnelbench.vm.machine import EXCHANGE_ROOT


def qemu_processes() -> set[int]:
    """QEMU's running processes: a zombie waiting for init to reap it is not one."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                name, state = (entry / "stat").read_text().rsplit(")", 1)
            except (OSError, ValueError):
                continue
            if name.partition("(")[2].startswith("qemu-system") and state.split()[0] != "Z":
                found.add(int(entry.name))
    return found


def exchanges() -> set[Path]:
    return set(EXCHANGE_ROOT.glob("guest-*")) if EXCHANGE_ROOT.exists() else set()


def virtme_files() -> set[Path]:
    return set(Path("/tmp").glob("virtme_*"))


@pytest.fixture(autouse=True)
def leaves_no_vm_behind() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("the kernel suite boots VMs that build network namespaces: needs root")
    before = (qemu_processes(), exchanges(), virtme_files(), tb_namespaces(), host_snapshot())
    yield
    after = (qemu_processes(), exchanges(), virtme_files(), tb_namespaces(), host_snapshot())
    assert after[0] - before[0] == set(), "a test left a QEMU process running"
    assert after[1] - before[1] == set(), "a test left a guest exchange directory"
    assert after[2] - before[2] == set(), "a test left virtme-ng's temporary files"
    assert after[3] == before[3], "a test left lab namespaces on the host"
    assert after[4] == before[4], "the host namespace changed"
