"""The speculative decoding engine over the tiny model: prefill, draft, verify, commit, inject.

Names are exported lazily (PEP 562) so that ``impl.engine.drafting`` -- which the
CLIs use to validate ``--draft`` -- can be imported without torch.
"""
from __future__ import annotations

import importlib

_LAZY = {
    "SpecEngine": "impl.engine.engine",
    "StepRecord": "impl.engine.engine",
    "SamplingParams": "impl.run_options",
    "DraftSource": "impl.engine.drafting",
    "PoolChecker": "impl.engine.checker",
    "PoolCheckError": "impl.engine.checker",
    "RankState": "impl.engine.state",
    "Request": "impl.engine.state",
    "run_case": "impl.engine.run",
    "E2EResult": "impl.engine.run",
    "make_prompts": "impl.engine.run",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'impl.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
