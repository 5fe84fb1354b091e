"""The runner: how a job runs on a machine.

``run_suite`` runs one job (or group shard) in a pytest process with the job's hermetic
environment (``jobenv``) and writes its JUnit, summary and durations; ``run_many`` runs several
side by side; ``pr`` is ``nox -s pr``; ``pytest_plugin`` (+ ``pytest_hookspecs``, ``junit_shim``)
selects a job's tests and accounts for every one; ``machine`` and ``attest`` prove the hardware;
``emulation_scope`` says which jobs emulation can run; ``timing`` measures where a run's time goes;
``job_process`` runs and stops pytest's process group on a signal; ``run_lock`` keeps two runs of
one job shard out of each other's results.

May import: ``ci.audit``, ``ci.github``, ``ci.adapters``, ``ci.registry`` and the shared modules.
"""
