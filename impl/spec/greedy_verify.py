"""Greedy verify (docs/design.md §6): accept the longest draft prefix that matches the target's argmax.

The target scores ``stride = gamma + 1`` rows per request (the anchor and the
gamma drafts). Row j's argmax is the target's choice for the token after the
j-th verified token, so draft j is correct iff it equals ``target_ids[:, j]``.

    correct_len = longest prefix of drafts matching the target   (<= verify_len - 1 when ragged)
    bonus       = target_ids[correct_len]
    commit_len  = correct_len + 1
    new_seq_len = prefix_len + commit_len

Everything is tensor math with static shapes: no host sync, graph safe.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from impl.validation import INDEX_DTYPES, check_same_device, check_tensor

REJECTED = -1  # fill value of ``output_tokens`` past the committed tokens


@dataclass(frozen=True)
class VerifyResult:
    """Per request: ``correct_len`` accepted drafts, ``commit_len = correct_len + 1`` tokens
    committed, ``bonus`` the target's token after them, ``output_tokens [bs, stride]`` the
    committed tokens (accepted drafts then bonus) padded with -1, ``new_seq_lens``."""

    correct_len: torch.Tensor
    commit_len: torch.Tensor
    bonus: torch.Tensor
    output_tokens: torch.Tensor
    new_seq_lens: torch.Tensor

    @classmethod
    def commit(cls, draft_tokens, correct_len, bonus, prefix_lens) -> "VerifyResult":
        """The commit contract shared by greedy and sampling verify: commit_len = correct_len + 1."""
        commit_len = correct_len + 1
        return cls(
            correct_len=correct_len,
            commit_len=commit_len,
            bonus=bonus,
            output_tokens=assemble_output(draft_tokens, correct_len, bonus),
            new_seq_lens=prefix_lens.to(torch.int64) + commit_len,
        )


def accept_prefix_len(accepted: torch.Tensor) -> torch.Tensor:
    """Length of the leading run of True per row of ``accepted [bs, gamma]`` (int64)."""
    return accepted.to(torch.int64).cumprod(dim=1).sum(dim=1)


def assemble_output(drafts: torch.Tensor, correct_len: torch.Tensor, bonus: torch.Tensor) -> torch.Tensor:
    """``[bs, gamma+1]``: drafts[:correct_len], then bonus, then -1."""
    bs, gamma = drafts.shape
    col = torch.arange(gamma + 1, device=drafts.device).view(1, -1)
    padded = torch.cat([drafts.to(torch.int64),
                        torch.full((bs, 1), REJECTED, dtype=torch.int64, device=drafts.device)], 1)
    cl = correct_len.view(-1, 1)
    out = torch.where(col < cl, padded, torch.full_like(padded, REJECTED))
    return torch.where(col == cl, bonus.to(torch.int64).view(-1, 1), out)


def check_verify_inputs(
    target: torch.Tensor, draft_tokens: torch.Tensor, prefix_lens: torch.Tensor, verify_lens: torch.Tensor | None
) -> tuple[int, int]:
    check_tensor("draft_tokens", draft_tokens, dtype=INDEX_DTYPES, ndim=2, contiguous=False)
    bs, gamma = draft_tokens.shape
    if target.shape[0] != bs or target.shape[1] != gamma + 1:
        raise ValueError(
            f"target scores must have {gamma + 1} rows per request (gamma + 1: the anchor and "
            f"{gamma} drafts), i.e. shape [{bs}, {gamma + 1}, ...]; got {list(target.shape)}"
        )
    check_tensor("prefix_lens", prefix_lens, dtype=INDEX_DTYPES, shape=[bs], contiguous=False)
    if verify_lens is not None:
        check_tensor("verify_lens", verify_lens, dtype=INDEX_DTYPES, shape=[bs], contiguous=False)
    check_same_device(target=target, draft_tokens=draft_tokens, prefix_lens=prefix_lens, verify_lens=verify_lens)
    return bs, gamma


def greedy_verify(
    target: torch.Tensor,
    draft_tokens: torch.Tensor,
    *,
    prefix_lens: torch.Tensor,
    verify_lens: torch.Tensor | None = None,
) -> VerifyResult:
    """Greedy verify.

    target: ``[bs, gamma+1]`` target argmax token ids, or ``[bs, gamma+1, V]``
        logits (argmax taken here).
    draft_tokens: ``[bs, gamma]``.
    prefix_lens: ``[bs]`` committed sequence lengths before this step (the
        anchor sits at position ``prefix_len``); ``new_seq_len = prefix + commit``.
    verify_lens: optional ``[bs]`` ragged row counts (1..gamma+1); caps
        ``correct_len <= verify_len - 1``.
    """
    if target.dim() == 3:
        target = target.argmax(dim=-1)
    check_tensor("target", target, dtype=INDEX_DTYPES, ndim=2, contiguous=False)
    bs, gamma = check_verify_inputs(target, draft_tokens, prefix_lens, verify_lens)
    target = target.to(torch.int64)
    matches = draft_tokens.to(torch.int64) == target[:, :gamma]
    if verify_lens is not None:
        col = torch.arange(gamma, device=target.device).view(1, -1)
        matches = matches & (col < (verify_lens.to(torch.int64).view(-1, 1) - 1))
    correct_len = accept_prefix_len(matches)
    bonus = target.gather(1, correct_len.view(-1, 1)).view(-1)
    return VerifyResult.commit(draft_tokens, correct_len, bonus, prefix_lens)
