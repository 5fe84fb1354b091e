"""The registry: what is registered, on which hardware, in which jobs and shards.

``collect`` reads ``@register(...)`` calls from syntax trees (never importing a test); ``catalog``
reads ``ci/hardware.yaml``; ``jobs`` turns registrations into jobs; ``partition`` and
``durations`` / ``durations_file`` shard them by measured time; ``group_plan`` is the one view of
groups (schedule/hardware -> shards) the generator, the path gating and liveness share;
``gatecheck`` checks gate variables against ``impl/gates.py``; ``suite_names`` finds likely typos;
``skip_reasons`` reads the registered skip keys; ``pyast`` holds the syntax-tree helpers.

Imports only ``ci``'s shared modules (``ci.registration``, ``ci.table``, ``ci.safe_files``).
"""
