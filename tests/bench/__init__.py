"""Benchmarks: run on demand (`python -m tests.bench.<name>`), never part of the pass/fail suite."""
