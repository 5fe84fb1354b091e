"""What hardware is this machine, in catalog labels? (imports torch; run it inside the venv)

    python -m ci.machine      # prints JSON: label, kernels_label, backend, arch, gpus, torch
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Machine:
    label: str            # best catalog label for whole jobs on this machine
    kernels_label: str    # label whose per-commit kernel jobs fit one device here
    backend: str          # cpu | cuda | hip
    arch: str
    gpus: int
    torch: str | None

    @property
    def is_mi35x(self) -> bool:
        return self.backend == "hip" and self.arch == "gfx950"


def detect() -> Machine:
    try:
        import torch
    except ImportError:
        return Machine("cpu", "cpu", "cpu", "cpu", 0, None)
    if not torch.cuda.is_available():
        return Machine("cpu", "cpu", "cpu", "cpu", 0, torch.__version__)
    gpus = torch.cuda.device_count()
    if getattr(torch.version, "hip", None):
        arch = str(getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")).split(":")[0]
        if arch == "gfx950":
            label = "mi35x-8" if gpus >= 8 else "mi35x-1"
            return Machine(label, "mi35x-1", "hip", arch, gpus, torch.__version__)
        return Machine("mi30x-1", "mi30x-1", "hip", arch or "gfx942", gpus, torch.__version__)
    major, minor = torch.cuda.get_device_capability(0)
    return Machine("h200-1", "h200-1", "cuda", f"sm{major}{minor}", gpus, torch.__version__)


if __name__ == "__main__":
    json.dump(asdict(detect()), sys.stdout)
    print()
