"""The one table of switches that select code paths (docs/design.md §2.2).

Every gate has a name, its allowed values, the environment variable that sets
it, and a default. Nothing else in ``impl/`` or ``reference/`` reads these
environment variables; library code asks :func:`active_gates`, which answers

* inside a ``with gates_in_effect(options.gates):`` block (the engine enters one
  with its run's :class:`impl.run_options.RunOptions`): the run's gates, never
  the environment; ``override_gates(name=value)`` changes single gates for a
  block (``impl.validation.check_mode``, ``impl.platform.use_kernel_backend``);
  the innermost block wins;
* otherwise (an op called directly): the environment's gates, resolved once per
  distinct set of raw values of the gate variables (cached on the strings
  themselves, so a changed variable is seen on the very next call; a bad value
  raises :class:`GateError` naming the variable on every call, it is never cached).

The edge of a run (a CLI, a test, the CI runner) calls :func:`resolve_gates`
ONCE on its environment and hands the frozen :class:`Gates` down inside
``RunOptions``. The CI audit (``ci/audit/own.py``) imports this table to prove every
value is exercised by a per-commit job, so this module must stay importable
without torch: it must never import torch, triton or any other ``impl`` module.

    python -m impl.gates    # the table, each gate's value in this environment; exit 2 if one is invalid
"""
from __future__ import annotations

import contextlib
import os
import sys
from contextvars import ContextVar
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Iterator, Mapping


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


# ---- the gates in effect (docs/design.md §2.2) ------------------------------------------

_GATE_VARS = tuple(g.env_var for g in GATES.values())
_ENVIRON = os.environ
_ENV_DATA = getattr(_ENVIRON, "_data", None)
_ENV_KEYS = (tuple(map(_ENVIRON.encodekey, _GATE_VARS))
             if isinstance(_ENV_DATA, dict) and callable(getattr(_ENVIRON, "encodekey", None)) else None)
_CACHE_LIMIT = 64  # distinct environments remembered; more (a test sweeping values) start afresh


def _raw_environment() -> tuple:
    """The gate variables' raw values, as a cache key only (never parsed).

    CPython keeps ``os.environ``'s contents in a plain dict, read directly here (~0.5 us for every
    gate; the Mapping API costs ~1 us per variable, raising KeyError for each unset one). A
    replaced ``os.environ`` (not CPython's mapping) is read through the public API."""
    if _ENV_KEYS is not None and os.environ is _ENVIRON:
        return tuple(map(_ENV_DATA.get, _ENV_KEYS))
    return tuple(map(os.environ.get, _GATE_VARS))


@dataclass(frozen=True, eq=False)
class _Layer:
    """What the innermost ``override_gates`` / ``gates_in_effect`` block decides."""

    values: Mapping[str, str | None]  # gate name -> value, merged with the enclosing blocks
    complete: Gates | None  # every gate, when the blocks name them all (a run's gates)
    resolved: dict  # raw environment -> Gates, for a block naming only some gates


_IN_EFFECT: ContextVar[_Layer | None] = ContextVar("dspark_gates_in_effect", default=None)
_FROM_ENVIRONMENT: dict[tuple, Gates] = {}  # raw environment -> Gates (outside every block)


def _resolve_environment(overrides: Mapping[str, str | None]) -> Gates:
    env = dict(zip(_GATE_VARS, map(os.environ.get, _GATE_VARS)))
    return Gates(**{name: overrides[name] if name in overrides else gate_value(name, env) for name in GATES})


def active_gates() -> Gates:
    """The gates library code follows now: the innermost block's, the environment's for the rest.

    Cheap enough for every eager op call (~1 us outside a run, ~0.2 us inside one): the
    environment is re-validated only when a gate variable's raw value changed. Raises
    :class:`GateError` naming the variable when a gate the blocks leave open holds a bad value."""
    layer = _IN_EFFECT.get()
    if layer is not None and layer.complete is not None:
        return layer.complete
    key = _raw_environment()
    cache = _FROM_ENVIRONMENT if layer is None else layer.resolved
    gates = cache.get(key)
    if gates is None:
        gates = _resolve_environment(layer.values if layer is not None else {})
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = gates
    return gates


