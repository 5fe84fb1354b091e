"""Small tools around the CI, each a ``python -m ci.tools.<name>`` command.

``liveness`` (every registered job ran lately on GitHub), ``changed_paths`` (path gating),
``coverage_gap`` (changed impl lines no per-commit job runs), ``compile_kernels`` (every kernel
compiles for each target), ``import_graph`` (no cycle, layers and rooms kept), ``bench_registry``
(collection and audit time), ``wheel_namespace`` (the build step that installs under
``dspark_suite``).

May import every other room of ``ci``.
"""
