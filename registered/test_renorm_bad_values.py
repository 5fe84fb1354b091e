"""top_k / top_p renorm on out-of-contract values, and the two top-p semantics users ask about.

Decided once, the same on the Triton kernels, the torch backend and the oracle (reference/):
NaN and negative entries weigh 0 and are never kept; a row with no positive mass returns
zeros; a NaN in a tensor p means 1 (every positive entry kept); p is clamped to [0, 1].
Check mode refuses such inputs with a ValueError naming the argument.

Semantics: top-p measures the dropped (1 - p) share relative to the row's own mass (a row
summing to 0.5 behaves like the same row scaled to 1), and at an exact cumulative-mass
boundary the entry that reaches it survives: one level more than the minimal nucleus
(FlashInfer's kernel keeps the largest entries until their mass reaches p, and stops).
"""
from __future__ import annotations

import math

import pytest
import torch

import impl.kernels as K
import reference as R
from ci.registration import register
from impl.platform import default_device
from impl.validation import check_mode
from impl.testing.op_table import RENORM, mismatch

DEV = default_device()
NAN = float("nan")
INF = float("inf")
BACKENDS = ["default", "torch"]


def _backend(monkeypatch, backend: str) -> None:
    if backend == "torch":
        monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    else:
        monkeypatch.delenv("DSPARK_KERNEL_BACKEND", raising=False)


def _bad_rows() -> torch.Tensor:
    """Row 0: NaN and negative entries among valid ones (a NaN where the largest would be);
    row 1: no positive mass (NaN, negatives, zeros); row 2: valid; row 3: -0.0 and tiny values."""
    g = torch.Generator().manual_seed(11)
    p = torch.rand(4, 40, generator=g)
    p[0, [0, 7, 19]] = NAN
    p[0, [3, 25]] = torch.tensor([-0.5, -1e30])
    p[0, 11] = 5.0  # the largest valid entry
    p[1] = torch.tensor([NAN, -1.0, 0.0, -0.0] * 10)
    p[3, :20] = -0.0
    p[3, 20:] = 2.0 ** -140 * (1 + torch.arange(20.0))  # subnormal, positive
    return p


