"""Bad inputs of the op table: one ``<op>_errors()`` per op, each a list of ErrorInputs.

Each names the call's arguments, the error type and a regex its message must match
(the message names the offending argument). ``check=True``: a value check, run in
check mode; ``env``: a gate variable with a value no gate accepts.
Imports torch, impl.gates and impl.testing.op_info only.
"""
from __future__ import annotations

import torch

from impl.gates import GateError
from impl.testing.op_info import ErrorInput, Kwargs

BOGUS_BACKEND = (("DSPARK_KERNEL_BACKEND", "bogus"),)


def _i(values, device, dtype=torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


_e = ErrorInput  # short, for the long lists below


def _with(base, **changes):
    """A maker: ``base(device)`` with some arguments replaced (a value, or a function of the device)."""
    def make(device) -> Kwargs:
        kw = base(device)
        return {**kw, **{k: v(device, kw) if callable(v) else v for k, v in changes.items()}}
    return make


# ---------------------------------------------------------------- scatter / SWA store
def _scatter(device, t=4, d=8, pages=16, dtype=torch.bfloat16) -> Kwargs:
    kv = (torch.arange(t * d, device=device).reshape(t, d) % 7).to(dtype)
    return dict(kv=kv, loc=torch.arange(t, device=device), unified=torch.zeros(pages, d, device=device).to(dtype))


def _swa(device, window=4, ring=6) -> Kwargs:
    kw = _scatter(device)
    return dict(kv=kw["kv"], state_slot=_i([0, 0, 1, 1], device), positions=_i([0, 1, 2, 3], device),
                unified=kw["unified"], window=window, ring=ring)


def scatter_errors() -> list[ErrorInput]:
    return [
        _e("unified-dtype-differs-from-kv", _with(_scatter, unified=lambda d, kw: kw["unified"].float()), TypeError,
           "unified must have dtype bfloat16"),
        _e("loc-float", _with(_scatter, loc=lambda d, kw: kw["loc"].float()), TypeError,
           "loc must have dtype int32 or int64"),
        _e("bool-rows", _with(_scatter, kv=lambda d, kw: kw["kv"].bool(), unified=lambda d, kw: kw["unified"].bool()),
           TypeError, "unsupported dtype"),
        _e("kv-not-a-tensor", _with(_scatter, kv=[[1.0] * 8] * 4), TypeError, "kv must be a torch.Tensor"),
        _e("kv-non-contiguous", _with(lambda d: _scatter(d, t=8, d=8), kv=lambda d, kw: kw["kv"].t()), ValueError,
           "kv must be contiguous"),
        _e("unified-non-contiguous",
           _with(_scatter, unified=lambda d, kw: torch.zeros(16, 16, device=d).bfloat16()[:, ::2]), ValueError,
           "unified must be contiguous"),
        _e("loc-length", _with(_scatter, loc=lambda d, kw: kw["loc"][:3]), ValueError, r"loc must have shape \[4\]"),
        _e("row-width", _with(_scatter, unified=lambda d, kw: torch.zeros(16, 4, device=d).bfloat16()), ValueError,
           "unified rows are 4 wide but kv rows are 8 wide"),
        _e("kv-3d", _with(_scatter, kv=lambda d, kw: torch.zeros(4, 2, 4, device=d).bfloat16()), ValueError,
           "kv must be 2-D"),
        _e("loc-on-meta", _with(_scatter, loc=lambda d, kw: kw["loc"].to("meta")), ValueError, "loc on meta"),
        _e("duplicate-loc-check-arg", _with(_scatter, loc=lambda d, kw: _i([3, 5, 3, -1], d), check=True), ValueError,
           "duplicate"),
        _e("loc-past-end-check-arg", _with(_scatter, loc=lambda d, kw: _i([3, 16, 4, -1], d), check=True), ValueError,
           r"loc\[1\] = 16 is out of range"),
        _e("loc-below-minus-1", _with(_scatter, loc=lambda d, kw: _i([3, 2, -5, 0], d)), ValueError, "out of range",
           check=True),
        _e("unknown-backend-gate", _scatter, GateError, "DSPARK_KERNEL_BACKEND", env=BOGUS_BACKEND),
        _e("unknown-check-gate", _scatter, GateError, "DSPARK_CHECK", env=(("DSPARK_CHECK", "maybe"),)),
    ]


def swa_errors() -> list[ErrorInput]:
    return [
        _e("final-pos-length", _with(_swa, final_pos=lambda d, kw: _i([1, 2], d)), ValueError,
           r"final_pos must have shape \[4\]"),
        _e("negative-position", _with(_swa, positions=lambda d, kw: _i([0, -1, 2, 3], d)), ValueError,
           "positions must be non-negative", check=True),
        _e("ring-address-collides", _with(_swa, positions=lambda d, kw: _i([0, 6, 2, 3], d)), ValueError,
           "ring address has duplicate", check=True),
        _e("ring-not-above-window", lambda d: _swa(d, window=4, ring=4), ValueError,
           r"ring \(4\) is too small for window \(4\)"),
        _e("unknown-backend-gate", _swa, GateError, "DSPARK_KERNEL_BACKEND", env=BOGUS_BACKEND),
    ]


# ---------------------------------------------------------------- norm + RoPE
def _norm_rope(device, t=3, d=16, rope_dim=8, max_pos=10) -> Kwargs:
    table = torch.linspace(-1, 1, max_pos * (rope_dim // 2), device=device).reshape(max_pos, rope_dim // 2)
    return dict(kv=torch.linspace(-2, 2, t * d, device=device).reshape(t, d).bfloat16(),
                weight=torch.ones(d, device=device).bfloat16(), eps=1e-6, cos=table, sin=table.clone(),
                positions=torch.arange(t, device=device), rope_dim=rope_dim)


def norm_rope_errors() -> list[ErrorInput]:
    return [
        _e("cos-float64", _with(_norm_rope, cos=lambda d, kw: kw["cos"].double()), TypeError,
           "cos must have dtype float32"),
        _e("kv-int16", _with(_norm_rope, kv=lambda d, kw: kw["kv"].to(torch.int16)), TypeError, "kv must have dtype"),
        _e("kv-non-contiguous", _with(lambda d: _norm_rope(d, t=16, d=16), kv=lambda d, kw: kw["kv"].t()), ValueError,
           "kv must be contiguous"),
        _e("weight-width", _with(_norm_rope, weight=lambda d, kw: torch.ones(8, device=d).bfloat16()), ValueError,
           r"weight must have shape \[16\]"),
        _e("sin-rows", _with(_norm_rope, sin=lambda d, kw: kw["sin"][:5]), ValueError, "sin must have shape"),
        _e("rope-dim-disagrees-with-table", _with(_norm_rope, rope_dim=4), ValueError, "cos must have shape"),
        _e("rope-dim-odd", _with(_norm_rope, rope_dim=7), ValueError, "rope_dim must be even"),
        _e("eps-negative", _with(_norm_rope, eps=-1.0), ValueError, "eps must be"),
        _e("kv-4d", _with(_norm_rope, kv=lambda d, kw: kw["kv"].reshape(3, 1, 1, 16)), ValueError,
           "kv must be 2-D or 3-D"),
        _e("sin-on-meta", _with(_norm_rope, sin=lambda d, kw: kw["sin"].to("meta")), ValueError, "sin on meta"),
        _e("negative-position", _with(_norm_rope, positions=lambda d, kw: _i([0, -1, 2], d)), ValueError,
           "positions must lie in", check=True),
        _e("unknown-backend-gate", _norm_rope, GateError, "DSPARK_KERNEL_BACKEND", env=BOGUS_BACKEND),
    ]


# ---------------------------------------------------------------- index builders
def _commit(device, stride=4, ring=8) -> Kwargs:
    return dict(req_pool_indices=_i([0], device), prefix_lens=_i([3], device), commit_lens=_i([1], device),
                stride=stride, ring=ring)


def commit_errors() -> list[ErrorInput]:
    return [
        _e("prefix-lens-float", _with(_commit, prefix_lens=lambda d, kw: torch.tensor([1.0], device=d)), TypeError,
           "prefix_lens must have dtype"),
        _e("commit-lens-on-meta", _with(_commit, commit_lens=lambda d, kw: kw["commit_lens"].to("meta")), ValueError,
           "commit_lens on meta"),
        _e("negative-prefix", _with(_commit, prefix_lens=lambda d, kw: _i([-3], d)), ValueError,
           "prefix_lens must be non-negative", check=True),
        _e("stride-above-ring", lambda d: _commit(d, stride=9, ring=8), ValueError,
           r"stride \(9\) must not exceed ring \(8\)"),
    ]


def _inject(device, n=2, ring=8, window=4) -> Kwargs:
    return dict(positions=torch.arange(1, n + 1, device=device), state_slot=torch.zeros(n, dtype=torch.long,
                device=device), ring=ring, window=window)


def inject_errors() -> list[ErrorInput]:
    return [
        _e("positions-non-contiguous",
           _with(lambda d: _inject(d, n=4), positions=lambda d, kw: torch.arange(8, device=d)[::2]), ValueError,
           "positions must be contiguous"),
        _e("commit-lens-rows-disagree",
           _with(lambda d: _inject(d, n=5), commit_lens=lambda d, kw: _i([1, 2], d), verify_len=3), ValueError,
           "commit_lens has 2 requests and verify_len is 3"),
        _e("commit-lens-without-verify-len", _with(lambda d: _inject(d, n=6), commit_lens=lambda d, kw: _i([1, 2], d)),
           ValueError, "verify_len must be an int"),
        _e("verify-len-without-commit-lens", _with(lambda d: _inject(d, n=6), verify_len=3), ValueError,
           "verify_len is only used together with commit_lens"),
        _e("state-slot-missing", _with(_inject, state_slot=None), ValueError, "state_slot is required"),
        _e("final-pos-on-meta", _with(lambda d: _inject(d, n=1), final_pos=lambda d, kw: _i([1], d).to("meta")),
           ValueError, "final_pos on meta"),
        _e("negative-position", _with(_inject, positions=lambda d, kw: _i([5, -2], d),
                                      state_slot=lambda d, kw: _i([0, 1], d)), ValueError,
           "positions must be non-negative", check=True),
        _e("ring-below-window", lambda d: _inject(d, n=1, ring=3, window=8), ValueError,
           r"ring \(3\) is too small for window \(8\)"),
        _e("window-zero", lambda d: _inject(d, n=1, ring=3, window=0), ValueError, "window must be an int >= 1"),
    ]


def prefill_errors() -> list[ErrorInput]:
    return [
        _e("extend-lens-length", lambda d: dict(req_pool_indices=_i([0, 1, 2], d), prefix_lens=_i([0, 0, 0], d),
                                                 extend_lens=_i([1, 1], d)), ValueError,
           r"extend_lens must have shape \[3\]"),
    ]


def expand_errors() -> list[ErrorInput]:
    def expand(seq, ext, rpi, num_tokens):
        return lambda d: dict(seq_lens=_i(seq, d), extend_lens=_i(ext, d), req_pool_indices=_i(rpi, d),
                              num_tokens=num_tokens)

    return [
        _e("seq-lens-length", expand([3], [1, 1], [0, 1], 4), ValueError, r"seq_lens must have shape \[2\]"),
        _e("num-tokens-below-total", expand([3, 3], [2, 1], [0, 1], 2), ValueError,
           "num_tokens=2 is smaller than sum", check=True),
        _e("num-tokens-without-requests", expand([], [], [], 3), ValueError,
           "num_tokens=3 needs at least one request"),
    ]


def token_meta_errors() -> list[ErrorInput]:
    def meta(prefix, ext, rpi, num_tokens, **kw):
        return lambda d: dict(prefix_lens=_i(prefix, d), extend_lens=_i(ext, d) if isinstance(ext, list) else ext,
                              req_pool_indices=_i(rpi, d), window=8, num_tokens=num_tokens, **kw)

    return [
        _e("rpi-length", meta([3, 4], [1, 1], [0], 2), ValueError, r"req_pool_indices must have shape"),
        _e("extend-lens-length", meta([3, 4], [1, 1, 1], [0, 1], 3), ValueError, r"extend_lens must have shape"),
        _e("float-prefix", lambda d: {**meta([3], [1], [0], 1)(d), "prefix_lens": torch.ones(1, device=d)},
           TypeError, "prefix_lens must have dtype int32 or int64"),
        _e("negative-int-rows", meta([3], -1, [0], 0), ValueError, "extend_lens must be an int >= 0"),
        _e("no-requests", meta([], [], [], 0), ValueError, "prefix_lens must hold at least one request"),
        _e("padded-bs-below-batch", meta([3, 4], [1, 1], [0, 1], 2, padded_bs=1), ValueError,
           "padded_bs must be an int >= 2"),
        _e("num-tokens-not-int", meta([3], [1], [0], 1.0), ValueError, "num_tokens must be an int >= 0"),
        _e("window-zero", lambda d: {**meta([3], [1], [0], 1)(d), "window": 0}, ValueError,
           "window must be an int >= 1"),
        _e("num-tokens-below-total", meta([3, 3], [2, 1], [0, 1], 2), ValueError,
           r"num_tokens=2 is smaller than sum\(extend_lens\)=3", check=True),
    ]


def pad_errors() -> list[ErrorInput]:
    def pad(lens, tier, padded_bs):
        return lambda d: dict(verify_lens=_i(lens, d), tier=tier, padded_bs=padded_bs)

    return [
        _e("tier-below-sum", pad([3, 3], 5, 4), ValueError, r"tier \(5\) is too small for sum\(verify_lens\) = 6",
           check=True),
        _e("padded-bs-below-batch", pad([3, 3], 6, 1), ValueError, r"padded_bs \(1\) must be >= the batch size \(2\)"),
    ]


def tier_errors() -> list[ErrorInput]:
    return [
        _e("need-above-largest-tier", lambda d: dict(need=13, tiers=[6, 12]), ValueError,
           "need=13 tokens exceeds the largest captured tier 12"),
        _e("no-tiers", lambda d: dict(need=1, tiers=[]), ValueError, "tiers must be a non-empty list"),
    ]


# ---------------------------------------------------------------- top-k / top-p
def _probs(device, bs=2, vocab=8) -> torch.Tensor:
    return torch.linspace(0.1, 1.0, bs * vocab, device=device).reshape(bs, vocab)


def topk_errors() -> list[ErrorInput]:
    return [
        _e("probs-bf16", lambda d: dict(probs=_probs(d).bfloat16(), k=2), TypeError, "probs must have dtype float32"),
        _e("k-float-tensor", lambda d: dict(probs=_probs(d), k=torch.tensor([1.0, 2.0], device=d)), TypeError,
           "k must have dtype int32 or int64"),
        _e("k-length", lambda d: dict(probs=_probs(d), k=_i([1, 2, 3], d)), ValueError, r"k must have shape \[2\]"),
        _e("k-bool", lambda d: dict(probs=_probs(d), k=True), TypeError, "k must be a int"),
        _e("k-on-meta", lambda d: dict(probs=_probs(d), k=_i([1, 2], d).to("meta")), ValueError, "k must be on device"),
        _e("inf-probability", lambda d: dict(probs=torch.tensor([[0.5, float("inf")]], device=d), k=1), ValueError,
           r"probs must be finite and non-negative, found \+inf", check=True),
        _e("unknown-backend-gate", lambda d: dict(probs=_probs(d), k=3), GateError, "DSPARK_KERNEL_BACKEND",
           env=BOGUS_BACKEND),
    ]


def topp_errors() -> list[ErrorInput]:
    return [
        _e("p-string", lambda d: dict(probs=_probs(d), p="0.9"), TypeError, "p must be a float"),
        _e("p-nan", lambda d: dict(probs=_probs(d), p=float("nan")), ValueError, "p must not be NaN"),
        _e("p-bool", lambda d: dict(probs=_probs(d), p=True), TypeError, "p must be a float"),
        _e("probs-non-contiguous", lambda d: dict(probs=_probs(d, 8, 8).t(), p=0.5), ValueError,
           "probs must be contiguous"),
        _e("negative-probability", lambda d: dict(probs=torch.tensor([[0.5, -0.1]], device=d), p=0.5), ValueError,
           "probs must be finite and non-negative, found negative", check=True),
        _e("inf-probability", lambda d: dict(probs=torch.tensor([[0.5, float("inf")]], device=d), p=0.5), ValueError,
           r"probs must be finite and non-negative, found \+inf", check=True),
        _e("unknown-backend-gate", lambda d: dict(probs=_probs(d), p=0.5), GateError, "DSPARK_KERNEL_BACKEND",
           env=BOGUS_BACKEND),
    ]
