"""How the scheduler treated the lab's threads over the measured window.

CPU-bound figures vary from run to run; two of the causes the scheduler can show are a
thread moved between cores (``se.nr_migrations``: its caches and its softirq work left
behind) and a thread taken off a core it still wanted (``nr_involuntary_switches``). Both
are read from each thread's ``/proc/PID/task/TID/sched`` (kernels built with
``CONFIG_SCHED_DEBUG``, Debian's included) at the window's two edges, for every process
living in the lab's namespaces, and summed over the threads:

- a thread seen at both edges counts the growth of its counters;
- a thread born within the window counts all of its counters;
- a thread that ended within the window is missed (its counters went with it).

Where the file does not exist nothing is recorded: an absent figure, never a zero.
"""

from collections.abc import Iterable
from pathlib import Path

#: Stored names (``sched.<name>``) -> the field of the sched file.
FIELDS = {
    "migrations": "se.nr_migrations",
    "involuntary_switches": "nr_involuntary_switches",
    "voluntary_switches": "nr_voluntary_switches",
}

Threads = dict[int, dict[str, int]]  # thread id -> stored name -> count


_WANTED = tuple(FIELDS.values())


def parse(text: str) -> dict[str, int]:
    """The counters of one ``sched`` file (``name : value`` lines). Only the wanted
    lines are split: the file has some 50, read for every lab thread at both edges, and
    in a TCG guest each split costs what a hundred do on the host."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(_WANTED):
            name, _, value = line.partition(":")
            values[name.strip()] = value.strip()
    return {
        stored: int(float(values[field])) for stored, field in FIELDS.items() if field in values
    }


def read(pids: Iterable[int], proc: Path = Path("/proc")) -> Threads | None:
    """Every thread of ``pids`` now; None when this kernel has no sched files. A process
    or thread that ends while it is read is left out."""
    threads: Threads = {}
    for pid in pids:
        try:
            tids = [int(entry.name) for entry in (proc / str(pid) / "task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            try:
                text = (proc / str(pid) / "task" / str(tid) / "sched").read_text()
            except FileNotFoundError:
                if not (proc / "self" / "sched").exists():
                    return None
                continue
            except OSError:
                continue
            threads[tid] = parse(text)
    return threads


def over_window(before: Threads, after: Threads) -> dict[str, int]:
    """The counters' growth summed over the threads (see the module's notes)."""
    totals = dict.fromkeys(FIELDS, 0)
    for tid, now in after.items():
        then = before.get(tid, {})
        for name in FIELDS:
            totals[name] += max(0, now.get(name, 0) - then.get(name, 0))
    return totals
