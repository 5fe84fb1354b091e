"""What machine is this, as catalog labels and as an attestation record.

    python -m ci.runner.machine      # prints JSON: label, kernels_label, backend, arch, gpus, versions, ...

:func:`detect` imports torch lazily (call it inside the job's environment: the pytest
plugin does, and ``python -m ci.runner.machine`` does in a subprocess); everything else here
is plain data, so attestation can be tested with a hand-made :class:`Machine`.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from typing import Any


@dataclass(frozen=True)
class Machine:
    label: str = "cpu"              # best catalog label for whole jobs on this machine
    kernels_label: str = "cpu"      # label whose per-commit kernel jobs fit one device here
    backend: str = "cpu"            # visible devices: cpu | cuda | hip
    arch: str = "cpu"               # sm90 | gfx942 | gfx950 | cpu | sm<MAJ><MIN> | gfx...
    gpus: int = 0                   # visible devices
    torch: str | None = None
    torch_build: str = "cpu"        # the torch build: cpu | cuda | hip (a CUDA build may see no GPU)
    device_name: str = ""
    triton: str | None = None
    cuda: str | None = None         # torch.version.cuda
    hip: str | None = None          # torch.version.hip
    source: str = "probed"          # probed | <who supplied a record that was not probed>

    @property
    def is_mi35x(self) -> bool:
        return self.backend == "hip" and self.arch == "gfx950"

    def describe(self) -> str:
        dev = (f"{self.gpus} x {self.device_name or self.arch}" if self.gpus
               else "devices not probed" if self.torch_build == "not probed" else "no GPU")
        versions = ", ".join(f"{k} {v}" for k, v in (("torch", self.torch), ("triton", self.triton),
                                                      ("CUDA", self.cuda), ("ROCm/HIP", self.hip)) if v)
        where = "" if self.torch_build == "not probed" else f" ({self.backend}, {self.arch})"
        return f"{dev}{where}; {versions or 'no torch'}"

    def properties(self) -> dict[str, str]:
        return {f"machine.{k}": "" if v is None else str(v) for k, v in asdict(self).items()}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Machine:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"machine record: unknown field(s) {sorted(unknown)}; known {sorted(known)}")
        return cls(**dict(data))


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _triton_version() -> str | None:
    for dist in ("triton", "pytorch-triton-rocm", "pytorch-triton", "triton-rocm"):
        found = _version(dist)
        if found:
            return found
    return None


def detect(*, import_torch: bool = True) -> Machine:
    """Probe this machine through torch (imported here, lazily).

    ``import_torch=False`` (a ``cpu``-label job: nothing to attest) reads versions from the
    installed package metadata only and probes no device, unless torch is already imported.
    """
    triton = _triton_version()
    if not import_torch and "torch" not in sys.modules:
        return Machine(torch=_version("torch"), torch_build="not probed", triton=triton,
                       source="package metadata (cpu label: devices not probed)")
    try:
        import torch
    except ImportError:
        return Machine(triton=triton)
    hip = getattr(torch.version, "hip", None)
    cuda = getattr(torch.version, "cuda", None)
    build = "hip" if hip else "cuda" if cuda else "cpu"
    base = dict(torch=torch.__version__, torch_build=build, triton=triton, cuda=cuda, hip=hip)
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return Machine(**base)
    gpus = torch.cuda.device_count()
    props = torch.cuda.get_device_properties(0)
    name = str(getattr(props, "name", ""))
    if hip:
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0] or "gfx?"
        if arch == "gfx950":
            label = "mi35x-8" if gpus >= 8 else "mi35x-1"
            return Machine(label, "mi35x-1", "hip", arch, gpus, device_name=name, **base)
        return Machine("mi30x-1", "mi30x-1", "hip", arch, gpus, device_name=name, **base)
    major, minor = torch.cuda.get_device_capability(0)
    return Machine("h200-1", "h200-1", "cuda", f"sm{major}{minor}", gpus, device_name=name, **base)


if __name__ == "__main__":
    json.dump(asdict(detect()), sys.stdout)
    print()
