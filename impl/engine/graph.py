"""CUDA graphs for the target verify forward: capture per batch-size tier, replay.

For each captured batch size B (the run's :class:`impl.engine.graph_plan.GraphPlan`,
derived from the slots unless the user names the sizes) the verify forward
over ``T = B * (gamma + 1)`` token rows is captured once, when the engine
starts, into static buffers. A step with bs <= B real requests lays its rows
out on the ragged-graph path of ``build_verify_metadata`` (lens padded to the
tier T, no host sync inside), copies the per-token inputs into the static
buffers and replays. Padding rows have position 0 and ``final_pos = window``,
so their loc is -1 and the pool writer skips them. Write locations are computed
before replay (the paged pool allocates on the host), so the graph itself is
sync-free. A step with more requests than the largest captured size runs the
eager forward and is counted in ``eager_steps`` (docs/design.md §7.5).
"""
from __future__ import annotations

import torch

from impl.cuda_graphs import capture_graph
from impl.engine.stores import TargetStore, rows_from_metadata
from impl.model.attention import ExtendRows
from impl.model.target import ForwardOut
from impl.step_timing import section
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
    """Captures every tier of ``plan`` at construction; ``verify`` replays (or runs eagerly, counted)."""

    def __init__(self, engine, plan):
        self.engine = engine
        self.plan = plan
        self.replays = 0
        self.eager_steps = 0  # steps with more requests than the largest captured size
        self.used_tiers: set[int] = set()
        self.graphs: dict[int, _Captured] = {t: _Captured(engine, t) for t in engine.spec.graph_token_tiers}

    def verify(self, tokens: torch.Tensor, prefix: torch.Tensor, slots: torch.Tensor) -> tuple[ForwardOut, str]:
        eng = self.engine
        bs, rows = prefix.shape[0], eng.gamma + 1
        if not self.plan.fits(bs):
            self.eager_steps += 1
            return eng._verify_forward(tokens, prefix, slots)
        with section("metadata"):
            lens = torch.full((bs,), rows, dtype=torch.int32, device=prefix.device)
            layout = RaggedVerifyLayout.for_graph(lens, eng.spec)
            md = eng.verify_metadata(prefix, slots, ragged=layout)
            pool = eng.state.target_pool
            loc = pool.locate(md.state_slot, md.positions, final_pos=md.final_pos)  # padding rows -> -1
            view = rows_from_metadata(md, prefix)
        with section("model"):
            g = self.graphs[md.num_tokens]
            self.used_tiers.add(md.num_tokens)
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