def _assert_bad_values_obeyed(out: torch.Tensor, probs: torch.Tensor) -> None:
    out, probs = out.cpu(), probs.cpu()
    assert not out.isnan().any(), "NaN leaked into the output"
    assert (out[~(probs > 0)] == 0).all(), "a NaN, negative or zero entry was kept"
    assert (out[1] == 0).all(), "a row without positive mass must come out all zeros"
    live = out.sum(-1)[[0, 2, 3]].double()
    assert torch.allclose(live, torch.ones_like(live), atol=1e-5), f"rows with mass must sum to 1: {live}"


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=10)
@pytest.mark.parametrize("backend", BACKENDS)
def test_top_k_treats_nan_and_negative_entries_as_zero(monkeypatch, backend):
    _backend(monkeypatch, backend)
    probs, k = _bad_rows(), torch.tensor([3, 5, 7, 30])
    with check_mode(False):
        got = K.top_k_renorm(probs.to(DEV), k.to(DEV))
    _assert_bad_values_obeyed(got, probs)
    assert got[0, 11] > 0, "the largest valid entry must survive, whatever NaN sits beside it"
    problem = mismatch(RENORM, got, R.top_k_renorm(probs, k))
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=10)
@pytest.mark.parametrize("backend", BACKENDS)
def test_top_p_treats_nan_entries_and_nan_p_as_decided(monkeypatch, backend):
    _backend(monkeypatch, backend)
    probs = _bad_rows()
    p = torch.tensor([0.5, 0.9, NAN, 1.7])  # row 2: NaN p keeps every positive entry; row 3: clamped to 1
    with check_mode(False):
        got = K.top_p_renorm(probs.to(DEV), p.to(DEV))
    _assert_bad_values_obeyed(got, probs)
    assert (got[2] > 0).all() and (got[3, 20:] > 0).all(), "p = NaN and p > 1 keep every positive entry"
    problem = mismatch(RENORM, got, R.top_p_renorm(probs, p))
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["top_k", "top_p"])
def test_check_mode_names_the_bad_argument(monkeypatch, backend, op):
    _backend(monkeypatch, backend)
    probs = torch.rand(2, 16, device=DEV)
    fn = K.top_k_renorm if op == "top_k" else K.top_p_renorm
    param = 3 if op == "top_k" else 0.5
    for bad, named in ((NAN, "NaN"), (-0.25, "negative"), (INF, r"\+inf"), (-INF, "-inf")):
        poisoned = probs.clone()
        poisoned[1, 5] = bad
        message = rf"^probs must be finite and non-negative, found {named}"
        with check_mode(True), pytest.raises(ValueError, match=message):
            fn(poisoned, param)
    if op == "top_p":
        with check_mode(True), pytest.raises(ValueError, match=r"^p must not hold NaN"):
            fn(probs, torch.tensor([0.5, NAN], device=DEV))
        with check_mode(True):  # out-of-range p stays clamped (documented), not an error
            assert fn(probs, torch.tensor([-1.0, 2.0], device=DEV)).shape == probs.shape


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=5)
@pytest.mark.parametrize("backend", BACKENDS)
def test_top_p_measures_the_dropped_share_relative_to_the_row_mass(monkeypatch, backend):
    """A row summing to 0.5 drops (1 - p) of ITS mass: the same kept set as the row scaled to 1.
    Read as an absolute 1 - p = 0.4, the row below would drop 0.1875 and 0.3125 and keep one
    entry; relative to its mass it drops 0.4 * 0.5 = 0.2 worth and keeps two."""
    _backend(monkeypatch, backend)
    half = torch.tensor([[0.25, 0.15625, 0.09375, 0.0]])  # exact binary fractions, sum 0.5
    p = torch.tensor([0.6])
    got_half = K.top_p_renorm(half.to(DEV), p.to(DEV)).cpu()
    got_one = K.top_p_renorm((2 * half).to(DEV), p.to(DEV)).cpu()
    assert (got_half > 0).tolist() == [[True, True, False, False]]
    assert torch.equal(got_half, got_one), "scaling a row must not change its renormalised result"
    for got, row in ((got_half, half), (got_one, 2 * half)):
        problem = mismatch(RENORM, got, R.top_p_renorm(row, p))
        assert problem is None, problem


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=5)
@pytest.mark.parametrize("backend", BACKENDS)
def test_top_p_keeps_the_entry_that_reaches_an_exact_boundary(monkeypatch, backend):
    """Cumulative mass hits the target exactly: the ascending entries 0.0625 + 0.1875 make exactly
    1 - p = 0.25. The pivot is the entry whose inclusive cumulative mass reaches the target, so
    0.1875 survives: 3 entries kept, where the minimal nucleus (0.5 + 0.25 = p already) keeps 2."""
    _backend(monkeypatch, backend)
    probs = torch.tensor([[0.5, 0.0625, 0.25, 0.1875]])
    p = 0.75
    got = K.top_p_renorm(probs.to(DEV), torch.tensor([p], device=DEV)).cpu()
    assert (got > 0).tolist() == [[True, False, True, True]]
    minimal_nucleus = 0
    mass = 0.0
    for x in sorted(probs[0].tolist(), reverse=True):
        minimal_nucleus += 1
        mass += x
        if mass >= p:
            break
    assert minimal_nucleus == 2 and int((got > 0).sum()) == minimal_nucleus + 1
    assert math.isclose(float(got.sum()), 1.0, rel_tol=1e-6)
    problem = mismatch(RENORM, got, R.top_p_renorm(probs, torch.tensor([p])))
    assert problem is None, problem


