"""Resolve a runner option token (``${{ matrix.x }}``, ``${{ inputs.y }}``, ``$VAR``) to every value it can take.

One :class:`Resolver` per (job, step, matrix row, activation). Sources, in GitHub's order: the
expression context (matrix row, ``inputs.*`` of the activation, what the adapter knows) and ``env:``
of the step, job and workflow (what the script itself assigns is read by ci/github/shell_eval.py before a
token gets here). ``None`` means "known only at run time". Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import itertools
import re
from typing import Any, Mapping

from ci.github.expressions import UNKNOWN, ExpressionError, evaluate
from ci.github.triggers import Activation, dispatch_inputs

EXPR_RE = re.compile(r"\$\{\{(.*?)\}\}", re.S)
SHELL_VAR_RE = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
MAX_DEPTH = 4


class Resolver:
    """Every value a token can take for one (job, step, matrix row, activation)."""

    def __init__(self, doc: dict[str, Any], job: dict[str, Any], step: dict[str, Any], row: Mapping[str, Any],
                 act: Activation, base_ctx: Mapping[str, Any]):
        self.doc, self.job, self.step, self.row, self.act = doc, job, step, row, act
        self.ctx = act.context(base_ctx)
        self.ctx["matrix.*"] = UNKNOWN if row.get("*") is UNKNOWN else None   # a missing key is empty
        for key, value in row.items():
            if key != "*":
                self.ctx[f"matrix.{key}"] = value

    def env(self, name: str) -> Any:
        for scope in (self.step, self.job, self.doc):
            env = scope.get("env") if isinstance(scope, dict) else None
            if isinstance(env, dict) and name in env:
                return env[name]
        return None

    def expression(self, body: str) -> list[str] | None:
        body = body.strip()
        name = body.split(".")[-1]
        own_dispatch = self.act.event == "workflow_dispatch" and not self.act.via
        if own_dispatch and re.fullmatch(r"(github\.event\.)?inputs\.[\w-]+", body):
            spec = dispatch_inputs(self.doc).get(name)
            if isinstance(spec, dict) and isinstance(spec.get("options"), list):
                return [str(o) for o in spec["options"] if str(o) != "all"]
            return None
        if body.startswith("env."):
            value = self.env(body[4:])
            return None if value is None else self.values(str(value))
        try:
            value = evaluate(body, self.ctx)
        except ExpressionError:
            return None
        if value is UNKNOWN or isinstance(value, (dict, list)):
            return None
        if value is None or value is False:
            return [""]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return [str(value)]

    def values(self, token: str, depth: int = 0) -> list[str] | None:
        """Every value a token can take in this context; None when unknowable."""
        if depth > MAX_DEPTH:
            return None
        parts: list[list[str]] = []
        pos = 0
        for match in EXPR_RE.finditer(token):
            parts.append([token[pos:match.start()]])
            got = self.expression(match.group(1))
            if got is None:
                return None
            parts.append(got)
            pos = match.end()
        parts.append([token[pos:]])
        out: list[str] = []
        for combo in itertools.product(*parts):
            text = "".join(combo)
            shell = SHELL_VAR_RE.search(text)
            if shell:
                value = self.env(shell.group(1) or shell.group(2))
                sub = None if value is None else self.values(str(value), depth + 1)
                if sub is None:
                    return None
                for v in sub:
                    rest = self.values(text[:shell.start()] + v + text[shell.end():], depth + 1)
                    if rest is None:
                        return None
                    out += rest
                continue
            if "$" in text:
                return None
            out.append(text)
        return out
