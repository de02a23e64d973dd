"""Integration tests build real labs. Each test is checked for leftovers and for any
change to the host's own namespace: links, addresses, routes, rules and sysctls."""

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunnelbench.lab import state as lab_state

HOST_SYSCTLS = [
    "net/ipv4/ip_forward",
    "net/ipv6/conf/all/forwarding",
    "net/ipv6/conf/all/accept_dad",
    "net/ipv6/conf/default/accept_dad",
]
WATCHED_PROGRAMS = {"iperf3", "wireguard-go", "iperf", "openvpn", "boringtun-cli", "charon"}


def _ip_json(*args: str) -> object:
    return json.loads(
        subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True).stdout
        or "[]"
    )


def host_snapshot() -> dict[str, object]:
    return {
        "links": _ip_json("link", "show"),
        "addresses": _ip_json("address", "show"),
        "routes4": _ip_json("-4", "route", "show", "table", "all"),
        "routes6": _ip_json("-6", "route", "show", "table", "all"),
        "rules": _ip_json("rule", "show"),
        "sysctls": {k: Path("/proc/sys", k).read_text() for k in HOST_SYSCTLS},
    }


def lab_processes() -> set[int]:
    """PIDs of every live process of a program the lab starts.

    Zombies are not counted: an ended daemon whose first parent exited waits for init to
    reap it, which is none of tunnelbench's doing.
    """
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if comm in WATCHED_PROGRAMS and state != "Z":
                pids.add(int(entry.name))
    return pids


def tb_namespaces() -> set[str]:
    return {n for n in lab_state.list_namespaces() if n.startswith("tb-")}


@pytest.fixture(autouse=True)
def leaves_no_trace() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("integration tests build network namespaces and need root")
    host, namespaces, processes = host_snapshot(), tb_namespaces(), lab_processes()
    labs = set(lab_state.known_labs())
    yield
    assert tb_namespaces() == namespaces, "a test left tunnelbench namespaces behind"
    assert lab_processes() - processes == set(), "a test left lab processes running"
    assert set(lab_state.known_labs()) == labs, "a test left lab state behind"
    assert host_snapshot() == host, "the host namespace changed"
    leftover_sockets = list(Path("/var/run/wireguard").glob("tb*.sock"))
    assert leftover_sockets == [], "userspace WireGuard sockets left behind"
