"""The one table of switches that select code paths (docs/design.md §2).

Every gate has a name, its allowed values, the environment variable that sets
it, and a default. Nothing else in ``impl/`` reads these environment variables.
The edge of a run (a CLI, a test, the CI runner) calls :func:`resolve_gates`
ONCE and hands the frozen :class:`Gates` down inside
:class:`impl.run_options.RunOptions`; :func:`gate_value` remains the fallback
for ops called directly without options. The CI audit (``ci/audit.py``)
imports this table to prove every value is exercised by a per-commit job, so
this module must stay importable without torch: it must never import torch,
triton or any other ``impl`` module.

    python -m impl.gates    # the table, each gate's value in this environment; exit 2 if one is invalid
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, fields
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
        sep = "" if source.endswith("=") else " "
        raise GateError(
            f"gate {name!r}: {source}{sep}{value!r} is not allowed; expected one of {list(gate.values)}"
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


@dataclass(frozen=True)
class Gates:
    """Every gate's value, resolved once (None: decided at run time from the hardware)."""

    platform: str | None = None
    spec_algorithm: str = "dspark"
    kv_backend: str = "unified"
    kernel_backend: str | None = None
    check_mode: str = "off"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or GATES[f.name].default is not None:
                validate_gate_value(f.name, value, source=f.name)

    def __getitem__(self, name: str) -> str | None:
        get_gate(name)
        return getattr(self, name)


if {f.name for f in fields(Gates)} != set(GATES):  # pragma: no cover - a table edit without Gates
    raise RuntimeError("impl.gates.Gates must have one field per entry of GATES")


def resolve_gates(environ: Mapping[str, str] | None = None) -> Gates:
    """Read every gate from ``environ`` (default ``os.environ``) once, validated.

    Raises :class:`GateError` naming the first invalid variable; :func:`invalid_gates`
    lists them all.
    """
    env = os.environ if environ is None else environ
    return Gates(**{name: gate_value(name, env) for name in GATES})


def invalid_gates(environ: Mapping[str, str] | None = None) -> list[str]:
    """One message per gate variable in ``environ`` holding a value outside the gate's set."""
    env = os.environ if environ is None else environ
    bad = []
    for name in GATES:
        try:
            gate_value(name, env)
        except GateError as err:
            bad.append(str(err))
    return bad


def format_gate_table(environ: Mapping[str, str] | None = None) -> str:
    """The table; with ``environ``, a column with each gate's value there."""
    head = ("gate", "env var", "values", "default")
    rows = [head + (("current",) if environ is not None else ())]
    for g in GATES.values():
        row = (g.name, g.env_var, ", ".join(g.values), g.default_rule)
        if environ is not None:
            raw = environ.get(g.env_var, "")
            if raw.strip() == "":
                current = "(unset)"
            elif raw.strip() in g.values:
                current = raw.strip()
            else:
                current = f"{raw!r} INVALID"
            row += (current,)
        rows.append(row)
    n = len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    if argv:
        print("usage: python -m impl.gates   (takes no arguments)", file=sys.stderr)
        return 2
    print(format_gate_table(os.environ))
    bad = invalid_gates(os.environ)
    for message in bad:
        print(f"error: {message}", file=sys.stderr)
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
