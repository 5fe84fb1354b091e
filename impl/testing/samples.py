"""Valid inputs of the op table: one ``<op>_samples(large)`` per op, each a list of named samples.

Each sample builds fresh, seeded inputs on a device; in-place outputs start poisoned
(random bit patterns, NaNs included) so a row the op forgets to write, or writes by
mistake, shows up. ``large=True`` gives GPU-sized samples. Also the ``written_rows``
rules of the two ring writers. Imports torch, reference and impl.testing.op_info only.
"""
from __future__ import annotations

import torch

import reference as R
from impl.testing.op_info import Kwargs, Sample
from reference.bits import int_dtype_of_width


# ---------------------------------------------------------------- input helpers
def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def poison(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Random bit patterns (NaNs and infinities included) in ``dtype``."""
    int_dtype = int_dtype_of_width(dtype)
    size = torch.empty((), dtype=dtype).element_size()
    lo, hi = (0, 256) if size == 1 else (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(int_dtype).view(dtype)


def _rows(t: int, d: int, dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point and torch.empty((), dtype=dtype).element_size() > 1:
        return (torch.randn(t, d, generator=g) * 3).to(dtype)
    return poison((t, d), dtype, g)  # 1-byte dtypes: any byte is a valid payload


def to_device(device, **tensors) -> Kwargs:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in tensors.items()}


def _ring_rows(reqs: list[tuple[int, int, int]], ring: int):
    """(slot, first position, count) per request -> slot/position vectors, one row per token."""
    slots, positions = [], []
    for slot, first, count in reqs:
        slots += [slot] * count
        positions += list(range(first, first + count))
    return torch.tensor(slots, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64)


# ---------------------------------------------------------------- 1. scatter
def _scatter_case(seed, t, d, pages, dtype=torch.bfloat16, skip_frac=0.25, loc_dtype=torch.int64, all_skip=False):
    def make(device):
        g = generator(seed)
        loc = torch.randperm(pages, generator=g)[:t]
        loc[torch.rand(t, generator=g) < skip_frac] = -1
        if all_skip:
            loc[:] = -1
        return to_device(device, kv=_rows(t, d, dtype, g), loc=loc.to(loc_dtype), unified=poison((pages, d), dtype, g))
    return make


def scatter_samples(large: bool) -> list[Sample]:
    t, d, pages = (4096, 512, 40 * 133) if large else (48, 64, 96)
    fp8 = getattr(torch, "float8_e4m3fn", torch.uint8)
    return [
        Sample("random-bf16", _scatter_case(1, t, d, max(pages, t + 8))),
        Sample("random-fp32-int32loc", _scatter_case(2, t // 2, d, pages, torch.float32, loc_dtype=torch.int32)),
        Sample("fp8-raw-bytes", _scatter_case(3, t // 2, d, pages, fp8)),
        Sample("uint8", _scatter_case(4, t // 2, 24, pages, torch.uint8)),
        Sample("int8", _scatter_case(5, t // 2, 24, pages, torch.int8)),
        Sample("odd-width-D40", _scatter_case(6, t // 2, 40, pages)),
        Sample("T0-noop", _scatter_case(7, 0, d, pages)),
        Sample("all-locs-minus-1", _scatter_case(8, t // 2, d, pages, all_skip=True)),
        Sample("every-row-written", _scatter_case(9, pages, d, pages, skip_frac=0.0)),
    ]


def scatter_written(kw: Kwargs) -> set[int]:
    return {int(x) for x in kw["loc"].tolist() if x >= 0}


# ---------------------------------------------------------------- 2. store SWA
def _swa_case(seed, reqs, ring, window, d=32, trim=False, dtype=torch.bfloat16, index_dtype=torch.int64):
    """reqs: (slot, first position, count); with trim, final_pos = the request's last position."""
    def make(device):
        g = generator(seed)
        slot, pos = _ring_rows(reqs, ring)
        pages = (max((r[0] for r in reqs), default=0) + 1) * ring
        kw = dict(kv=_rows(len(pos), d, dtype, g), state_slot=slot.to(index_dtype), positions=pos.to(index_dtype),
                  unified=poison((pages, d), dtype, g), window=window, ring=ring)
        if trim:
            kw["final_pos"] = torch.tensor(sum(([f + c - 1] * c for _, f, c in reqs), []), dtype=index_dtype)
        elif any(c > ring for _, _, c in reqs):
            raise ValueError("without a trim a request may write at most `ring` rows")
        return to_device(device, **kw)
    return make


def swa_samples(large: bool) -> list[Sample]:
    n = 6 if not large else 40
    out = [
        Sample("random-decode", _swa_case(11, [(s, 17 * s + 3, 5) for s in range(n)], 133, 128)),
        Sample("prefill-trim",
               _swa_case(12, [(0, 0, 150), (2, 10, 40), (1, 300, 129), (3, 5, 0)], 133, 128, trim=True)),
        Sample("trim-int32", _swa_case(13, [(0, 7, 70), (1, 0, 3)], 40, 32, trim=True, index_dtype=torch.int32)),
        Sample("T0-noop", _swa_case(14, [(0, 0, 0)], 133, 128)),
    ]
    for ring, window in ((128, 123), (133, 128)):
        for prefix in (127, 128, 255):
            reqs = [(0, prefix, 6), (1, prefix - 3, 6)]
            out.append(Sample(f"wrap-prefix{prefix}-ring{ring}", _swa_case(20 + prefix + ring, reqs, ring, window)))
    out.append(Sample("wrap-trim-ring128", _swa_case(31, [(0, 120, 200), (1, 255, 1)], 128, 123, trim=True)))
    return out


def swa_written(kw: Kwargs) -> set[int]:
    loc = R.unified_inject_loc(kw["positions"].cpu(), kw["state_slot"].cpu(), ring=kw["ring"], window=kw["window"],
                               final_pos=None if kw.get("final_pos") is None else kw["final_pos"].cpu())
    return {int(x) for x in loc.tolist() if x >= 0}


# ---------------------------------------------------------------- 3. norm + RoPE
def _norm_rope_case(seed, shape, rope_dim, max_pos=300, weight_dtype=torch.bfloat16, eps=1e-6):
    def make(device):
        g = generator(seed)
        d = shape[-1]
        positions = torch.randint(0, max_pos, (shape[0],), generator=g)
        if shape[0] >= 2:
            positions[0], positions[1] = 0, max_pos - 1  # both ends of the tables
        angles = torch.rand(max_pos, rope_dim // 2, generator=g, dtype=torch.float64) * 6.3
        return to_device(device, kv=(torch.randn(*shape, generator=g) * 2 + 0.5).bfloat16(),
                   weight=(torch.rand(d, generator=g) + 0.5).to(weight_dtype), eps=eps,
                   cos=angles.cos().float(), sin=angles.sin().float(), positions=positions, rope_dim=rope_dim)
    return make


def norm_rope_samples(large: bool) -> list[Sample]:
    t, d, r = (512, 512, 64) if large else (24, 64, 16)
    return [
        Sample("random-2d", _norm_rope_case(41, (t, d), r)),
        Sample("heads-3d-odd-width", _norm_rope_case(42, (t // 2, 3, 48), 16)),
        Sample("fp32-weight", _norm_rope_case(43, (t // 2, d), r, weight_dtype=torch.float32)),
        Sample("rope-dim-0", _norm_rope_case(44, (8, d), 0)),
        Sample("rope-whole-row", _norm_rope_case(45, (8, 32), 32)),
        Sample("T0-noop", _norm_rope_case(46, (0, d), r)),
    ]


# ---------------------------------------------------------------- 4. commit-inject layout
def _commit_case(seed, prefix, commit, slots=None, stride=6, ring=133):
    def make(device):
        g = generator(seed)
        bs = len(prefix)
        rpi = torch.tensor(slots) if slots is not None else torch.randperm(max(bs, 1) * 2, generator=g)[:bs]
        return to_device(device, req_pool_indices=rpi, prefix_lens=torch.tensor(prefix, dtype=torch.int64),
                   commit_lens=torch.tensor(commit, dtype=torch.int32), stride=stride, ring=ring)
    return make


def commit_samples(large: bool) -> list[Sample]:
    bs = 64 if large else 6
    g = generator(50)
    rand_prefix = torch.randint(0, 1000, (bs,), generator=g).tolist()
    rand_commit = torch.randint(0, 7, (bs,), generator=g).tolist()
    out = [
        Sample("random", _commit_case(51, rand_prefix, rand_commit)),
        Sample("commit-0-and-over-stride", _commit_case(52, [5, 9, 300], [0, 6, 9])),
        Sample("bs0-noop", _commit_case(53, [], [])),
    ]
    for ring in (128, 133):
        out.append(Sample(f"wrap-prefix127-128-255-ring{ring}", _commit_case(54 + ring, [127, 128, 255], [6, 3, 1],
                                                                            slots=[0, 1, 2], ring=ring)))
    return out


# ---------------------------------------------------------------- 5. unified inject loc
def _inject_case(seed, reqs, ring=133, window=128, trim=False, commit=None, index_dtype=torch.int64):
    def make(device):
        slot, pos = _ring_rows(reqs, ring)
        kw = dict(positions=pos.to(index_dtype), state_slot=slot.to(index_dtype), ring=ring, window=window)
        if trim:
            kw["final_pos"] = torch.tensor(sum(([f + c - 1] * c for _, f, c in reqs), []), dtype=index_dtype)
        if commit is not None:
            kw["commit_lens"] = torch.tensor(commit, dtype=torch.int32)
            kw["verify_len"] = reqs[0][2]
        return to_device(device, **kw)
    return make


def inject_samples(large: bool) -> list[Sample]:
    n = 32 if large else 4
    starts = torch.randint(0, 1000, (n,), generator=generator(60)).tolist()
    return [
        Sample("random-plain", _inject_case(61, [(s, starts[s], 6) for s in range(n)])),
        Sample("prefill-trim", _inject_case(62, [(0, 0, 200), (1, 127, 5), (2, 3, 0)], trim=True)),
        Sample("commit-gate", _inject_case(63, [(0, 127, 6), (1, 128, 6), (2, 255, 6)], commit=[0, 3, 9])),
        Sample("trim-and-commit-int32", _inject_case(64, [(0, 250, 4), (1, 0, 4)], 128, 123, trim=True,
                                                     commit=[2, 4], index_dtype=torch.int32)),
        Sample("N0-noop", _inject_case(65, [(0, 0, 0)])),
    ]


# ---------------------------------------------------------------- 6. expand prefill causally
def _expand_case(seed, ext, num_tokens=None, bs=None):
    def make(device):
        g = generator(seed)
        e = torch.tensor(ext, dtype=torch.int64)
        prefix = torch.randint(0, 50, (len(ext),), generator=g)
        rpi = torch.randperm(len(ext) * 3 + 1, generator=g)[: len(ext)].to(torch.int32)
        return to_device(device, seq_lens=(prefix + e).to(torch.int32), extend_lens=e, req_pool_indices=rpi,
                   num_tokens=num_tokens)
    return make


def expand_samples(large: bool) -> list[Sample]:
    g = generator(70)
    ext = torch.randint(0, 40 if large else 9, (64 if large else 5,), generator=g).tolist()
    total = sum(ext)
    return [
        Sample("random-exact-total", _expand_case(71, ext, total)),
        Sample("random-padded", _expand_case(72, ext, total + 7)),
        Sample("zero-length-first-middle-last", _expand_case(73, [0, 3, 0, 2, 0], 9)),
        Sample("all-zero-padded", _expand_case(74, [0, 0], 3)),
        Sample("empty", _expand_case(75, [], 0)),
        Sample("eager-no-num-tokens", _expand_case(76, ext), syncs=1),
        Sample("eager-zero-length", _expand_case(77, [4, 0, 1]), syncs=1),
    ]


# ---------------------------------------------------------------- 7. pad to bucket
def _pad_case(lens, tier, padded_bs):
    return lambda device: to_device(device, verify_lens=torch.tensor(lens, dtype=torch.int32), tier=tier,
                                    padded_bs=padded_bs)


def pad_samples(large: bool) -> list[Sample]:
    g = generator(60)
    lens = torch.randint(1, 7, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).tolist()
    return [
        Sample("random", _pad_case(lens, sum(lens) + int(torch.randint(0, 20, (1,), generator=g)), len(lens) + 3)),
        Sample("pad-rows-with-remainder", _pad_case([3, 6, 1], 24, 7)),
        Sample("no-pad-rows-last-absorbs", _pad_case([3, 6, 1], 24, 3)),
        Sample("exact-fit", _pad_case([6, 6], 12, 4)),
        Sample("bs0-all-pad", _pad_case([], 10, 4)),
        Sample("tier-equals-sum-no-pad", _pad_case([1, 2, 3], 6, 3)),
    ]


# ---------------------------------------------------------------- 8. prefill inject meta
def _prefill_case(seed, ext):
    def make(device):
        g = generator(seed)
        return to_device(device, req_pool_indices=torch.randperm(len(ext) * 2 + 1, generator=g)[: len(ext)],
                   prefix_lens=torch.randint(0, 300, (len(ext),), generator=g),
                   extend_lens=torch.tensor(ext, dtype=torch.int32))
    return make


def prefill_samples(large: bool) -> list[Sample]:
    g = generator(80)
    ext = torch.randint(0, 200 if large else 12, (16 if large else 5,), generator=g).tolist()
    return [
        Sample("random", _prefill_case(81, ext)),
        Sample("zero-length-requests", _prefill_case(82, [0, 4, 0, 0, 2, 0])),
        Sample("empty", _prefill_case(83, [])),
    ]


# ---------------------------------------------------------------- 8b. per-token metadata (one launch)
def _token_meta_case(seed, ext, num_tokens, padded_bs=None, dtype=torch.int64):
    """``ext``: per-request lens (a list) or an int (the uniform verify layout); ``num_tokens`` rows."""
    def make(device):
        g = generator(seed)
        bs = len(ext) if isinstance(ext, list) else ext[1]
        e = torch.tensor(ext, dtype=dtype) if isinstance(ext, list) else ext[0]
        prefix = torch.randint(0, 4000, (bs,), generator=g).to(dtype)
        rpi = torch.randperm(3 * bs + 1, generator=g)[:bs].to(torch.int32)
        return to_device(device, prefix_lens=prefix, extend_lens=e, req_pool_indices=rpi, window=128,
                         num_tokens=num_tokens, padded_bs=padded_bs)
    return make


def token_meta_samples(large: bool) -> list[Sample]:
    g = generator(80)
    bs = 256 if large else 70  # 70: two batch chunks of the kernel's loop, the second partial
    ext = torch.randint(0, 7, (bs,), generator=g).tolist()
    total = sum(ext)
    return [
        Sample("random-ragged-exact", _token_meta_case(81, ext, total)),
        Sample("random-ragged-exact-int32", _token_meta_case(82, ext, total, dtype=torch.int32)),
        Sample("uniform-int-rows", _token_meta_case(83, (6, bs), 6 * bs)),
        Sample("uniform-one-request", _token_meta_case(84, (4, 1), 4)),
        Sample("random-graph-padded-rows", _token_meta_case(85, ext, total + 37, padded_bs=bs + 5)),
        Sample("graph-no-pad-rows-last-absorbs", _token_meta_case(86, ext, total + 9, padded_bs=bs)),
        Sample("graph-exact-fit", _token_meta_case(87, [3, 0, 2], 5, padded_bs=4)),
        Sample("zero-length-first-middle-last", _token_meta_case(88, [0, 3, 0, 2, 0], 5)),
        Sample("all-zero-padded", _token_meta_case(89, [0, 0], 3, padded_bs=2)),
        Sample("all-zero-no-rows", _token_meta_case(90, [0, 0, 0], 0)),
    ]


# ---------------------------------------------------------------- 9. top-k / top-p
def _probs(seed, bs, vocab, kind, g=None):
    g = g or generator(seed)
    if kind == "ties":  # dyadic values from a small set: many exact ties, exact sums
        p = torch.randint(0, 5, (bs, vocab), generator=g).float() / 256
    else:
        p = torch.rand(bs, vocab, generator=g) ** 3  # skewed, like real distributions
        p[:, : vocab // 8] = 0.0  # exact zeros too
    if bs > 1 and kind != "ties":
        p[1] = 0.0  # a zero-mass row
    return p / p.sum(-1, keepdim=True).clamp_min(1e-30)


def _renorm_case(seed, bs, vocab, name, param, kind="random"):
    """name: "k" or "p"; param: a scalar, or ``param(generator, bs)`` -> per-row tensor."""
    def make(device):
        g = generator(seed)
        probs = _probs(seed, bs, vocab, kind, g)
        return to_device(device, probs=probs, **{name: param(g, bs) if callable(param) else param})
    return make


def topk_samples(large: bool) -> list[Sample]:
    bs, v = (16, 4096) if large else (6, 64)
    return [
        Sample("random-per-row-k", _renorm_case(91, bs, v, "k", lambda g, b: torch.randint(1, v, (b,), generator=g))),
        Sample("ties-at-pivot", _renorm_case(92, bs, v, "k", lambda g, b: torch.randint(1, v, (b,), generator=g).int(),
                                             "ties")),
        Sample("k1-scalar", _renorm_case(93, bs, v, "k", 1)),
        Sample("k-ge-V-and-clamped", _renorm_case(94, 4, v, "k", lambda g, b: torch.tensor([v, v + 5, 0, -3][:b]))),
        Sample("k-huge-scalar", _renorm_case(95, bs, v, "k", 10**12)),
        Sample("odd-vocab", _renorm_case(96, bs, 37, "k", lambda g, b: torch.randint(1, 40, (b,), generator=g))),
        Sample("vocab-over-one-block", _renorm_case(97, 2, 4100, "k", lambda g, b: torch.tensor([1, 3000][:b]))),
    ]


def topp_samples(large: bool) -> list[Sample]:
    bs, v = (16, 4096) if large else (6, 64)
    return [
        Sample("random-per-row-p", _renorm_case(101, bs, v, "p", lambda g, b: torch.rand(b, generator=g))),
        Sample("ties-at-pivot", _renorm_case(102, bs, v, "p",
                                             lambda g, b: torch.tensor([0.5, 0.25, 0.75, 0.125, 0.0, 1.0] * 3)[:b],
                                             "ties")),
        Sample("p1-noop", _renorm_case(103, bs, v, "p", 1.0)),
        Sample("p0-keeps-max", _renorm_case(104, bs, v, "p", 0.0)),
        Sample("p-clamped-and-fp64", _renorm_case(105, 4, v, "p", lambda g, b: torch.tensor([-0.5, 1.5, 0.3, 0.9],
                                                                                        dtype=torch.float64)[:b])),
        Sample("scalar-p", _renorm_case(106, bs, v, "p", 0.9)),
        Sample("odd-vocab", _renorm_case(107, bs, 37, "p", lambda g, b: torch.rand(b, generator=g))),
        Sample("vocab-over-one-block", _renorm_case(108, 2, 4100, "p", lambda g, b: torch.tensor([0.3, 0.99][:b]))),
        *_p_precision_samples(),
    ]


def _p_precision_samples() -> list[Sample]:
    """docs/design.md §3.9: p means its nearest fp32 value, whatever its type. On [0.1, 0, 0.5, 0.4],
    p = 0.9 drops 0.1 as fp32 but would keep it in fp64: a float, an fp32 and an fp64 tensor must all
    drop it. Rows 2-3 sit one fp32 step either side of that boundary; row 4 hits an exact boundary
    (0.125 reaches (1 - 0.875) x the mass and survives)."""
    row = [0.1, 0.0, 0.5, 0.4]
    p32 = torch.tensor(0.9)
    below = float(torch.nextafter(p32, torch.tensor(0.0)))
    above = float(torch.nextafter(p32, torch.tensor(1.0)))
    rows = torch.tensor([row, row, row, row, [0.5, 0.375, 0.125, 0.0]])
    per_row = [0.9, 0.9, below, above, 0.875]

    def case(p):
        return lambda device: to_device(device, probs=rows[:1] if not isinstance(p, torch.Tensor) else rows, p=p)
    return [
        Sample("p-fp32-boundary-float", case(0.9)),
        Sample("p-fp32-boundary-fp32", case(torch.tensor(per_row))),
        Sample("p-fp32-boundary-fp64", case(torch.tensor(per_row, dtype=torch.float64))),
        Sample("p-exact-boundary-float", lambda device: to_device(device, probs=rows[4:], p=0.875)),
    ]
