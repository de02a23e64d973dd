"""Reading the captured probe fixtures (see tests/fixtures/probes/README.md)."""

from tests.conftest import FIXTURES
from tunnelbench.lab import state as lab_state
from tunnelbench.lab.netns import Interface, Lab
from tunnelbench.lab.topology import CHAINS
from tunnelbench.model.plan import LabSettings

PROBES = FIXTURES / "probes"


def text(name: str) -> str:
    return (PROBES / name).read_text()


def window(lab: str) -> tuple[float, float]:
    start, end = (float(line) for line in text(f"window-{lab}.txt").split())
    return start, end


def lab_like(lab_id: str, settings: LabSettings | None = None) -> Lab:
    """A Lab object named like a captured one, with its interfaces as ``lab up`` names
    them (nothing is built: only the names matter here)."""
    settings = settings or LabSettings()
    chain = CHAINS[settings.topology]
    lab = Lab(lab_id, settings, lab_state.LabState(lab_id=lab_id), chain)
    for j in range(len(chain.links)):
        left, right = chain.roles[j], chain.roles[j + 1]
        lab.interfaces[(left, right)] = Interface(left, lab.ifname(right), 1500)
        lab.interfaces[(right, left)] = Interface(right, lab.ifname(left), 1500)
    return lab
