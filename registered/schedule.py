"""What this pytest process runs per schedule: the CI job it belongs to decides (``DSPARK_JOB``).

The runner and the plugin set ``DSPARK_JOB`` to the job id (``schedule/hardware/suite[variant]``)
before collection, so parameter lists and the hypothesis profile can follow the schedule:

- ``per-commit/cpu/...``: the op-table paths that repeat samples run a covering subset
  (:func:`impl.testing.covering.covering_cases`) and hypothesis runs its small profile;
- everything else (nightly jobs, GPU jobs, a plain ``pytest`` without ``--ci-job``): the full
  cross product and the default profile; nightly jobs run the large profile.

Every test that runs a subset per commit on ``cpu`` is also registered ``schedule="nightly"``
on ``cpu`` (job ``nightly/cpu/...``), where it runs everything.
"""
from __future__ import annotations

import os
from typing import Mapping

PER_COMMIT_CPU = "per-commit/cpu/"
HYPOTHESIS_PROFILES = {   # name -> max_examples
    "per-commit-cpu": 6,  # the Triton interpreter: each example of a renorm property is ~1 s
    "default": 25,        # compiled kernels (GPU jobs) and plain pytest runs
    "nightly": 120,
}


def job_id(env: Mapping[str, str] | None = None) -> str:
    return (os.environ if env is None else env).get("DSPARK_JOB", "")


def reduced(env: Mapping[str, str] | None = None) -> bool:
    """True inside a per-commit cpu job: repeated paths run their covering subset."""
    return job_id(env).startswith(PER_COMMIT_CPU)


def hypothesis_profile(env: Mapping[str, str] | None = None) -> str:
    job = job_id(env)
    if job.startswith("nightly/"):
        return "nightly"
    return "per-commit-cpu" if job.startswith(PER_COMMIT_CPU) else "default"


def variant(env: Mapping[str, str] | None = None) -> str | None:
    """The job's env variant (``per-commit/cpu/kernels-gates[torch]`` -> ``torch``), None without one."""
    job = job_id(env)
    return job[job.index("[") + 1:-1] if job.endswith("]") and "[" in job else None


def repeated_cases(cases: list, path: str, env: Mapping[str, str] | None = None) -> list:
    """Op-table cases for a path that repeats samples: its covering share inside a per-commit cpu job
    (:func:`impl.testing.covering.covering_cases`), every case everywhere else."""
    if not reduced(env):
        return cases
    from impl.testing.covering import covering_cases

    return covering_cases(cases, path)


def per_commit_share(full: list | tuple, share: list | tuple, env: Mapping[str, str] | None = None) -> list:
    """A path test's own covering subset of its parameters: ``share`` inside a per-commit cpu job, ``full``
    everywhere else (nightly, GPU, plain pytest). ``share`` must be drawn from ``full`` (a ValueError otherwise)."""
    missing = [p for p in share if p not in full]
    if missing or not share:
        raise ValueError(f"per_commit_share: the share must be a non-empty subset of {list(full)}; "
                         f"not in it: {missing}")
    return list(share) if reduced(env) else list(full)
