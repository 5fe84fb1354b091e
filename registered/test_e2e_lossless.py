"""Speculative greedy decoding == the reference decoder, token for token (docs/design.md §7, invariant 13).

The platform policy and KV backend come from the gates (the env variants run
this file once per combination); gamma and the algorithm are parametrised.
Four requests share three slots (joins, finishes and slot reuse at different
steps); prompts are shorter than the window, just under it, past the ring
(window + gamma) and past twice the window (ring wraparound). The engine runs
in checked mode, so the pools are compared with what they must hold after
every step: greedy verify keeps the OUTPUT lossless whatever the draft KV
holds, and only the pool check sees a broken injector.
"""
from __future__ import annotations

import pytest

from ci.registration import register
from impl import sync_policy
from impl.engine.run import run_case
from impl.gates import gate_value
from impl.model.tiny_config import cpu_small
from impl.platform import current_platform
from impl.run_options import RunOptions

MAX_NEW = 6
BATCH, SLOTS = 4, 3


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=60,
          env={"cuda-unified": {"DSPARK_PLATFORM": "cuda", "DSPARK_KV_BACKEND": "unified"},
               "cuda-paged": {"DSPARK_PLATFORM": "cuda", "DSPARK_KV_BACKEND": "paged"},
               "hip-unified": {"DSPARK_PLATFORM": "hip", "DSPARK_KV_BACKEND": "unified"},
               "hip-paged": {"DSPARK_PLATFORM": "hip", "DSPARK_KV_BACKEND": "paged"}})
@pytest.mark.parametrize("algorithm", ["dspark", "mtp"])
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_spec_decode_is_lossless(gamma, algorithm):
    cfg = cpu_small()
    # gamma 1 proposes with the draft model itself; larger gamma with a noisy oracle so
    # commit lengths vary over 1..gamma+1 and the commit gate writes partial rows
    draft = "model" if gamma == 1 else "noisy:0.3"
    options = RunOptions.resolve(algorithm=algorithm, gamma=gamma, batch=BATCH, num_slots=SLOTS, draft=draft,
                                 max_new_tokens=MAX_NEW, seed=gamma, checked=True)  # the gates: read once, here
    res = run_case(cfg, options)
    eng = res.engine
    # the one lossless rule (docs/design.md §7.3): every reference token decided by more than the
    # near-tie margin (so equality is a check everywhere), and every token equal
    assert res.full_check, f"near-tie in the reference (margin {res.min_margin}); pick another seed"
    assert res.verdict.word == "yes", res.verdict.line
    assert all(len(t) == MAX_NEW for t in res.outputs.values())

    # the gates really selected the paths
    assert eng.kv_backend == gate_value("kv_backend")
    assert eng.platform == current_platform().backend
    assert eng.state.target_pool.kind == eng.kv_backend == eng.state.draft_pool.kind
    want = sync_policy.decide(eng.platform, algorithm, "uniform", exact_num_tokens=True)
    decisions = {r.sync_decision for r in eng.records if r.verified}
    assert decisions == {want}
    if eng.platform == "hip" and algorithm == "mtp":
        assert want == sync_policy.KEEP_SYNC  # the field fix: MTP verify keeps the sync on HIP

    # the scenario is the one promised: waves of joins, slot reuse, wraparound, checks ran
    joined = sorted({eng.finished[r].joined_step for r in eng.finished})
    assert len(joined) >= 2, "requests should join at different steps"
    assert len({eng.finished[r].slot for r in eng.finished}) == SLOTS < BATCH
    assert max(len(eng.finished[r].prompt) for r in eng.finished) > 2 * cfg.window > eng.spec.ring
    assert eng.checker is not None and eng.checker.checks == eng.step_index
    lens = [c for step in eng.accept_lengths_per_step() for c in step]
    assert all(1 <= c <= gamma + 1 for c in lens)
    if gamma > 1:
        assert len(set(lens)) >= 2, f"commit lengths never varied: {lens}"
