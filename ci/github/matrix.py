"""A job's ``strategy.matrix`` as rows: literals, ``fromJson`` of literal or input-passed JSON, include/exclude.

A matrix (or one of its keys) that is known only at run time (a previous job's output) becomes
UNKNOWN: the audit then says "unknown", never "does not run". A matrix of more than GitHub's
256 jobs is never expanded (``matrix_size`` multiplies first): its rows are UNKNOWN, and the scan
reports it (rule oversize-matrix). Messages show a bounded repr (ci/safe_yaml.py ``short``).
Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import itertools
from typing import Any, Mapping

from ci.github.expressions import UNKNOWN, ExpressionError, evaluate
from ci.safe_yaml import short

MAX_JOBS = 256         # GitHub refuses a matrix that generates more jobs than this
MAX_EXPANDED = 1024    # combinations expanded to apply exclude; beyond, exclude cannot plausibly reach 256

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
        return [{"*": UNKNOWN}], f"matrix {short(strategy.get('matrix'))} is computed at run time"
    why = None
    base: dict[str, list[Any]] = {}
    for key, raw in matrix.items():
        if key in ("include", "exclude"):
            continue
        values = _value(raw, ctx)
        if not isinstance(values, list):
            why = f"matrix.{short(key)} = {short(raw)} is computed at run time"
            values = [UNKNOWN]
        base[key] = values
    keys = list(base)
    size = matrix_size(base, _value(matrix.get("include"), ctx))
    if size > MAX_EXPANDED:
        return [{"*": UNKNOWN}], f"matrix of {size} combinations before exclude: over GitHub's {MAX_JOBS}-job cap"
    rows = [dict(zip(keys, (_cell(v) for v in combo))) for combo in itertools.product(*(base[k] for k in keys))] \
        if keys else []
    exclude = _value(matrix.get("exclude"), ctx)
    if exclude is not None and not isinstance(exclude, list):  # run time, or a crafted scalar: any row may go
        return [{"*": UNKNOWN}], f"matrix.exclude {short(matrix.get('exclude'))} {_unread(exclude)}"
    for item in exclude or []:
        if isinstance(item, dict):
            rows = [r for r in rows if not all(str(r.get(k)) == str(v) for k, v in item.items())]
    include = _value(matrix.get("include"), ctx)
    if include is not None and not isinstance(include, list):  # the known rows stay, any other may be added
        return rows + [{"*": UNKNOWN}], f"matrix.include {short(matrix.get('include'))} {_unread(include)}"
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
    if len(rows) > MAX_JOBS:
        return [{"*": UNKNOWN}], f"matrix of {len(rows)} jobs: over GitHub's {MAX_JOBS}-job cap"
    # no row (an empty vector, everything excluded, no vector): GitHub fails the job when it evaluates its
    # strategy ("Matrix vector 's' does not contain any values", "Matrix must define at least one vector")
    return rows, why


def _unread(value: Any) -> str:
    return "is computed at run time" if value is UNKNOWN else "is not a list (GitHub rejects it): read as unknown"


def matrix_size(base: Mapping[str, list[Any]], include: Any = None) -> int:
    """An upper bound of the rows ``base`` and ``include`` make, by multiplication (nothing is expanded).
    exclude can only remove rows, so it is not counted; each include may add one row."""
    size = 1 if base else 0
    for values in base.values():
        size *= max(len(values), 1)
        if size > 1 << 40:
            break
    return size + (len(include) if isinstance(include, list) else 0)


def oversize_matrix(job: Any) -> str | None:
    """Why a job's literal matrix is over GitHub's job cap (None when it is within it or known only at run time)."""
    rows, why = matrix_rows(job if isinstance(job, dict) else {}, {})
    if why and "-job cap" in why:
        return f"strategy.{why}: GitHub refuses the workflow, so none of its jobs run (not expanded here)"
    return None
