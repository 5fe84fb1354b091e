"""CUDA graphs for the target verify forward: capture per batch-size tier, replay.

For each captured batch size B (``SpecConfig.capture_batch_sizes``) the verify
forward over ``T = B * (gamma + 1)`` token rows is captured once into static
buffers. A step with bs <= B real requests lays its rows out on the
ragged-graph path of ``build_verify_metadata`` (lens padded to the tier T, no
host sync inside), copies the per-token inputs into the static buffers and
replays. Padding rows have position 0 and ``final_pos = window``, so their loc
is -1 and the pool writer skips them. Write locations are computed before
replay (the paged pool allocates on the host), so the graph itself is sync-free.
"""
from __future__ import annotations

import torch

from impl.cuda_graphs import capture_graph
from impl.engine.stores import TargetStore, rows_from_metadata
from impl.model.attention import ExtendRows
from impl.model.target import ForwardOut
from impl.verify_metadata import RaggedVerifyLayout


class _Captured:
    def __init__(self, engine, tokens: int):
        dev, model = engine.device, engine.target
        self.tokens = torch.zeros(tokens, dtype=torch.int64, device=dev)
        self.positions = torch.zeros(tokens, dtype=torch.int64, device=dev)
        self.slots = torch.zeros(tokens, dtype=torch.int64, device=dev)
        self.prefix = torch.zeros(tokens, dtype=torch.int64, device=dev)
        self.row_start = torch.zeros(tokens, dtype=torch.int64, device=dev)
        self.loc = torch.full((tokens,), -1, dtype=torch.int32, device=dev)  # -1: warm-up writes nothing
        rows = ExtendRows(self.positions, self.slots, self.prefix, self.row_start)
        store = TargetStore(engine.state.target_pool, positions=self.positions, loc=self.loc, cos=model.cos,
                            sin=model.sin, eps=engine.cfg.eps)

        def forward() -> ForwardOut:
            return model.forward_extend(self.tokens, rows, store)

        # warm-up: Triton compilation, allocator pools
        self.graph, self.out = capture_graph(forward, device=dev, warmup=2)


class VerifyGraphRunner:
    def __init__(self, engine):
        self.engine = engine
        self.graphs: dict[int, _Captured] = {}
        self.replays = 0

    def _graph_for(self, tier: int) -> _Captured:
        if tier not in self.graphs:
            self.graphs[tier] = _Captured(self.engine, tier)
        return self.graphs[tier]

    def verify(self, tokens: torch.Tensor, prefix: torch.Tensor, slots: torch.Tensor) -> tuple[ForwardOut, str]:
        eng = self.engine
        bs, rows = prefix.shape[0], eng.gamma + 1
        lens = torch.full((bs,), rows, dtype=torch.int32, device=prefix.device)
        layout = RaggedVerifyLayout.for_graph(lens, eng.spec)
        md = eng.verify_metadata(prefix, slots, ragged=layout)
        pool = eng.state.target_pool
        loc = pool.locate(md.state_slot, md.positions, final_pos=md.final_pos)  # padding rows -> -1
        view = rows_from_metadata(md, prefix)
        g = self._graph_for(md.num_tokens)
        n = tokens.shape[0]
        g.tokens.zero_()
        g.tokens[:n].copy_(tokens)
        g.positions.copy_(view.positions)
        g.slots.copy_(view.slots)
        g.prefix.copy_(view.prefix)
        g.row_start.copy_(view.row_start)
        g.loc.copy_(loc)
        g.graph.replay()
        self.replays += 1
        out = ForwardOut(logits=g.out.logits[:n].clone(), hidden=g.out.hidden[:n].clone(),
                         keys=[k[:n].clone() for k in g.out.keys])
        return out, md.decision
