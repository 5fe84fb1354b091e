"""Checks of gate environment variables against the gate table in ``impl/gates.py``.

``impl`` is lazy (PEP 562), so importing ``impl.gates`` pulls in no torch.
"""
from __future__ import annotations

from impl.gates import GATES, Gate

GATE_PREFIX = "DSPARK_"


def gate_for_env_var(var: str) -> Gate | None:
    for gate in GATES.values():
        if gate.env_var == var:
            return gate
    return None


def gate_env_problem(var: str, value: str, *, gates_only: bool = False) -> str | None:
    """Why ``var=value`` is not a valid gate setting, or None when it is fine.

    Variables outside the ``DSPARK_`` namespace are allowed unless ``gates_only``
    (env variants of a registration may only set gates).
    """
    gate = gate_for_env_var(var)
    if gate is None:
        if gates_only or var.startswith(GATE_PREFIX):
            known = sorted(g.env_var for g in GATES.values())
            return f"{var!r} is not a gate environment variable; gates in impl/gates.py: {known}"
        return None
    if value not in gate.values:
        return f"{var}={value!r} is not allowed for gate {gate.name!r}; expected one of {list(gate.values)}"
    return None
