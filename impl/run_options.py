"""The options of one engine run, resolved once at the edge and passed down (frozen).

A CLI, a test or the CI runner builds one :class:`RunOptions` with
:meth:`RunOptions.resolve` -- explicit choices first, the gate environment
(:func:`impl.gates.resolve_gates`, read ONCE) for the rest -- and hands it to
``impl.engine.run.run_case``, ``SpecEngine`` and ``DistCase``. Code below the
edge takes values from here and never reads the environment: the engine runs
every step inside ``impl.gates.gates_in_effect(options.gates)``, so ops it calls
answer the run's gates (docs/design.md §2.2).

This module must never import torch, triton or the engine: the CLIs validate
their arguments with it before anything heavy is imported.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from impl.gates import GATES, Gates, resolve_gates, validate_gate_value

KERNEL_BACKENDS = GATES["kernel_backend"].values


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0


@dataclass(frozen=True)
class RunOptions:
    """Everything that selects what one run does (gates included).

    ``platform`` / ``kernel_backend`` None: decided from the hardware when the
    engine starts (detected platform; triton on a GPU, the interpreter on CPU).
    ``num_slots`` None: the caller's default (half the batch single-rank, 2 per rank).
    ``gamma`` None: the model preset's gamma.
    """

    algorithm: str = "dspark"
    kv_backend: str = "unified"
    platform: str | None = None
    kernel_backend: str | None = None
    check_mode: bool = False  # op value checks (may sync); ``checked`` implies them
    gamma: int | None = None
    num_slots: int | None = None
    draft: str = "model"
    sampling: SamplingParams | None = None
    graph: bool = False
    capture_sizes: tuple[int, ...] | None = None  # graph mode; None: derived from the slots (impl.engine.graph_plan)
    checked: bool = False  # verify the pools after every step (and run under check mode)
    seed: int = 0
    device: str | None = None  # None: the real device (cuda when there is one, else cpu)
    batch: int = 4
    max_new_tokens: int = 8

    def __post_init__(self) -> None:
        validate_gate_value("spec_algorithm", self.algorithm, source="algorithm")
        validate_gate_value("kv_backend", self.kv_backend, source="kv_backend")
        if self.platform is not None:
            validate_gate_value("platform", self.platform, source="platform")
        if self.kernel_backend is not None:
            validate_gate_value("kernel_backend", self.kernel_backend, source="kernel_backend")
        for name, low in (("gamma", 1), ("num_slots", 1)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise ValueError(f"RunOptions.{name} must be an int >= {low} or None, got {value!r}")
        if self.capture_sizes is not None and (
                not isinstance(self.capture_sizes, tuple) or not self.capture_sizes
                or any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in self.capture_sizes)):
            raise ValueError(f"RunOptions.capture_sizes must be a non-empty tuple of positive ints or None, "
                             f"got {self.capture_sizes!r}")
        for name, low in (("batch", 0), ("max_new_tokens", 1), ("seed", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"RunOptions.{name} must be an int >= {low}, got {value!r}")

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, *, gates: Gates | None = None,
                **explicit) -> "RunOptions":
        """Explicit values (None = not given) over the gates read once from ``environ``."""
        unknown = set(explicit) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"RunOptions has no option(s) {sorted(unknown)}")
        g = resolve_gates(environ) if gates is None else gates
        from_gates = {"algorithm": g.spec_algorithm, "kv_backend": g.kv_backend, "platform": g.platform,
                      "kernel_backend": g.kernel_backend, "check_mode": g.check_mode == "on"}
        values = {k: v for k, v in from_gates.items() if explicit.get(k) is None}
        values.update({k: v for k, v in explicit.items() if v is not None})
        return cls(**values)

    def replace(self, **changes) -> "RunOptions":
        return dataclasses.replace(self, **changes)

    @property
    def value_checks(self) -> bool:
        """Whether the ops run under check mode (value checks; may sync)."""
        return self.check_mode or self.checked

    @property
    def gates(self) -> Gates:
        """The run's gates, for ``impl.gates.gates_in_effect`` (check mode on when ``value_checks``)."""
        return Gates(platform=self.platform, spec_algorithm=self.algorithm, kv_backend=self.kv_backend,
                     kernel_backend=self.kernel_backend, check_mode="on" if self.value_checks else "off")

    def gamma_for(self, preset_gamma: int) -> int:
        return preset_gamma if self.gamma is None else self.gamma
