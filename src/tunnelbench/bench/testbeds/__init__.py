"""The testbeds a run measures on (:mod:`tunnelbench.bench.testbed`): the namespace lab
and a hosts file's machines."""
