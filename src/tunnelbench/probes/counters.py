"""Byte and packet counters of lab interfaces, read before and after the traffic.

Evidence that the traffic really crossed the tunnel device, and the base for drop counts.
"""

import json

from tunnelbench.command import run

FIELDS = ("bytes", "packets", "dropped")


def parse_link_stats(text: str) -> dict[str, int]:
    """rx_/tx_ bytes, packets and drops from ``ip -j -s link show dev X``."""
    (link,) = json.loads(text)
    stats = link["stats64"]
    return {f"{d}_{f}": int(stats[d][f]) for d in ("rx", "tx") for f in FIELDS}


def read(namespace: str, device: str) -> dict[str, int]:
    done = run(["ip", "-n", namespace, "-j", "-s", "link", "show", "dev", device])
    return parse_link_stats(done.stdout)


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in after}
