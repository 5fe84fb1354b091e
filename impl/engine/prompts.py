"""The e2e workload's prompts: lengths (pure, torch-free) and tokens (seeded).

Lengths cycle through: shorter than the window, just under it, past the ring
(window + gamma) and more than twice the window -- so the ring wraps. The CLIs
check ``max(prompt_lengths(...)) + steps + gamma + 1 <= max_pos`` before
importing torch, so this module imports torch only inside ``make_prompts``.
"""
from __future__ import annotations


def prompt_lengths(window: int, batch: int, gamma: int) -> list[int]:
    w = window
    cycle = [3, w - 1, w + gamma + 2, 2 * w + 5, w // 2 + 1, w + 1]
    return [cycle[i % len(cycle)] for i in range(batch)]


def make_prompts(cfg, batch: int, gamma: int, seed: int = 0) -> list[list[int]]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, cfg.vocab, (n,), generator=gen).tolist()
            for n in prompt_lengths(cfg.window, batch, gamma)]
