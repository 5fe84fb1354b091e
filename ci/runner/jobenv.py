"""The hermetic environment of a job's pytest process (gate variables decided by the job alone).

Every gate variable (``env_var=`` of each ``Gate(...)`` in ``impl/gates.py``, read
from its syntax tree), every other ``DSPARK_*`` variable and ``TRITON_INTERPRET``
that the catalog entry, the variant or the emulation does not set is REMOVED, and
each removal is reported: a leftover ``DSPARK_SPEC_ALGO`` in a shell must not
change what a job tests. Imports no torch, no impl, no test code.
"""
from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

GATES_FILE = "impl/gates.py"
GATE_PREFIX = "DSPARK_"
ALSO_HERMETIC = ("TRITON_INTERPRET",)        # read by triton at import: decides compiled vs interpreted
RUNNER_VARS = ("DSPARK_JOB", "DSPARK_HARDWARE")   # set by the runner / plugin for the tests to read


@dataclass(frozen=True)
class GateInfo:
    name: str
    env_var: str
    default: str | None
    default_rule: str


def read_gates(root: str | Path) -> list[GateInfo]:
    """The gates of ``impl/gates.py`` from its syntax tree (``Gate(name=..., env_var=..., ...)`` calls)."""
    path = Path(root) / GATES_FILE
    if not path.is_file():
        return []
    gates = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=GATES_FILE)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Gate":
            kw = {}
            for k in node.keywords:
                try:
                    kw[k.arg] = ast.literal_eval(k.value)
                except ValueError:
                    continue
            if isinstance(kw.get("env_var"), str):
                gates.append(GateInfo(str(kw.get("name", kw["env_var"])), kw["env_var"],
                                      kw.get("default"), str(kw.get("default_rule", ""))))
    return gates


def is_hermetic_var(var: str, gate_vars: set[str]) -> bool:
    return var in gate_vars or var.startswith(GATE_PREFIX) or var in ALSO_HERMETIC


@dataclass
class JobEnv:
    env: dict[str, str]                                    # the full process environment
    wanted: dict[str, str]                                 # what the job sets (catalog / host, variant, emulation)
    removed: dict[str, str] = field(default_factory=dict)  # stray variables dropped, with their old values
    gates: list[GateInfo] = field(default_factory=list)

    def removal_lines(self) -> list[str]:
        return [f"[ci] hermetic env: removed {var}={value!r} (not set by this job's catalog entry or variant)"
                for var, value in sorted(self.removed.items())]

    def gate_lines(self) -> list[str]:
        """One line per gate: effective value, or unset with the default that then applies."""
        lines = []
        for gate in self.gates:
            if gate.env_var in self.env:
                lines.append(f"  {gate.name:<15} {gate.env_var}={self.env[gate.env_var]}")
            else:
                default = gate.default if gate.default is not None else f"decided at run time: {gate.default_rule}"
                lines.append(f"  {gate.name:<15} {gate.env_var} unset -> default ({default})")
        interp = self.env.get("TRITON_INTERPRET")
        lines.append(f"  {'triton':<15} TRITON_INTERPRET={interp}" if interp is not None
                     else f"  {'triton':<15} TRITON_INTERPRET unset -> compiled Triton when a GPU is present")
        return lines


def hermetic_env(base: Mapping[str, str], wanted: Mapping[str, str], gates: list[GateInfo]) -> JobEnv:
    """``base`` without stray gate variables, overlaid with ``wanted``."""
    gate_vars = {g.env_var for g in gates}
    env = {}
    removed = {}
    for var, value in base.items():
        if is_hermetic_var(var, gate_vars) and var not in wanted and var not in RUNNER_VARS:
            removed[var] = value
        else:
            env[var] = value
    env.update(wanted)
    return JobEnv(env, dict(wanted), removed, list(gates))


def job_wanted_env(hardware_env: Mapping[str, str], variant_env: Mapping[str, str], *, job_id: str,
                   hardware: str, emulate: str | None = None) -> dict[str, str]:
    """Catalog (or, when emulating, the host's catalog) env + variant env + emulation + the job's name."""
    wanted = {**hardware_env, **variant_env}
    if emulate:
        wanted["DSPARK_PLATFORM"] = emulate
    wanted["DSPARK_JOB"] = job_id
    wanted["DSPARK_HARDWARE"] = hardware
    return wanted
