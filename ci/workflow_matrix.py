"""A job's ``strategy.matrix`` as rows: literals, ``fromJson`` of literal or input-passed JSON, include/exclude.

A matrix (or one of its keys) that is known only at run time (a previous job's output) becomes
UNKNOWN: the audit then says "unknown", never "does not run". Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import itertools
from typing import Any, Mapping

from ci.gh_expr import UNKNOWN, ExpressionError, evaluate

MatrixRow = dict[str, Any]   # key -> value (a str, a dict/list, or UNKNOWN)


def _value(raw: Any, ctx: Mapping[str, Any]) -> Any:
    """A matrix entry as written, or evaluated when it is an expression string (UNKNOWN when run-time)."""
    if isinstance(raw, str) and "${{" in raw:
        try:
            return evaluate(raw, ctx)
        except ExpressionError:
            return UNKNOWN
    return raw


def _cell(v: Any) -> Any:
    return v if isinstance(v, (dict, list)) or v is UNKNOWN else str(v)


def matrix_rows(job: dict[str, Any], ctx: Mapping[str, Any] | None = None) -> tuple[list[MatrixRow], str | None]:
    """Every combination of a job's matrix, include/exclude applied; and why it is not fully known ("" / None)."""
    ctx = ctx or {}
    strategy = job.get("strategy")
    matrix = _value(strategy.get("matrix"), ctx) if isinstance(strategy, dict) else None
    if matrix is None:
        return [{}], None
    if not isinstance(matrix, dict):
        return [{"*": UNKNOWN}], f"matrix {strategy.get('matrix')!r} is computed at run time"
    why = None
    base: dict[str, list[Any]] = {}
    for key, raw in matrix.items():
        if key in ("include", "exclude"):
            continue
        values = _value(raw, ctx)
        if not isinstance(values, list):
            why = f"matrix.{key} = {raw!r} is computed at run time"
            values = [UNKNOWN]
        base[key] = values
    keys = list(base)
    rows = [dict(zip(keys, (_cell(v) for v in combo))) for combo in itertools.product(*(base[k] for k in keys))] \
        if keys else []
    for item in _value(matrix.get("exclude"), ctx) or []:
        if isinstance(item, dict):
            rows = [r for r in rows if not all(str(r.get(k)) == str(v) for k, v in item.items())]
    include = _value(matrix.get("include"), ctx)
    if include is UNKNOWN:
        return rows + [{"*": UNKNOWN}], f"matrix.include {matrix.get('include')!r} is computed at run time"
    for item in include or []:
        if not isinstance(item, dict):
            continue
        item = {k: _cell(v) for k, v in item.items()}
        matched = False
        for row in rows[:len(rows) if keys else 0]:   # with no original keys, each include is its own row
            if row.get("*") is not UNKNOWN and all(row.get(k) == v for k, v in item.items() if k in keys):
                for k, v in item.items():
                    if k not in keys:
                        row[k] = v
                matched = True
        if not matched:
            rows.append(dict(item))
    return rows or [{}], why
