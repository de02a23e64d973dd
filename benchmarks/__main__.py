"""Run every benchmark and print its figures: `python -m benchmarks [name ...]`."""

import sys

from benchmarks import fidelity, lab_setup, sampler_cost

ALL = {"fidelity": fidelity.main, "lab_setup": lab_setup.main, "sampler_cost": sampler_cost.main}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(ALL):
        print(f"== {name}")
        ALL[name]()