def _inf_rows() -> torch.Tensor:
    """Row 0: +inf where the largest entry would be, beside valid entries; row 1: +inf and -inf
    beside one valid entry; row 2: only +inf and zeros (no positive finite mass); row 3: valid."""
    g = torch.Generator().manual_seed(12)
    p = torch.rand(4, 40, generator=g)
    p[0, [2, 30]] = INF
    p[0, 11] = 5.0
    p[1] = 0.0
    p[1, [4, 9]] = torch.tensor([INF, -INF])
    p[1, 17] = 0.25
    p[2] = 0.0
    p[2, [0, 39]] = INF
    return p


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=10)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["top_k", "top_p"])
def test_inf_entries_weigh_zero_and_never_give_nan(monkeypatch, backend, op):
    """docs/design.md §10.7: an entry that is +inf counts as probability 0, like NaN and negatives:
    never kept, output 0, the rest renormalised; a row whose only positive entries are +inf comes
    back all zeros. The oracle, the torch backend and Triton agree; nothing is NaN."""
    _backend(monkeypatch, backend)
    probs = _inf_rows()
    fn, ref = (K.top_k_renorm, R.top_k_renorm) if op == "top_k" else (K.top_p_renorm, R.top_p_renorm)
    param = torch.tensor([3, 2, 5, 7]) if op == "top_k" else torch.tensor([0.5, 0.9, 0.9, 0.7])
    want = ref(probs, param)
    with check_mode(False):
        got = fn(probs.to(DEV), param.to(DEV)).cpu()
    for out, who in ((got, "impl"), (want, "oracle")):
        assert not out.isnan().any(), f"{who}: NaN in the output"
        assert (out[probs.isinf()] == 0).all(), f"{who}: an inf entry was kept"
        assert out[0, 11] > 0 and out[1, 17] == 1.0, f"{who}: the valid entries must carry the mass"
        assert (out[2] == 0).all(), f"{who}: a row with only inf entries has no mass: zeros"
    problem = mismatch(RENORM, got, want)
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=10)
@pytest.mark.parametrize("backend", BACKENDS)
def test_p_means_its_nearest_fp32_value_whatever_its_type(monkeypatch, backend):
    """docs/design.md §3.9: p is rounded to fp32 once, first. On [0.1, 0, 0.5, 0.4] with p = 0.9 the
    dropped mass (1 - fp32(0.9)) x the row's mass lies just above fp32(0.1), so 0.1 goes; read in fp64,
    (1 - 0.9) x the mass lies just below it and 0.1 would stay. A Python float, an fp32 and an fp64
    tensor must all drop it, on every backend and in the oracle. Then p's just around the boundary:
    fp32(0.9) +- one fp32 step, and an fp64 p one fp64 step off 0.9 (the same fp32 value)."""
    _backend(monkeypatch, backend)
    probs = torch.tensor([[0.1, 0.0, 0.5, 0.4]])
    forms = {"float": 0.9, "fp32": torch.tensor([0.9]), "fp64": torch.tensor([0.9], dtype=torch.float64)}
    for name, p in forms.items():
        got = K.top_p_renorm(probs.to(DEV), p.to(DEV) if isinstance(p, torch.Tensor) else p).cpu()
        assert (got > 0).tolist() == [[False, False, True, True]], f"p as {name}: {got.tolist()}"
        problem = mismatch(RENORM, got, R.top_p_renorm(probs, p))
        assert problem is None, f"p as {name}: {problem}"
    p32 = torch.tensor(0.9)
    below, above = float(torch.nextafter(p32, torch.tensor(0.0))), float(torch.nextafter(p32, torch.tensor(1.0)))
    near = {below: [False, False, True, True], above: [True, False, True, True],
            math.nextafter(0.9, 1.0): [False, False, True, True], math.nextafter(0.9, 0.0): [False, False, True, True]}
    for value, kept in near.items():
        for p in (value, torch.tensor([value], dtype=torch.float64)):
            got = K.top_p_renorm(probs.to(DEV), p.to(DEV) if isinstance(p, torch.Tensor) else p).cpu()
            assert (got > 0).tolist() == [kept], f"p = {value!r} ({type(p).__name__}): {got.tolist()}"
            problem = mismatch(RENORM, got, R.top_p_renorm(probs, p))
            assert problem is None, f"p = {value!r}: {problem}"
