"""Which jobs can run a test on this machine at all: the scope of ``ci.runner.run_many --emulate``.

Emulation changes the platform rules (``DSPARK_PLATFORM``), not the hardware. A job every
test of which skips here for a registered hardware reason (``needs-gpu``, ``needs-multi-gpu``,
``needs-hip`` in registered/skips.py, decided from their ``skips_when`` against this machine's
GPU count and vendor) would end "this job tested nothing"; ``ci.runner.run_many`` refuses such a job
up front instead, naming the reason. Read from syntax trees (ci.audit.skips): no torch.
"""
from __future__ import annotations

from ci.registry.jobs import Job, Registry
from ci.registry.skip_reasons import SkipTable, load_skip_table
from ci.audit.skips import SkipUse, condition_skips, skip_uses

VENDOR_OF_BACKEND = {"cuda": "nvidia", "hip": "amd"}


def _reason_here(uses: list[SkipUse], table: SkipTable, gpus: int, vendor: str) -> str | None:
    """The registered hardware reason that skips a test with these uses on this machine, if any."""
    for use in uses:
        reason = table.reasons.get(use.key) if use.key else None
        if reason is None or use.unregistered or reason.unconditional:
            continue
        if condition_skips(reason.skips_when, gpus, vendor, use.arg):
            when = reason.skips_when.replace("<N", f"<{use.arg}") if use.arg is not None else reason.skips_when
            return f"{reason.key}: {reason.text} (skips when {when})"
    return None


def blocked_tests(registry: Registry, job: Job, *, gpus: int, backend: str) -> dict[str, str] | None:
    """node id -> why it skips here, for every test of ``job``; None when some test of it can run here."""
    table = load_skip_table(registry.root)
    uses = skip_uses(registry.root, sorted({t.node_id.split("::")[0] for t in job.tests}), table)
    vendor = VENDOR_OF_BACKEND.get(backend, "cpu")
    blocked: dict[str, str] = {}
    for test in job.tests:
        methods = [n for n in uses if n.startswith(test.node_id + "::")]
        nodes = methods or [test.node_id]   # a class runs when one of its methods can
        reasons = [_reason_here(uses.get(n, []), table, gpus, vendor) for n in nodes]
        if not all(reasons):
            return None
        blocked[test.node_id] = reasons[0]
    return blocked


def refusal(registry: Registry, jobs: list[Job], *, gpus: int, backend: str,
            where: str) -> tuple[list[Job], str | None]:
    """(the jobs that can run a test here, one line naming the others and why -- None when none is left out)."""
    runnable, left_out = [], []
    for job in jobs:
        blocked = blocked_tests(registry, job, gpus=gpus, backend=backend)
        if blocked is None:
            runnable.append(job)
        else:
            reasons = "; ".join(sorted(set(blocked.values())))
            left_out.append(f"{job.id} needs hardware this machine lacks: all {len(blocked)} of its test(s) skip "
                            f"here ({reasons})")
    if not left_out:
        return runnable, None
    return runnable, (" | ".join(left_out) + f" [this machine: {where}]; --emulate changes the platform rules, "
                      "not the hardware: run it on a machine with the GPUs it needs")
