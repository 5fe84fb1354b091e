"""GitHub workflows: reading them back (which step runs which job, under which event, masked or
not) and generating this project's own.

``scan`` reads a workflow into (step, target, event, masked); ``triggers`` decides which events
fire; ``expressions`` evaluates ``if:`` three-valued; ``option_values`` resolves ``${{ }}`` and
``$VAR`` tokens per matrix row; ``matrix`` expands (bounded) matrices; ``reusable`` follows
``workflow_call`` and local composite actions; ``masking`` finds what can turn a failure green;
``shell`` splits ``run:`` scripts into commands and ``shell_syntax`` / ``shell_eval`` read them as
bash per matrix row (three-valued: run, maybe, never; docs/audit-shell.md); ``fork_safety`` finds
fork pull requests that reach a self-hosted runner unapproved; ``api`` and ``http_client`` talk to
GitHub's REST API (origin-only token, deadlines, caps); ``generate`` writes ``.github/workflows/``
from the registry.

May import: ``ci.registry``, ``ci.adapters`` and the shared modules.
"""
