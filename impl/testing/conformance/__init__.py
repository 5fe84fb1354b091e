"""Conformance kit: run the op table against another implementation (an engine's own kernels).

``python -m impl.testing.conformance --engine sglang --root PATH`` (see ``__main__``) or, from
an engine's CI, ``pytest -p impl.testing.conformance.pytest_plugin --engine sglang --engine-root PATH``.
``adapter`` holds the adapter types (data), ``engines/`` the adapters, ``loader`` loads an engine
module by file path (no package ``__init__``, named stubs), ``cases`` runs one case (guarded
in-place buffer, comparison, shrinking), ``runner`` runs an op's cases into a verdict, ``isolate``
runs them in spawned children, ``report`` prints them. Imports impl, impl.testing and reference;
pytest only in ``pytest_plugin`` and ``engine_tests`` (loaded by pytest itself).
"""
