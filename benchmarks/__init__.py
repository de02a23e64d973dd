"""Benchmarks of tunnelbench itself; run with `make bench` (root)."""
