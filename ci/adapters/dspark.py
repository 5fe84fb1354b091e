"""The project's own format: ``@register(...)`` (ci/registry/collect.py) and the ``ci.runner.run_suite`` runner.

A workflow step runs a suite with ``nox -s suite -- --group G --shard I/N`` (or
the older ``--job ID [--shard I/N]``), or ``python -m ci.runner.run_suite`` with the
same options. Gates (``DSPARK_*``) exist here, so gate rules apply.
Imports nothing from ``impl/``, torch or test code.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ci.adapters.base import Adapter, RunnerCall, Target, parse_options, parse_shard_text

OPTIONS = {"--job": True, "--group": True, "--shard": True}
# runner or pytest options that make a green step prove nothing
MASKING_OPTIONS = {
    "--dry-run": "lists the selected tests and runs none",
    "--help": "prints the usage and runs nothing", "-h": "prints the usage and runs nothing",
    "--emulate": "runs the group on emulated hardware, past the attestation of the real one",
    "-k": "deselects tests by keyword", "-m": "deselects tests by marker", "--deselect": "deselects tests",
    "--ignore": "skips test files", "--ignore-glob": "skips test files", "--collect-only": "runs no test",
    "--co": "runs no test", "--lf": "reruns only the last failures", "--last-failed": "reruns only the last failures",
    "--continue-on-collection-errors": "turns an import error into a green run",
    "-p": "loads or disables a pytest plugin (e.g. the execution plugin)",
}
NOX_SESSION_FLAGS = ("-s", "--session", "--sessions", "-e")


def _nox_suite_start(words: tuple[str, ...]) -> int | None:
    """Index after ``nox ... -s suite ...`` (where the posargs ``--`` may follow), or None."""
    for i, word in enumerate(words):
        if word == "nox" or word.endswith("/nox"):
            rest = words[i + 1:]
            for j, flag in enumerate(rest):
                if flag in NOX_SESSION_FLAGS and j + 1 < len(rest) and "suite" in rest[j + 1].split(","):
                    return i + 1
                if flag.startswith(("--session=", "--sessions=")) and "suite" in flag.partition("=")[2].split(","):
                    return i + 1
    return None


class DSparkAdapter(Adapter):
    name = "dspark"
    has_gates = True
    runner_hint = 'python3 -m nox -s suite -- --group G --shard "$SHARD"'

    def collect(self, root: Path):
        """``@register`` registrations (ci/registry/collect.py) against the hardware catalog."""
        from ci.registry.catalog import load_catalog
        from ci.registry.collect import collect

        return collect(root, load_catalog(root))

    def find_call(self, words: tuple[str, ...]) -> RunnerCall | None:
        start = _nox_suite_start(words)
        if start is not None:
            dashdash = words.index("--", start) if "--" in words[start:] else None
            options = parse_options(words, dashdash + 1, OPTIONS) if dashdash is not None else {}
            rest = words[dashdash + 1:] if dashdash is not None else ()
            return RunnerCall(options, " ".join(words), tuple(rest))
        for i, word in enumerate(words):
            if word == "ci.runner.run_suite" or word.endswith("ci/runner/run_suite.py"):
                return RunnerCall(parse_options(words, i + 1, OPTIONS), " ".join(words), tuple(words[i + 1:]))
        return None

    def call_masks(self, call: RunnerCall) -> list[str]:
        out = []
        for word in call.rest:
            name = word.partition("=")[0]
            if name in MASKING_OPTIONS:
                out.append(f"`{word}` on the runner's command line {MASKING_OPTIONS[name]}")
        return out

    def targets(self, options: Mapping[str, str | None]) -> tuple[list[Target], str | None]:
        job, group, shard_text = options.get("--job"), options.get("--group"), options.get("--shard")
        if job and group:
            return [], "calls the runner with both --job and --group"
        if not job and not group:
            return [], "calls the suite runner without --group or --job"
        shard = None
        if shard_text is not None:
            try:
                shard = parse_shard_text(shard_text)
            except ValueError as exc:
                return [], str(exc)
        return [Target("job" if job else "group", job or group, shard)], None
