"""Hardware attestation: does this machine match the catalog entry of the job's label?

Pure functions over a :class:`ci.runner.machine.Machine` record and an environment, so they
are tested with hand-made records on any machine. Checked, for a GPU label and
unless emulating: vendor (CUDA vs HIP build of torch and a visible device of that
vendor), GPU count >= the label's ``gpus``, architecture (sm90 <-> capability 9.0,
gfx942/gfx950 <-> gcnArchName), compiled Triton (installed, TRITON_INTERPRET off, the
kernel_backend gate not the interpreter), and for every label the gate values the
catalog entry (and the variant) promise. The ``cpu`` label and ``--emulate`` are the
only ways around the hardware checks, and both are announced. Imports no torch.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ci.runner.machine import Machine

VENDOR_BUILD = {"nvidia": "cuda", "amd": "hip"}
VENDOR_NAME = {"nvidia": "NVIDIA (CUDA)", "amd": "AMD (ROCm/HIP)"}


@dataclass
class Attestation:
    job_id: str
    label: str
    machine: Machine
    problems: list[str] = field(default_factory=list)        # each "expected X, found Y"
    emulated: str | None = None                              # the announcement, when emulating
    notes: list[str] = field(default_factory=list)           # announced, not failing (cpu label, toolchain)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        if not self.ok:
            return "FAILED"
        if self.emulated:
            return "EMULATED"
        return "not applicable (cpu label)" if self.label == "cpu" else "OK"

    def failure_line(self) -> str:
        return (f"attestation failed for {self.label} (job {self.job_id}): {self.problems[0]}"
                + (f" (and {len(self.problems) - 1} more: {'; '.join(self.problems[1:])})"
                   if len(self.problems) > 1 else ""))

    def lines(self) -> list[str]:
        out = [f"[ci] attestation {self.verdict}: job {self.job_id} on label {self.label}; "
               f"machine: {self.machine.describe()}"
               + ("" if self.machine.source == "probed" else f" [machine record from {self.machine.source}]")]
        if self.emulated:
            out.append(f"[ci] EMULATION: {self.emulated}")
        out += [f"[ci] note: {n}" for n in self.notes]
        if not self.ok:
            out.append(f"[ci] {self.failure_line()}")
        return out

    def properties(self) -> dict[str, str]:
        props = {"ci.job": self.job_id, "ci.hardware": self.label, "attestation": self.verdict,
                 "emulated": self.emulated or "no"}
        if not self.ok:
            props["attestation.failure"] = self.failure_line()
        for i, note in enumerate(self.notes, 1):
            props[f"attestation.note.{i}"] = note
        props.update(self.machine.properties())
        return props


def _public(version: str | None) -> str:
    return (version or "").split("+")[0]


def _pin(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip().lstrip("=").strip() or None
    if isinstance(value, Mapping):
        for key in ("version", "pin"):
            if isinstance(value.get(key), str):
                return _pin(value[key])
    return None


def toolchain_notes(toolchain: Mapping[str, Any] | None, machine: Machine) -> list[str]:
    """A note per pinned package whose installed version differs (reported, not failed: see README)."""
    notes = []
    for package, found in (("torch", machine.torch), ("triton", machine.triton)):
        pin = _pin((toolchain or {}).get(package))
        if pin and _public(found) != _public(pin):
            notes.append(f"toolchain: catalog pins {package} {pin}, found {found or 'none'}")
    return notes


def _hardware_problems(hw: Any, m: Machine, env: Mapping[str, str], variant_env: Mapping[str, str]) -> list[str]:
    build = VENDOR_BUILD[hw.vendor]
    found_build = f"torch {m.torch or '(not installed)'} ({m.torch_build} build), " + (
        f"{m.gpus} visible {m.backend} device(s)" if m.gpus else "no visible GPU")
    if m.torch_build != build or m.backend != build or m.gpus == 0:
        return [f"expected a {build.upper()} build of torch with a visible {VENDOR_NAME[hw.vendor]} GPU, "
                f"found {found_build}"]
    problems = []
    if m.gpus < hw.gpus:
        problems.append(f"expected at least {hw.gpus} GPU(s), found {m.gpus}")
    if m.arch != hw.arch:
        problems.append(f"expected architecture {hw.arch}, found {m.arch} ({m.device_name or 'unnamed device'})")
    if not m.triton:
        problems.append("expected compiled Triton, found no triton package")
    interp = env.get("TRITON_INTERPRET", "")
    if interp not in ("", "0"):
        problems.append(f"expected compiled Triton (TRITON_INTERPRET unset), found TRITON_INTERPRET={interp}")
    backend = env.get("DSPARK_KERNEL_BACKEND") or None
    if backend == "triton-interpret" or (backend not in (None, "triton")
                                         and variant_env.get("DSPARK_KERNEL_BACKEND") != backend):
        problems.append(f"expected kernel_backend triton (DSPARK_KERNEL_BACKEND unset or 'triton'), found {backend!r}")
    return problems


def attest(job_id: str, hardware: Any, machine: Machine, env: Mapping[str, str], *,
           expected_env: Mapping[str, str], variant_env: Mapping[str, str] | None = None,
           emulate: str | None = None, toolchain: Mapping[str, Any] | None = None) -> Attestation:
    """Check ``machine`` and the process ``env`` against the job's label.

    ``expected_env`` is what the job sets (catalog or host env, variant, emulation):
    each of its variables must hold exactly that value in ``env``.
    """
    result = Attestation(job_id, hardware.label, machine)
    variant_env = dict(variant_env or {})
    if emulate:
        if not hardware.is_gpu:
            result.problems.append("expected a GPU label to emulate, found the cpu label (it needs no emulation)")
        result.emulated = (f"{job_id} runs with DSPARK_PLATFORM={emulate} emulated on {machine.describe()}, "
                           f"not on real {hardware.label} hardware")
    elif hardware.is_gpu:
        result.problems += _hardware_problems(hardware, machine, env, variant_env)
    else:
        result.notes.append("cpu label: runs on any machine; no hardware to attest (machine recorded)")
    for var, value in sorted(expected_env.items()):
        if env.get(var) != value:
            found = f"{var}={env[var]!r}" if var in env else f"{var} unset"
            result.problems.append(f"expected {var}={value!r} (catalog/variant), found {found}")
    result.notes += toolchain_notes(toolchain, machine)
    return result
