"""Run-time probes of what this kernel can do, done in a scratch namespace of our own."""

import functools

from tunnelbench.command import run
from tunnelbench.lab import state as lab_state
from tunnelbench.lab.netns import new_lab_id


@functools.cache
def kernel_link_type(kind: str) -> str | None:
    """None when the kernel can create a link of ``kind``; else the kernel's refusal."""
    probe = lab_state.LabState(lab_id=new_lab_id(), topology="probe")
    name = f"tb-{probe.lab_id}-probe"
    probe.add_namespace(name)
    try:
        run(["ip", "netns", "add", name])
        done = run(["ip", "-n", name, "link", "add", "tbprobe0", "type", kind], check=False)
        return None if done.returncode == 0 else (done.stderr.strip() or "refused")
    finally:
        lab_state.teardown(probe)
