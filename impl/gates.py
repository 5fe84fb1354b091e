"""The one table of switches that select code paths (SPEC §2).

Every gate has a name, its allowed values, the environment variable that sets
it, and a default. Nothing else in ``impl/`` reads these environment variables:
code asks :func:`gate_value`, which validates. The CI audit (``ci/audit.py``)
imports this table to prove every value is exercised by a per-commit job, so
this module must stay importable without torch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class Gate:
    name: str
    env_var: str
    values: tuple[str, ...]
    default: str | None  # None: decided at run time (see ``default_rule``)
    default_rule: str
    doc: str


GATES: dict[str, Gate] = {
    g.name: g
    for g in (
        Gate(
            name="platform",
            env_var="DSPARK_PLATFORM",
            values=("cuda", "hip", "cpu"),
            default=None,
            default_rule="detected from torch; setting it to another backend is emulation",
            doc="platform backend whose policies (sync elision, kernel choice) apply",
        ),
        Gate(
            name="spec_algorithm",
            env_var="DSPARK_SPEC_ALGO",
            values=("none", "mtp", "dspark"),
            default="dspark",
            default_rule="dspark",
            doc="speculative algorithm; MTP/EAGLE keeps the prefill sync on HIP",
        ),
        Gate(
            name="kv_backend",
            env_var="DSPARK_KV_BACKEND",
            values=("unified", "paged"),
            default="unified",
            default_rule="unified",
            doc="draft KV storage: unified bf16 ring or paged pool",
        ),
        Gate(
            name="kernel_backend",
            env_var="DSPARK_KERNEL_BACKEND",
            values=("triton", "triton-interpret", "torch"),
            default=None,
            default_rule="triton on a GPU, triton-interpret on CPU",
            doc="who runs the data-moving ops: compiled Triton, the Triton interpreter, or torch",
        ),
        Gate(
            name="check_mode",
            env_var="DSPARK_CHECK",
            values=("off", "on"),
            default="off",
            default_rule="off",
            doc="opt-in value checks (duplicate/out-of-range locs, negative positions, output_size); may sync",
        ),
    )
}


class GateError(ValueError):
    """An unknown gate or a value outside a gate's allowed set."""


def get_gate(name: str) -> Gate:
    try:
        return GATES[name]
    except KeyError:
        raise GateError(f"unknown gate {name!r}; known gates: {sorted(GATES)}") from None


def validate_gate_value(name: str, value: str, *, source: str = "value") -> str:
    gate = get_gate(name)
    if value not in gate.values:
        raise GateError(
            f"gate {name!r}: {source} {value!r} is not allowed; expected one of {list(gate.values)}"
        )
    return value


def gate_value(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The gate's value from the environment, validated; ``default`` when unset.

    Returns None for gates whose default is decided at run time (platform,
    kernel backend) and that the environment does not set.
    """
    gate = get_gate(name)
    env = os.environ if env is None else env
    raw = env.get(gate.env_var)
    if raw is None or raw == "":
        return gate.default
    return validate_gate_value(name, raw.strip(), source=f"environment variable {gate.env_var}=")


def env_var_to_gate() -> dict[str, Gate]:
    return {g.env_var: g for g in GATES.values()}


def format_gate_table() -> str:
    rows = [("gate", "env var", "values", "default")]
    rows += [(g.name, g.env_var, ", ".join(g.values), g.default_rule) for g in GATES.values()]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_gate_table())
