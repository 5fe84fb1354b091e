"""dspark-suite sessions. ``nox -s pr`` is everything a pull request must pass.

    nox -s pr                                   audit + workflow checks + every per-commit cpu job
    nox -s suite -- --job ID [--shard I/N] [--dry-run] [--durations FILE]
    nox -s audit                                registry audit table and rules
    nox -s workflows [-- --check]               (re)generate .github/workflows/ or check drift
    nox -s kernels                              op report + per-commit kernel jobs for this machine
    nox -s nightly_mi35x [-- --emulate]         the MI35x nightly jobs (refuses elsewhere unless --emulate)
    nox -s coverage_gap -- --base REV [--report-only]
    nox -s bench [-- ARGS]                      python -m impl.bench ARGS

Installs: on a machine without a GPU (no nvidia-smi / rocm-smi / /dev/kfd) the
venv gets the CPU build ``torch==2.13.0`` first, then ``-e .[test]``. On a GPU
machine the venv sees the system site-packages, so the GPU build of torch (and
ROCm's triton) already installed there is used, not replaced. Venvs are reused;
``nox -R`` (``--reuse-existing-virtualenvs --no-install``) skips installs.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox

nox.options.reuse_venv = "yes"
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["pr"]

ROOT = Path(__file__).resolve().parent
CPU_TORCH = "torch==2.13.0"
NVIDIA = shutil.which("nvidia-smi") is not None
ROCM = shutil.which("rocm-smi") is not None or os.path.exists("/dev/kfd")
GPU_MACHINE = NVIDIA or ROCM
VENV_PARAMS = ["--system-site-packages"] if GPU_MACHINE else []


def _pyproject() -> dict:
    import tomllib  # Python >= 3.11; the GPU containers' older Pythons use the fallback below

    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def _extra_requirements(*extras: str) -> list[str]:
    try:
        optional = _pyproject()["project"]["optional-dependencies"]
    except ImportError:
        return []
    return [req for extra in extras for req in optional.get(extra, [])]


def install(session: nox.Session, *extras: str) -> None:
    """torch first (CPU build on CPU machines), then the project with ``extras``."""
    extras = ("test", *extras)
    if not GPU_MACHINE:
        # The CPU build lies on disk on CI machines; point pip at it even if PIP_FIND_LINKS is unset.
        local = [f"--find-links={d}" for d in ("/opt/wheels",) if Path(d).is_dir()]
        session.install(*local, CPU_TORCH)
        session.install("-e", f".[{','.join(extras)}]")
    elif ROCM:
        # keep ROCm's torch and triton (pytorch-triton-rocm): no dependency resolution for them
        session.install("-e", ".", "--no-deps")
        reqs = _extra_requirements(*extras) or ["pytest", "pytest-xdist", "hypothesis", "coverage", "check-jsonschema"]
        session.install("numpy", "pyyaml", *reqs)
    else:
        session.install("-e", f".[{','.join(extras)}]")


def install_light(session: nox.Session, *packages: str) -> None:
    """Registry tooling needs no torch: ci/ reads syntax trees and YAML only."""
    session.install("pyyaml", *packages)


@nox.session(venv_params=VENV_PARAMS)
def suite(session: nox.Session) -> None:
    """Run one registry job or shard: -- --job ID [--shard I/N] [--dry-run] [--durations FILE]."""
    install(session)
    session.run("python", "-m", "ci.run_suite", *session.posargs)


@nox.session(venv_params=VENV_PARAMS)
def audit(session: nox.Session) -> None:
    """Registry audit: job table, dormant suites, unknown job refs, gate coverage, ops, disabled."""
    install_light(session)
    session.run("python", "-m", "ci.audit", *session.posargs)


@nox.session(venv_params=VENV_PARAMS)
def workflows(session: nox.Session) -> None:
    """Write .github/workflows/ from the registry; -- --check fails on drift / schema / actionlint."""
    install_light(session, "check-jsonschema")
    session.run("python", "-m", "ci.workflows", *session.posargs)


@nox.session(venv_params=VENV_PARAMS)
def pr(session: nox.Session) -> None:
    """Every per-commit check: audit, workflow checks, every per-commit cpu job (all variants, shards)."""
    install(session)
    session.run("python", "-m", "ci.pr", *session.posargs)


@nox.session(venv_params=VENV_PARAMS)
def kernels(session: nox.Session) -> None:
    """Op report, then the per-commit kernel jobs for this machine (cpu / h200-1 / mi35x-1)."""
    install(session)
    if not (ROOT / "registered" / "op_report.py").is_file():
        session.error("registered/op_report.py is missing: the op table report cannot run")
    session.run("python", "-m", "registered.op_report")
    session.run("python", "-m", "ci.run_many", "--schedule", "per-commit", "--hardware", "auto-kernels",
                "--suite-prefix", "kernels", *session.posargs)


@nox.session(venv_params=VENV_PARAMS)
def nightly_mi35x(session: nox.Session) -> None:
    """The nightly MI35x jobs. Elsewhere refused, unless -- --emulate (DSPARK_PLATFORM=hip emulation)."""
    install(session)
    args = ["--schedule", "nightly", "--hardware-prefix", "mi35x", "--require-mi35x"]
    if "--emulate" in session.posargs:
        args.append("--emulate")
    unknown = [a for a in session.posargs if a != "--emulate"]
    if unknown:
        session.error(f"unknown argument(s) {unknown}; only --emulate is accepted")
    session.run("python", "-m", "ci.run_many", *args)


@nox.session(venv_params=VENV_PARAMS)
def coverage_gap(session: nox.Session) -> None:
    """Changed impl/ lines no per-commit cpu job executes: -- --base REV [--report-only]."""
    install(session)
    session.run("python", "-m", "ci.coverage_gap", *session.posargs)


@nox.session(venv_params=VENV_PARAMS)
def bench(session: nox.Session) -> None:
    """Benchmarks: python -m impl.bench ARGS."""
    install(session, "bench")
    session.run("python", "-m", "impl.bench", *session.posargs)


if __name__ == "__main__":
    sys.exit("run with nox: nox -s pr (see nox -l)")