@contextlib.contextmanager
def _entered(values: dict[str, str | None], complete: Gates | None) -> Iterator[Gates | None]:
    """A layer over the enclosing one (merged when entered): ``complete`` when it names every gate."""
    if complete is None:
        outer = _IN_EFFECT.get()
        values = {**(outer.values if outer is not None else {}), **values}
        complete = Gates(**values) if len(values) == len(GATES) else None
    token = _IN_EFFECT.set(_Layer(MappingProxyType(values), complete, {}))
    try:
        yield complete
    finally:
        _IN_EFFECT.reset(token)


def override_gates(**values: str | None) -> contextlib.AbstractContextManager[Gates | None]:
    """A block in which the named gates take ``values``; the others keep the enclosing block's value
    (else the environment's). None is allowed where the gate's default is decided at run time."""
    for name, value in values.items():
        if value is not None or get_gate(name).default is not None:
            validate_gate_value(name, value, source=name)
    return _entered(dict(values), None)


def gates_in_effect(gates: Gates) -> contextlib.AbstractContextManager[Gates | None]:
    """A block (``as`` gives ``gates``) in which every gate answers from ``gates`` (a run's
    ``RunOptions.gates``), whatever the environment says; blocks inside it still win."""
    if not isinstance(gates, Gates):
        raise TypeError(f"gates must be an impl.gates.Gates, got {type(gates).__name__}")
    return _entered({f.name: getattr(gates, f.name) for f in fields(Gates)}, gates)


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


def format_gate_table(environ: Mapping[str, str] | None = None,
                      detected: Mapping[str, str] | None = None) -> str:
    """The table; with ``environ``, a column with each gate's value in effect there: the variable's
    value, else the default, else (platform, kernel backend) what ``detected`` says this machine
    gives, marked as such."""
    head = ("gate", "env var", "values", "default")
    rows = [head + (("in effect",) if environ is not None else ())]
    for g in GATES.values():
        row = (g.name, g.env_var, ", ".join(g.values), g.default_rule)
        if environ is not None:
            raw = environ.get(g.env_var, "")
            if raw.strip() in g.values:
                current = raw.strip()
            elif raw.strip():
                current = f"{raw!r} INVALID"
            elif g.default is not None:
                current = f"{g.default} (default)"
            else:
                found = (detected or {}).get(g.name)
                current = f"{found} (detected)" if found else "decided at run time (torch is not importable here)"
            row += (current,)
        rows.append(row)
    n = len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def detected_defaults() -> dict[str, str]:
    """What the run-time defaults are on this machine, by the rules the gate table states (the
    platform torch reports; triton on a GPU, the interpreter on CPU); {} without torch. Only the
    command line calls this: importing impl.gates stays torch-free, and impl.platform (which reads
    the gates) is not imported here."""
    try:
        import torch
    except ImportError:
        return {}
    gpu = torch.cuda.is_available()
    backend = ("hip" if getattr(torch.version, "hip", None) else "cuda") if gpu else "cpu"
    return {"platform": backend, "kernel_backend": "triton" if gpu else "triton-interpret"}


def main(argv: list[str] | None = None) -> int:
    if argv:
        print("usage: python -m impl.gates   (takes no arguments)", file=sys.stderr)
        return 2
    bad = invalid_gates(os.environ)
    print_to_stdout(format_gate_table(os.environ, detected_defaults()))
    for message in bad:
        print(f"error: {message}", file=sys.stderr)
    return 2 if bad else 0


def print_to_stdout(text: str) -> None:
    """Print, and end quietly when the reader went away (``python -m impl.gates | head -1``): a
    closed pipe is the reader's choice, not an error worth a traceback."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())   # the interpreter's own flush at exit must not fail again


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
