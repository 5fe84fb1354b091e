"""CI: the registry, the workflows, the audit, the runner and the tools, one room each.

| room | what lives there |
| --- | --- |
| ``ci.registry`` | registrations read from syntax trees, the hardware catalog, jobs, shards, durations, groups |
| ``ci.adapters`` | how another repository registers and runs its suites (``dspark``: this project, ``sglang``) |
| ``ci.github`` | reading workflows (triggers, conditions, matrices, run scripts, masking), the API, ours |
| ``ci.audit`` | ``dspark-audit``: the rules, the own and the foreign audit, reports, SARIF, baselines |
| ``ci.runner`` | running a job: the suite runner, the pytest plugin, ``nox -s pr``, hardware attestation |
| ``ci.tools`` | liveness, path gating, coverage gap, kernel compile check, import graph, the wheel build step |

Shared by every room: ``ci.registration`` (the ``@register`` decorator tests import), ``ci.table``,
``ci.safe_files`` (bounded reads inside a root, atomic writes), ``ci.safe_yaml`` (bounded YAML),
``ci.tree_files`` (listing a tree without leaving it) and ``ci.log_escape`` (text that cannot
start a workflow command). Arrows go one way, checked by ``python -m ci.tools.import_graph``: registry <-
adapters <- github <- audit <- runner <- tools (a room imports only rooms to its left). ``ci``
never imports torch or ``registered/``.
"""
