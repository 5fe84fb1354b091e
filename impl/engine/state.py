"""Per-rank engine state: requests, slots, pools and the injector in one object.

Everything a data-parallel rank owns lives in :class:`RankState`, so a DP
split is one RankState per rank. Slots are request slots (``req_pool_idx``):
a finished request's slot goes back to the free list and is reused.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from impl.config import SpecConfig
from impl.pools import KVPool, check_pools_compatible, make_pool


@dataclass
class Request:
    rid: int
    prompt: list[int]
    max_new_tokens: int
    slot: int = -1
    generated: list[int] = field(default_factory=list)
    seq_len: int = 0  # committed positions in the target/draft KV (the anchor sits here)
    last_hidden: torch.Tensor | None = None  # target hidden at position seq_len - 1 (MTP input)
    accept_lens: list[int] = field(default_factory=list)  # tokens committed per verify step
    joined_step: int = -1
    finished_step: int = -1

    @property
    def done(self) -> bool:
        return len(self.generated) >= self.max_new_tokens

    @property
    def anchor(self) -> int:
        return self.generated[-1]


class SlotAllocator:
    def __init__(self, num_slots: int):
        self.num_slots = num_slots
        self._free = list(range(num_slots - 1, -1, -1))  # pop() hands out 0 first

    @property
    def free(self) -> int:
        return len(self._free)

    def take(self) -> int:
        if not self._free:
            raise RuntimeError("no free request slot")
        return self._free.pop()

    def give_back(self, slot: int) -> None:
        if slot in self._free or not 0 <= slot < self.num_slots:
            raise ValueError(f"slot {slot} is not in use")
        self._free.append(slot)


@dataclass
class RankState:
    spec: SpecConfig
    target_pool: KVPool
    draft_pool: KVPool | None
    injector: object | None
    slots: SlotAllocator
    running: dict[int, Request] = field(default_factory=dict)

    @classmethod
    def build(cls, spec: SpecConfig, *, n_layers: int, kv_backend: str, device, draft, cos, sin, eps,
              max_positions: int) -> "RankState":
        from impl.spec.injector import TargetHiddenInjector

        extra = {"max_positions": max_positions} if kv_backend == "paged" else {}
        target_pool = make_pool(spec, num_layers=n_layers, kind=kv_backend, device=device, **extra)
        draft_pool = injector = None
        if draft is not None:
            draft_pool = make_pool(spec, num_layers=1, kind=kv_backend, device=device, **extra)
            check_pools_compatible(target_pool, draft_pool)
            injector = TargetHiddenInjector(
                draft_pool, norm_weights=[draft.kv_norm_weight], eps=eps, cos=cos, sin=sin,
                project=lambda layer, hidden: draft.inject_rows(hidden),
            )
        return cls(spec, target_pool, draft_pool, injector, SlotAllocator(spec.num_slots))

    def pools(self) -> dict[str, KVPool]:
        out = {"target": self.target_pool}
        if self.draft_pool is not None:
            out["draft"] = self.draft_pool
        return out

    def admit(self, req: Request) -> None:
        req.slot = self.slots.take()
        self.running[req.rid] = req

    def release(self, req: Request) -> None:
        """Free the request's slot in every pool (call after its last injection)."""
        for pool in self.pools().values():
            pool.release(req.slot)
        self.slots.give_back(req.slot)
        del self.running[req.rid]
