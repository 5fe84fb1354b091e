"""The speculative decoding engine over the tiny model: prefill, draft, verify, commit, inject."""
from impl.engine.checker import PoolCheckError, PoolChecker
from impl.engine.drafting import DraftSource
from impl.engine.engine import SamplingParams, SpecEngine, StepRecord
from impl.engine.state import RankState, Request

__all__ = ["SpecEngine", "SamplingParams", "StepRecord", "DraftSource", "PoolChecker", "PoolCheckError",
           "RankState", "Request"]
