"""The host seam holds: in a real trial, nothing outside the lab's own plumbing touches a
lab namespace except through ``lab.host(role)``; and ``lab up`` builds through the same
session as a run.

Every process the trial starts is watched (``subprocess.Popen`` wrapped, the real one
still doing the work). A command naming one of the lab's namespaces is allowed only when
it comes through :mod:`tunnelbench.lab.host` or from the lab's builder and teardown
(:mod:`tunnelbench.lab.netns`, :mod:`tunnelbench.lab.state`), which are the namespace
host's own implementation. A tunnel, generator or probe that ran ``ip netns exec`` or
``ip -n`` itself would be listed.
"""

import subprocess
import sys
import threading
from types import FrameType
from typing import Any

import pytest

from tunnelbench.bench import runner
from tunnelbench.bench.labpool import LabPool
from tunnelbench.bench.testbeds.lab import LabTestbed
from tunnelbench.errors import UserError
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import Resolved

ALLOWED = ("tunnelbench/lab/host.py", "tunnelbench/lab/netns.py", "tunnelbench/lab/state.py")


class _Watch:
    def __init__(self) -> None:
        self.escaped: list[tuple[str, str]] = []
        self.through_host = 0
        self.lock = threading.Lock()

    def check(self, argv: Any) -> None:
        words = [str(w) for w in (argv if isinstance(argv, list | tuple) else [argv])]
        if not any(w.startswith("tb-") for w in words):
            return  # not a lab namespace's command
        files = []
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            files.append(frame.f_code.co_filename)
            frame = frame.f_back
        with self.lock:
            if any(f.endswith("tunnelbench/lab/host.py") for f in files):
                self.through_host += 1
            elif not any(f.endswith(ALLOWED) for f in files):
                caller = next((f for f in files if "/tunnelbench/" in f), files[0])
                self.escaped.append((caller, " ".join(words)))


@pytest.fixture
def watch(monkeypatch):
    seen = _Watch()
    real = subprocess.Popen

    class Watched(real):  # type: ignore[misc, valid-type]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            seen.check(args)
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Watched)
    return seen


@pytest.mark.parametrize(
    "plan",
    [
        {"tunnel": {"kind": "wireguard", "implementation": "wireguard-go"}},
        {"tunnel": {"kind": "vxlan"}, "lab": {"wan": {"rate": 200_000_000}}},
    ],
    ids=["wireguard-go", "vxlan-shaped"],
)
def test_a_real_trial_touches_its_namespaces_only_through_the_host(watch, plan):
    config = TrialConfig.from_dict(plan | {"traffic": {"duration": 1, "warmup": 0}})
    try:
        resolution = runner.resolve(config)
    except UserError as exc:
        pytest.skip(str(exc))
    resolved = Resolved()
    with LabTestbed(LabPool()) as lab:
        metrics, _ = runner._measure(config, resolution, resolved, lab)
    assert metrics[metric.GOODPUT.name] > 0
    assert any(metric.parse_device(name, "link") for name in metrics)  # the probes read
    assert watch.through_host > 10  # the trial's real work did go through the host
    assert watch.escaped == [], "\n".join(f"{c}: {a}" for c, a in watch.escaped)
