"""Out-of-contract calls of the op table (docs/design.md §10): one ``<op>_bad_values()`` per op.

Each is a :class:`BadValueSample`: with check mode off every kernel backend must give the
oracle's answer (the rule of §10 it names); with check mode on the op must raise a ValueError
matching ``match``, which names the offending argument. In-place outputs start poisoned, so a
skipped row that is written anyway shows up. Data only: registered/test_op_bad_values.py runs
them here, and another engine's kernels can be run on exactly the same calls.
Imports torch and impl.testing (op_info, samples) only.
"""
from __future__ import annotations

import torch

from impl.testing.op_info import BadValueSample, Kwargs
from impl.testing.samples import generator, poison, to_device

_b = BadValueSample  # short, for the lists below
_RING = "§10.3"


def _i64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _rows(seed: int, t: int, d: int, dtype=torch.bfloat16) -> torch.Tensor:
    return (torch.randn(t, d, generator=generator(seed)) * 3).to(dtype)


# ---------------------------------------------------------------- scatter / SWA store
def _scatter(seed, loc, pages=12, d=16, loc_dtype=torch.int64):
    def make(device) -> Kwargs:
        return to_device(device, kv=_rows(seed, len(loc), d), loc=torch.tensor(loc, dtype=loc_dtype),
                         unified=poison((pages, d), torch.bfloat16, generator(seed + 1)))
    return make


def scatter_bad_values() -> list[BadValueSample]:
    return [
        _b("loc-past-end", _scatter(201, [3, 12, 0, 19, -1, 7]), match=r"^loc\[1\] = 12 is out of range", rule=_RING),
        _b("loc-far-past-end-int32", _scatter(202, [2**31 - 1, 5, 11], loc_dtype=torch.int32),
           match=r"^loc\[0\] = 2147483647 is out of range", rule=_RING),
        _b("loc-below-minus-1", _scatter(203, [4, -2, 9, -(2**40)]), match=r"^loc\[1\] = -2 is out of range",
           rule=_RING),
    ]


def _swa(seed, slots, positions, final=None, pages=3 * 6, ring=6, window=4, d=16):
    def make(device) -> Kwargs:
        kw = dict(kv=_rows(seed, len(slots), d), state_slot=_i64(slots), positions=_i64(positions),
                  unified=poison((pages, d), torch.bfloat16, generator(seed + 1)), window=window, ring=ring)
        if final is not None:
            kw["final_pos"] = _i64(final)
        return to_device(device, **kw)
    return make


def swa_bad_values() -> list[BadValueSample]:
    return [
        _b("negative-slot", _swa(211, [0, -1, 2, -4], [3, 4, 5, 0]), match=r"^state_slot must be non-negative",
           rule=_RING),
        _b("negative-position", _swa(212, [0, 1, 2, 1], [3, -1, 5, -7]), match=r"^positions must be non-negative",
           rule=_RING),
        _b("address-past-end", _swa(213, [0, 3, 2, 9], [1, 2, 3, 4]),
           match=r"^state_slot\[1\] = 3 puts row 1 at ring address 20, past the end of unified", rule=_RING),
        _b("negative-position-with-final-pos", _swa(214, [0, 0, 1], [-2, 5, 3], final=[5, 5, 3]),
           match=r"^positions must be non-negative", rule=_RING),
    ]


