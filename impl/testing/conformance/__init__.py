"""Conformance kit: run the op table against another implementation (an engine's own kernels).

``python -m impl.testing.conformance --engine sglang --root PATH`` (see ``__main__``) or, from
an engine's CI, ``pytest -p impl.testing.conformance.pytest_plugin --engine sglang --engine-root PATH``.
``adapter`` holds the adapter types (data), ``meta_adapter`` the metadata-builder types (data),
``engines/`` the adapters, ``loader`` loads an engine module by file path (no package ``__init__``,
named stubs), ``cases`` runs one case (guarded in-place buffer, comparison, shrinking), ``runner``
runs an op's cases into a verdict, ``isolate`` runs them in spawned children, ``meta_cases`` and
``meta_rules`` run one metadata sample (stand-in ``self``, platform values, syncs, output_size),
``metadata`` runs a builder's paths into values and a sync table per policy cell, ``report``
prints them. The kit executes the engine's code, only in spawned children unless asked
(docs/conformance.md). Imports impl, impl.testing and reference; pytest only in ``pytest_plugin``
and ``engine_tests`` (loaded by pytest itself).
"""
