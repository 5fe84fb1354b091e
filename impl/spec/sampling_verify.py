"""Sampling verify: chain rejection sampling that preserves the target distribution (docs/design.md §6).

Both distributions are made the same way, row by row: temperature -> softmax ->
top-k -> top-p (:func:`sampling_probs`, the renorm ops of docs/design.md §3.9). Then, for
request r with drafts x_0..x_{g-1} drawn from q_0..q_{g-1}:

* draft i is accepted with probability ``min(1, p_i(x_i) / q_i(x_i))``
  (drawn as ``u_i * q_i(x_i) < p_i(x_i)``, u_i ~ U[0, 1)), stopping at the first rejection;
* at the first rejection j the replacement is drawn from ``max(0, p_j - q_j)``
  renormalised (if that has no mass, p_j == q_j on the support and rejection had
  probability 0; we fall back to p_j);
* if every draft is accepted, a bonus token is drawn from p_g.

A ragged ``verify_lens`` caps the accepted drafts at ``verify_len - 1``; a
capped request draws its bonus from the p of its last verified row.
Randomness comes from one ``torch.Generator``; draws are made with static
shapes (uniforms + inverse CDF), so there is no host sync.
"""
from __future__ import annotations

import torch

from impl.spec.greedy_verify import VerifyResult, accept_prefix_len, check_verify_inputs
from impl.step_timing import section
from impl.validation import check_tensor


def _per_row(value, bs: int, rows: int, dtype: torch.dtype, device) -> torch.Tensor | int | float:
    """A per-request parameter (scalar or [bs] tensor) repeated over ``rows`` rows per request."""
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype).view(bs, 1).expand(bs, rows).reshape(bs * rows).contiguous()
    return value


def sampling_probs(
    logits: torch.Tensor,
    *,
    temperature: float | torch.Tensor = 1.0,
    top_k: int | torch.Tensor | None = None,
    top_p: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """``[bs, R, V]`` logits -> fp32 probabilities: temperature, softmax, top-k, top-p.

    temperature / top_k / top_p: a scalar or one value per request (``[bs]``).
    Temperature must be > 0 (use greedy verify for temperature 0).
    """
    from impl.kernels import top_k_renorm, top_p_renorm

    check_tensor("logits", logits, ndim=3, contiguous=False)
    bs, rows, vocab = logits.shape
    if isinstance(temperature, torch.Tensor):
        check_tensor("temperature", temperature, shape=[bs], contiguous=False)
        temp = temperature.to(device=logits.device, dtype=torch.float32).view(bs, 1, 1)
    else:
        if not float(temperature) > 0:
            raise ValueError("temperature must be > 0 for sampling verify (use greedy verify for 0), "
                             f"got {temperature}")
        temp = float(temperature)
    with section("renorm"):  # per-step timing, impl.step_timing (a no-op unless a timer is active)
        probs = torch.softmax(logits.float() / temp, dim=-1).reshape(bs * rows, vocab).contiguous()
        if top_k is not None:
            probs = top_k_renorm(probs, _per_row(top_k, bs, rows, torch.int64, logits.device))
        if top_p is not None:
            probs = top_p_renorm(probs, _per_row(top_p, bs, rows, torch.float32, logits.device))
    return probs.view(bs, rows, vocab)


def sample_from(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw per row of ``probs [N, V]`` with uniforms ``u [N]`` in [0, 1).

    Never returns a zero-probability entry: the pick is the first index whose
    cumulative mass exceeds ``u * total``.
    """
    cdf = probs.double().cumsum(dim=-1)
    threshold = (u.double() * cdf[:, -1]).unsqueeze(1)
    return (cdf <= threshold).sum(dim=1).clamp(max=probs.shape[1] - 1)


def sampling_verify_probs(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    *,
    prefix_lens: torch.Tensor,
    generator: torch.Generator | None = None,
    verify_lens: torch.Tensor | None = None,
) -> VerifyResult:
    """Chain rejection sampling on prepared distributions.

    target_probs ``[bs, gamma+1, V]`` (p_0..p_gamma), draft_probs ``[bs, gamma, V]``
    (q_i, the distribution draft i was drawn from), draft_tokens ``[bs, gamma]``.
    """
    bs, gamma = check_verify_inputs(target_probs, draft_tokens, prefix_lens, verify_lens)
    check_tensor("target_probs", target_probs, ndim=3, contiguous=False)
    vocab = target_probs.shape[2]
    check_tensor("draft_probs", draft_probs, ndim=3, shape=[bs, gamma, vocab], contiguous=False)
    device = target_probs.device
    p = target_probs.double()
    q = draft_probs.double()
    x = draft_tokens.to(torch.int64)
    # one generator stream, fixed order: acceptance uniforms, then the final draw
    u_accept = torch.rand((bs, gamma), generator=generator, device=device, dtype=torch.float64)
    u_final = torch.rand((bs,), generator=generator, device=device, dtype=torch.float64)

    p_x = p[:, :gamma].gather(2, x.unsqueeze(2)).squeeze(2)
    q_x = q.gather(2, x.unsqueeze(2)).squeeze(2)
    accepted = u_accept * q_x < p_x  # P = min(1, p/q)
    cap = torch.full((bs,), gamma, dtype=torch.int64, device=device)
    if verify_lens is not None:
        cap = (verify_lens.to(torch.int64) - 1).clamp(0, gamma)
        accepted = accepted & (torch.arange(gamma, device=device).view(1, -1) < cap.view(-1, 1))
    correct_len = accept_prefix_len(accepted)

    # the distribution of the final token: residual at a rejection, p at the cap
    j = correct_len.view(bs, 1, 1).expand(bs, 1, vocab)
    p_j = p.gather(1, j).squeeze(1)
    q_pad = torch.cat([q, torch.zeros((bs, 1, vocab), dtype=q.dtype, device=device)], dim=1)
    q_j = q_pad.gather(1, j).squeeze(1)
    residual = (p_j - q_j).clamp(min=0)
    has_mass = residual.sum(dim=1, keepdim=True) > 0
    rejected = (correct_len < cap).view(bs, 1)
    final = torch.where(rejected & has_mass, residual, p_j)
    bonus = sample_from(final, u_final)
    return VerifyResult.commit(draft_tokens, correct_len, bonus, prefix_lens)


def sampling_verify(
    target_logits: torch.Tensor,
    draft_logits: torch.Tensor,
    draft_tokens: torch.Tensor,
    *,
    prefix_lens: torch.Tensor,
    temperature: float | torch.Tensor = 1.0,
    top_k: int | torch.Tensor | None = None,
    top_p: float | torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    verify_lens: torch.Tensor | None = None,
) -> VerifyResult:
    """Sampling verify from logits: ``target_logits [bs, gamma+1, V]``, ``draft_logits
    [bs, gamma, V]``; both pass the same temperature/top-k/top-p (see module docstring)."""
    kw = dict(temperature=temperature, top_k=top_k, top_p=top_p)
    return sampling_verify_probs(
        sampling_probs(target_logits, **kw),
        sampling_probs(draft_logits, **kw),
        draft_tokens,
        prefix_lens=prefix_lens,
        generator=generator,
        verify_lens=verify_lens,
    )