# ---------------------------------------------------------------- norm + RoPE
def _norm_rope(seed, positions, shape=(5, 32), rope_dim=16, max_pos=8):
    def make(device) -> Kwargs:
        g = generator(seed)
        angles = torch.rand(max_pos, rope_dim // 2, generator=g, dtype=torch.float64) * 6.3
        return to_device(device, kv=(torch.randn(*shape, generator=g) * 2 + 0.5).bfloat16(),
                         weight=(torch.rand(shape[-1], generator=g) + 0.5).bfloat16(), eps=1e-6,
                         cos=angles.cos().float(), sin=angles.sin().float(), positions=_i64(positions),
                         rope_dim=rope_dim)
    return make


def norm_rope_bad_values() -> list[BadValueSample]:
    table = r"^positions must lie in \[0, 8\)"
    return [
        _b("position-past-table", _norm_rope(221, [0, 8, 3, 500, 7]), match=table, rule=_RING),
        _b("negative-position", _norm_rope(222, [-1, 2, -300, 0, 5]), match=table, rule=_RING),
        _b("heads-3d-past-table", _norm_rope(223, [9, -2, 4], shape=(3, 2, 32)), match=table, rule=_RING),
        # an odd number of non-rope columns takes the strided kernel, which clamps on its own
        _b("odd-nope-width-past-table", _norm_rope(224, [12, -5, 1, 8], shape=(4, 37)), match=table, rule=_RING),
    ]


# ---------------------------------------------------------------- index builders
def _commit(slots, prefix, commit, stride=4, ring=8):
    return lambda device: to_device(device, req_pool_indices=_i64(slots), prefix_lens=_i64(prefix),
                                    commit_lens=_i64(commit), stride=stride, ring=ring)


def commit_bad_values() -> list[BadValueSample]:
    return [
        _b("negative-slot", _commit([2, -1, 0], [5, 9, 14], [4, 3, 2]),
           match=r"^req_pool_indices must be non-negative", rule=_RING),
        _b("negative-prefix", _commit([1, 3], [-3, 6], [4, 2]), match=r"^prefix_lens must be non-negative",
           rule=_RING),
    ]


def _inject(slots, positions, **extra):
    return lambda device: to_device(device, positions=_i64(positions), state_slot=_i64(slots), ring=8, window=4,
                                    **{k: _i64(v) if isinstance(v, list) else v for k, v in extra.items()})


def inject_bad_values() -> list[BadValueSample]:
    return [
        _b("negative-slot", _inject([0, -2, 1, -1], [3, 9, 4, 2]), match=r"^state_slot must be non-negative",
           rule=_RING),
        _b("negative-position", _inject([0, 1, 1, 2], [-4, 9, -1, 2]), match=r"^positions must be non-negative",
           rule=_RING),
        _b("negative-position-commit-gate", _inject([0, 0, 1, 1], [-1, 0, 6, 7], commit_lens=[2, 1], verify_len=2),
           match=r"^positions must be non-negative", rule=_RING),
    ]


def _expand(seq, ext, num_tokens):
    return lambda device: to_device(device, seq_lens=_i64(seq), extend_lens=torch.tensor(ext, dtype=torch.int32),
                                    req_pool_indices=_i64([10 + r for r in range(len(seq))]), num_tokens=num_tokens)


def expand_bad_values() -> list[BadValueSample]:
    rule = "§10.4"
    return [
        _b("num-tokens-below-total", _expand([5, 3, 9], [2, 1, 3], 4),
           match=r"^num_tokens=4 is smaller than sum\(extend_lens\)=6", rule=rule),
        _b("seq-below-extend", _expand([1, 3], [3, 2], None), match=r"^seq_lens must be >= extend_lens", rule=rule),
        _b("seq-below-extend-padded", _expand([1, 3], [3, 2], 7), match=r"^seq_lens must be >= extend_lens",
           rule=rule),
        _b("negative-extend", _expand([4, 6, 3], [2, -1, 1], None), match=r"^extend_lens must be non-negative",
           rule=rule),
        _b("negative-extend-padded", _expand([4, 6, 3], [2, -1, 1], 5), match=r"^extend_lens must be non-negative",
           rule=rule),
    ]


def _meta(prefix, ext, num_tokens, padded_bs=None):
    return lambda device: to_device(device, prefix_lens=_i64(prefix), extend_lens=torch.tensor(ext, dtype=torch.int32),
                                    req_pool_indices=_i64([10 + r for r in range(len(prefix))]), window=8,
                                    num_tokens=num_tokens, padded_bs=padded_bs)


def token_meta_bad_values() -> list[BadValueSample]:
    rule = "§10.4"
    return [
        _b("num-tokens-below-total", _meta([5, 3, 9], [2, 1, 3], 4),
           match=r"^num_tokens=4 is smaller than sum\(extend_lens\)=6", rule=rule),
        _b("negative-extend", _meta([4, 6, 3], [2, -1, 1], 3), match=r"^extend_lens must be non-negative", rule=rule),
        _b("negative-extend-padded", _meta([4, 6, 3], [2, -1, 1], 6, padded_bs=4),
           match=r"^extend_lens must be non-negative", rule=rule),
        _b("negative-prefix", _meta([4, -6, 3], [2, 1, 1], 4), match=r"^prefix_lens must be non-negative", rule=rule),
    ]


def _pad(lens, tier, padded_bs):
    return lambda device: to_device(device, verify_lens=torch.tensor(lens, dtype=torch.int32), tier=tier,
                                    padded_bs=padded_bs)


def pad_bad_values() -> list[BadValueSample]:
    rule = "§10.5"
    return [
        _b("tier-below-sum", _pad([4, 4, 2], 6, 5), match=r"^tier \(6\) is too small for sum\(verify_lens\) = 10",
           rule=rule),
        _b("tier-below-sum-no-pad-rows", _pad([4, 4, 2], 6, 3), match=r"^tier \(6\) is too small", rule=rule),
        _b("negative-len", _pad([3, -2, 1], 8, 4), match=r"^verify_lens must be non-negative", rule=rule),
        _b("negative-len-no-pad-rows", _pad([-5, 2], 1, 2), match=r"^verify_lens must be non-negative", rule=rule),
    ]


def _prefill(prefix, ext):
    return lambda device: to_device(device, req_pool_indices=_i64([3, 5, 7][:len(prefix)]), prefix_lens=_i64(prefix),
                                    extend_lens=_i64(ext))


def prefill_bad_values() -> list[BadValueSample]:
    rule = "§10.6"
    return [
        _b("negative-prefix", _prefill([-3, 2], [2, 1]), match=r"^prefix_lens must be non-negative", rule=rule),
        _b("negative-extend", _prefill([1, 4, 0], [2, -1, 3]), match=r"^extend_lens must be non-negative", rule=rule),
    ]


# ---------------------------------------------------------------- top-k / top-p
def _bad_probs(seed: int) -> torch.Tensor:
    """Row 0: NaN and negative entries among valid ones (a NaN where the largest would be); row 1: no
    positive mass (NaN, negatives, zeros, -0.0); row 2: valid; row 3: -0.0 beside subnormal positives."""
    p = torch.rand(4, 40, generator=generator(seed))
    p[0, [0, 7, 19]] = float("nan")
    p[0, [3, 25]] = torch.tensor([-0.5, -1e30])
    p[0, 11] = 5.0
    p[1] = torch.tensor([float("nan"), -1.0, 0.0, -0.0] * 10)
    p[3, :20] = -0.0
    p[3, 20:] = 2.0 ** -140 * (1 + torch.arange(20.0))
    return p


def _inf_probs(seed: int) -> torch.Tensor:
    """Row 0: +inf where the largest entry would be, beside valid ones; row 1: only +inf and zeros (no
    finite positive mass: all zeros out); row 2: -inf and +inf among valid entries; row 3: valid."""
    p = torch.rand(4, 40, generator=generator(seed))
    p[0, [2, 30]] = float("inf")
    p[1] = torch.tensor([float("inf"), 0.0] * 20)
    p[2, [1, 9]] = torch.tensor([float("-inf"), float("inf")])
    return p


def topk_bad_values() -> list[BadValueSample]:
    rule = "§10.7"
    return [
        _b("nan-and-negative-entries", lambda device: to_device(device, probs=_bad_probs(231),
                                                                k=torch.tensor([3, 5, 7, 30])),
           match=r"^probs must be", rule=rule),
        _b("nan-entries-scalar-k", lambda device: to_device(device, probs=_bad_probs(232), k=4),
           match=r"^probs must be", rule=rule),
        _b("inf-entries-count-as-zero", lambda device: to_device(device, probs=_inf_probs(233),
                                                                 k=torch.tensor([1, 2, 5, 40])),
           match=r"^probs must be finite", rule=rule),
    ]


def topp_bad_values() -> list[BadValueSample]:
    rule = "§10.7"
    nan = float("nan")
    valid = lambda seed: torch.rand(3, 24, generator=generator(seed))  # noqa: E731
    return [
        _b("nan-and-negative-entries", lambda device: to_device(device, probs=_bad_probs(241),
                                                                p=torch.tensor([0.5, 0.9, 0.7, 0.3])),
           match=r"^probs must be", rule=rule),
        _b("nan-entries-scalar-p", lambda device: to_device(device, probs=_bad_probs(242), p=0.6),
           match=r"^probs must be", rule=rule),
        _b("inf-entries-count-as-zero", lambda device: to_device(device, probs=_inf_probs(244),
                                                                 p=torch.tensor([0.9, 0.5, 0.95, 0.3])),
           match=r"^probs must be finite", rule=rule),
        _b("nan-p-keeps-every-positive-entry", lambda device: to_device(device, probs=valid(243),
                                                                        p=torch.tensor([0.5, nan, 0.2])),
           match=r"^p must not hold NaN", rule=rule),
    ]
