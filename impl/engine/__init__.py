"""The speculative decoding engine over the tiny model: prefill, draft, verify, commit, inject.

Names are exported lazily (PEP 562) so that ``impl.engine.drafting`` -- which the
CLIs use to validate ``--draft`` -- can be imported without torch.
"""
from __future__ import annotations

from impl.lazy_exports import lazy_exports

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

__all__, __getattr__ = lazy_exports(__name__, _LAZY)
