"""Test support that registered/ tests, ``python -m impl.testing.op_report`` and ci/tools/compile_kernels.py share.

``op_table`` is the OpInfo-style table of the docs/design.md §3 ops (samples, error inputs,
dtypes, comparison rules, sync contract); ``op_info`` its types and runners, ``compare`` its
comparison rules, ``samples``, ``error_inputs`` and ``bad_values`` (docs/design.md §10) its data, ``tunings`` the
renorm tunings of its variants, ``covering`` the per-commit covering subset of its samples for the
paths that repeat them. Imports impl, reference and torch;
never ci/, registered/ or pytest (ci/tools/compile_kernels.py imports this package in a subprocess).
"""
