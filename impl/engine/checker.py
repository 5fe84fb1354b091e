"""Checked mode: after every engine step, compare the pools with what they must contain.

Greedy verify makes the *output* lossless whatever the draft proposes, so a
broken injector (window trim skipped, commit gate dropped) leaves the tokens
unchanged and only shows in the pool contents. The checker keeps, per pool
and layer, a snapshot of the buffer and a model of the rows that must be
there, built from the engine's own view of the step (what was committed,
which prefill tokens are in the window) -- never from the locs the injector
computed. After each step it asserts:

1. every row that changed is the address of a row the step was meant to write
   (rows of uncommitted / trimmed positions and untouched rows are bitwise
   unchanged -- docs/design.md §9.6);
2. every row the step was meant to write holds exactly that row;
3. for each running request, every position in (seq_len - window, seq_len)
   reads back (``pool.gather``) the row last meant for it.
"""
from __future__ import annotations

import torch

from impl.kernels._checks import bits_view


class PoolCheckError(AssertionError):
    """The pools do not hold what the committed tokens say they must."""


class PoolChecker:
    def __init__(self, pools: dict, window: int):
        self.pools = pools
        self.window = window
        self.snapshots = {name: [pool.buffer(l).clone() for l in range(pool.num_layers)]
                          for name, pool in pools.items()}
        self.model: dict[str, dict[tuple[int, int, int], torch.Tensor]] = {name: {} for name in pools}
        self.pending: dict[str, list] = {name: [] for name in pools}
        self.checks = 0

    def expect(self, name: str, layer: int, slots: torch.Tensor, positions: torch.Tensor, rows: torch.Tensor) -> None:
        """The step writes ``rows[i]`` for (slots[i], positions[i]) of ``layer`` in pool ``name``."""
        if rows.shape[0]:
            self.pending[name].append((layer, slots.to(torch.int64).cpu().contiguous(),
                                       positions.to(torch.int64).cpu().contiguous(), rows.detach().clone()))

    def forget_slot(self, slot: int) -> None:
        for entries in self.model.values():
            for key in [k for k in entries if k[1] == slot]:
                del entries[key]

    def verify(self, running: list[tuple[int, int]], step: int) -> None:
        """``running``: (slot, seq_len) of every request still holding a slot."""
        for name, pool in self.pools.items():
            for layer in range(pool.num_layers):
                self._verify_layer(name, pool, layer, running, step)
            self.pending[name] = []
        self.checks += 1

    def _verify_layer(self, name, pool, layer, running, step) -> None:
        buf = pool.buffer(layer)
        device = buf.device
        want: dict[int, tuple[tuple[int, int], torch.Tensor]] = {}  # loc -> ((slot, pos), row); later writes win
        for lay, slots, positions, rows in self.pending[name]:
            if lay != layer:
                continue
            locs = pool.read_loc(slots.to(device), positions.to(device)).tolist()
            for i, (s, p, loc) in enumerate(zip(slots.tolist(), positions.tolist(), locs)):
                if loc < 0:  # evicted by a later write of this step (paged pool): out of every window
                    self.model[name].pop((layer, s, p), None)
                    continue
                want[loc] = ((s, p), rows[i])
                self.model[name][(layer, s, p)] = rows[i]
        changed = (bits_view(buf) != bits_view(self.snapshots[name][layer])).any(dim=-1)
        allowed = torch.zeros_like(changed)
        if want:
            allowed[torch.tensor(list(want), dtype=torch.int64, device=device)] = True
        stray = (changed & ~allowed).nonzero().flatten().tolist()
        if stray:
            raise PoolCheckError(
                f"step {step}: {name} pool layer {layer}: {len(stray)} row(s) changed that no committed or "
                f"in-window position owns (first locs {stray[:8]}): a skipped window trim or a dropped commit gate"
            )
        for loc, ((s, p), row) in want.items():
            if not torch.equal(bits_view(buf[loc]), bits_view(row.to(device))):
                raise PoolCheckError(
                    f"step {step}: {name} pool layer {layer} row {loc} (slot {s}, position {p}) does not hold "
                    "the row written for it (lost to a colliding write?)"
                )
        for slot, seq_len in running:
            lo = max(0, seq_len - self.window + 1)
            if seq_len <= lo:
                continue
            positions = torch.arange(lo, seq_len, dtype=torch.int64, device=device)
            got = pool.gather(layer, slot, positions)
            for j, p in enumerate(range(lo, seq_len)):
                exp = self.model[name].get((layer, slot, p))
                if exp is None:
                    raise PoolCheckError(f"step {step}: {name} pool: slot {slot} position {p} was never written")
                if not torch.equal(bits_view(got[j]), bits_view(exp.to(device))):
                    raise PoolCheckError(
                        f"step {step}: {name} pool layer {layer}: slot {slot} position {p} (in the window of "
                        f"seq_len {seq_len}) reads back a different row than was committed for it"
                    )
        self.snapshots[name][layer] = buf.clone()
