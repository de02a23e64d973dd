"""Run every benchmark and print its figures: `python -m benchmarks [name ...]`."""

import sys

from benchmarks import (
    answer_time,
    fidelity,
    generator_pps,
    lab_setup,
    sampler_cost,
    tune_vs_matrix,
    variance,
    vm,
)

ALL = {
    "answer_time": answer_time.main,
    "fidelity": fidelity.main,
    "generator_pps": generator_pps.main,
    "lab_setup": lab_setup.main,
    "sampler_cost": sampler_cost.main,
    "tune_vs_matrix": tune_vs_matrix.main,
    "variance": variance.main,
    "vm": vm.main,
}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(ALL):
        print(f"== {name}")
        ALL[name]()
