"""The checked engine catches a broken injector that output equality cannot.

Greedy verify keeps the output lossless whatever the draft KV holds, so each
corruption below still produces the reference tokens; the pool check (and
check mode's duplicate-loc report) is what must fail.
"""
from __future__ import annotations

import pytest

from ci.registration import register
from impl.engine.run import run_case
from impl.engine.checker import PoolCheckError
from impl.model.tiny_config import cpu_small
from impl.run_options import RunOptions
from impl.spec.injector import TargetHiddenInjector


def _skip_window_trim(self, hidden, *, positions, state_slot, final_pos):
    """Corrupt prefill injection: every prompt token written, no window trim."""
    loc = self.pool.locate(state_slot, positions, final_pos=None)
    self._write_all(hidden, positions, loc)
    return loc


def _drop_commit_gate(original):
    def inject_verify(self, hidden, *, req_pool_indices, prefix_lens, commit_lens, stride=None):
        """Corrupt verify injection: all rows written, as if every draft were accepted."""
        full = commit_lens.new_full(commit_lens.shape, stride or self.pool.config.verify_rows("target"))
        return original(self, hidden, req_pool_indices=req_pool_indices, prefix_lens=prefix_lens,
                        commit_lens=full, stride=stride)
    return inject_verify


def _run(checked, kv_backend="unified"):
    return run_case(cpu_small(), RunOptions.resolve(algorithm="dspark", gamma=3, kv_backend=kv_backend, batch=4,
                                                    num_slots=2, draft="noisy:0.5", max_new_tokens=5, seed=4,
                                                    checked=checked))


@pytest.fixture(autouse=True)
def torch_kernels(monkeypatch):
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=20)
@pytest.mark.parametrize("kv_backend", ["unified", "paged"])
def test_healthy_injector_passes_the_pool_check(kv_backend):
    res = _run(True, kv_backend)
    assert res.lossless and res.engine.checker.checks == res.engine.step_index


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=20)
@pytest.mark.parametrize("kv_backend", ["unified", "paged"])
def test_skipped_window_trim_is_caught(monkeypatch, kv_backend):
    monkeypatch.setattr(TargetHiddenInjector, "inject_prefill", _skip_window_trim)
    assert _run(False, kv_backend).lossless  # the output cannot tell
    with pytest.raises((PoolCheckError, ValueError), match="trim|duplicate|does not hold|changed"):
        _run(True, kv_backend)


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=20)
@pytest.mark.parametrize("kv_backend", ["unified", "paged"])
def test_dropped_commit_gate_is_caught(monkeypatch, kv_backend):
    monkeypatch.setattr(TargetHiddenInjector, "inject_verify", _drop_commit_gate(TargetHiddenInjector.inject_verify))
    assert _run(False, kv_backend).lossless  # the output cannot tell
    with pytest.raises(PoolCheckError, match="commit gate"):
        _run(True, kv_backend)
