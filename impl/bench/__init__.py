"""Benchmarks of the docs/design.md §3 ops against the copy ceiling and baselines, measured in one run.

``python -m impl.bench`` (or ``nox -s bench``) prints a table, writes JSON and a
PNG plot under ``bench-results/<device>/`` at the repository root. On a machine without a
GPU it says so and runs a tiny smoke mode (through the Triton interpreter).
"""
