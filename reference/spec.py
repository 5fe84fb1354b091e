"""Oracles for the DSpark / MTP components (docs/design.md §6), in loops and float64.

* ``greedy_verify``: walk the drafts one by one.
* ``sampling_probs``: temperature, softmax (float64), then the top-k / top-p oracles.
* ``sampling_output_distribution``: the EXACT distribution of the tokens one
  sampling-verify step emits, by enumerating every draft sequence, for a small vocab.
* ``inject_prefill`` / ``inject_verify``: the injector's skip rules applied token by token
  to a :class:`reference.pools.DictPool`.
"""
from __future__ import annotations

import itertools

import torch

from reference.ops_sampling import top_k_renorm, top_p_renorm


# ---- greedy verify ----
def greedy_verify(target_ids, draft_tokens, prefix_lens, verify_lens=None):
    """Returns lists: correct_len, commit_len, bonus, output_tokens (rows padded with -1), new_seq_lens."""
    out = {k: [] for k in ("correct_len", "commit_len", "bonus", "output_tokens", "new_seq_lens")}
    for r in range(len(draft_tokens)):
        gamma = len(draft_tokens[r])
        cap = gamma if verify_lens is None else min(gamma, int(verify_lens[r]) - 1)
        correct = 0
        while correct < cap and int(draft_tokens[r][correct]) == int(target_ids[r][correct]):
            correct += 1
        bonus = int(target_ids[r][correct])
        tokens = [int(t) for t in draft_tokens[r][:correct]] + [bonus]
        out["correct_len"].append(correct)
        out["commit_len"].append(correct + 1)
        out["bonus"].append(bonus)
        out["output_tokens"].append(tokens + [-1] * (gamma + 1 - len(tokens)))
        out["new_seq_lens"].append(int(prefix_lens[r]) + correct + 1)
    return out


# ---- sampling verify ----
def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """``[R, V]`` logits -> float32 probabilities through the oracles, per row."""
    probs = torch.softmax(logits.double() / float(temperature), dim=-1).float()
    if top_k is not None:
        probs = top_k_renorm(probs, top_k)
    if top_p is not None:
        probs = top_p_renorm(probs, top_p)
    return probs


def _residual(p_row, q_row):
    diff = [max(0.0, a - b) for a, b in zip(p_row, q_row)]
    mass = sum(diff)
    return [d / mass for d in diff] if mass > 0 else list(p_row)


def sampling_output_distribution(p, q, cap=None):
    """Exact distribution of the emitted token tuple for one request.

    p: ``[gamma+1][V]`` target distributions, q: ``[gamma][V]`` draft distributions
    (draft i ~ q[i] independently). Returns {tuple(emitted tokens): probability}.
    """
    p = [[float(x) for x in row] for row in p]
    q = [[float(x) for x in row] for row in q]
    gamma, vocab = len(q), len(p[0])
    cap = gamma if cap is None else cap
    dist: dict[tuple[int, ...], float] = {}

    def add(key, mass):
        dist[key] = dist.get(key, 0.0) + mass

    for drafts in itertools.product(range(vocab), repeat=cap):
        mass = 1.0
        for i, x in enumerate(drafts):
            mass *= q[i][x]
        if mass == 0.0:
            continue
        alive = mass  # probability of reaching step i with all previous drafts accepted
        for i, x in enumerate(drafts):
            accept = 1.0 if p[i][x] >= q[i][x] else p[i][x] / q[i][x]
            reject = alive * (1.0 - accept)
            if reject > 0:
                for y, w in enumerate(_residual(p[i], q[i])):
                    if w > 0:
                        add(tuple(drafts[:i]) + (y,), reject * w)
            alive *= accept
        for y, w in enumerate(p[cap]):
            if w > 0:
                add(tuple(drafts) + (y,), alive * w)
    return dist


# ---- injector ----
def inject_prefill(pool, layers, kv_rows, positions, state_slot, final_pos, *, norm_weights, eps, cos, sin):
    """Write each token unless ``pos <= final_pos - window``; returns the written (slot, pos) list."""
    written = []
    for i in range(len(positions)):
        pos, slot, last = int(positions[i]), int(state_slot[i]), int(final_pos[i])
        if pos <= last - pool.window:
            continue
        for li, layer in enumerate(layers):
            pool.write_token(layer, slot, pos, kv_rows[layer][i], norm_weight=norm_weights[li], eps=eps,
                             cos=cos, sin=sin)
        written.append((slot, pos))
    return written


def inject_verify(pool, layers, kv_rows, req_pool_indices, prefix_lens, commit_lens, stride, *,
                  norm_weights, eps, cos, sin):
    """Row r*stride + c is written iff ``c < commit_lens[r]``; returns the written (slot, pos) list."""
    written = []
    for r in range(len(req_pool_indices)):
        for c in range(stride):
            if c >= int(commit_lens[r]):
                continue
            slot, pos = int(req_pool_indices[r]), int(prefix_lens[r]) + c
            for li, layer in enumerate(layers):
                pool.write_token(layer, slot, pos, kv_rows[layer][r * stride + c],
                                 norm_weight=norm_weights[li], eps=eps, cos=cos, sin=sin)
            written.append((slot, pos))
    return written
