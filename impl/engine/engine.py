"""The speculative decoding loop over the tiny model (docs/design.md §6-§7).

One ``step()``:

1. **join**: waiting requests take free slots and are prefilled in one ragged
   forward (``build_prefill_metadata``); the target's K goes to the target
   pool with the window trim, the first token is picked, and the prompt's
   target hidden states are injected into the draft pool (window trim, no
   commit gate) -- before any slot of this step is recycled;
2. **draft**: the DSpark block (one pass) or MTP chain (gamma passes) proposes
   gamma tokens per running request (or an oracle / noisy / random source);
3. **verify**: the target scores gamma + 1 rows per request through
   ``build_verify_metadata`` (the sync policy picks ``output_size`` vs the
   sync from the platform and algorithm gates), eager or a CUDA graph;
   greedy or sampling verify;
4. **commit + inject**: committed tokens are appended, the committed rows'
   target hidden states are injected with the commit gate;
5. **finish**: requests with all their tokens release their slots.

Every choice comes from one frozen :class:`impl.run_options.RunOptions`
(resolved at the edge; the engine never reads the environment): algorithm,
KV backend, platform policy, kernel backend and check mode are applied from it
to every op the engine calls. ``options.checked`` verifies the pools after
every step (:mod:`impl.engine.checker`) and runs under check mode (scatter
reports duplicate locs).
"""
from __future__ import annotations

import contextlib
import time
from collections import deque
from dataclasses import dataclass

import torch

from impl.engine.checker import PoolChecker
from impl.engine.drafting import DraftSource
from impl.engine.graph_plan import plan_graphs
from impl.engine.state import RankState, Request
from impl.engine.stores import TargetStore, rows_from_metadata
from impl.gates import gates_in_effect
from impl.model.dspark_draft import DSparkDraft
from impl.model.mtp_draft import MtpDraft
from impl.model.target import TargetModel
from impl.model.tiny_config import TinyConfig
from impl.platform import default_device, platform_for
from impl.kernels.metadata_workspace import MetadataWorkspace
from impl.prefill_metadata import build_prefill_metadata
from impl.run_options import RunOptions, SamplingParams  # noqa: F401 (SamplingParams re-exported)
from impl.spec.acceptance import AcceptanceStats
from impl.spec.greedy_verify import VerifyResult, greedy_verify
from impl.spec.sampling_verify import sample_from, sampling_probs, sampling_verify
from impl.step_timing import active_timer, section
from impl.verify_metadata import build_verify_metadata


@dataclass
class StepRecord:
    step: int
    joined: list[int]
    verified: list[int]  # request ids verified this step
    accept_lens: list[int]  # tokens committed per verified request (before the max_new cap)
    finished: list[int]
    sync_decision: str | None  # the verify metadata's sync-policy decision


class SpecEngine:
    def __init__(
        self,
        cfg: TinyConfig,
        options: RunOptions,
        *,
        num_slots: int | None = None,
        continuations: dict[int, list[int]] | None = None,
        target: TargetModel | None = None,
        lockstep=None,
    ) -> None:
        """``num_slots`` overrides ``options.num_slots`` (default 4); ``continuations``: the
        target's tokens per request, for oracle draft sources; ``lockstep``: the DP hooks."""
        if not isinstance(options, RunOptions):
            raise TypeError(f"options must be a RunOptions, got {type(options).__name__}")
        self.options = options
        self.algorithm = options.algorithm
        self.kv_backend = options.kv_backend
        self.platform = platform_for(options.platform).backend
        self.kernel_backend = options.kernel_backend
        self.device = torch.device(options.device) if options.device is not None else default_device()
        gamma, draft, sampling, checked, graph, seed = (options.gamma, options.draft, options.sampling,
                                                         options.checked, options.graph, options.seed)
        num_slots = num_slots or options.num_slots or 4
        self.cfg = cfg
        self.graph_plan = plan_graphs(num_slots, options.capture_sizes) if graph else None
        self.spec = cfg.spec_config(gamma, num_slots, **(
            {"capture_batch_sizes": self.graph_plan.capture_batch_sizes} if graph else {}))
        self.gamma = self.spec.gamma if self.algorithm != "none" else 0
        self.source = self._draft_source(draft)
        self.sampling = sampling
        self.checked = checked
        # the verify step's metadata outputs, reused every step (each step's metadata is dead
        # before the next step builds its own: impl/kernels/metadata_workspace.py)
        self.metadata_workspace = MetadataWorkspace()
        self._check_graph(graph, lockstep)
        # data-parallel ranks (impl.distributed): agree(phase, local) -> any rank has work in
        # ``phase``; idle(phase) issues the phase's collectives with zero tokens
        self.lockstep = lockstep
        self._build_models(cfg, target)
        self.override = self.source.build(continuations or {}, cfg.vocab, seed)
        if self.source.needs_continuation and not continuations:
            raise ValueError(f"draft source {self.source.kind!r} needs the target's continuations")
        self.generator = torch.Generator(device=self.device).manual_seed(seed) if sampling else None
        self.checker = PoolChecker(self.state.pools(), cfg.window) if checked else None
        self.observer = None  # observer(reqs, tokens [bs, g+1], prefix, logits [bs, g+1, V]) after each verify
        self._start_bookkeeping()
        self.graph_runner = None
        self.capture_seconds = 0.0
        if graph:
            from impl.engine.graph import VerifyGraphRunner

            start = time.perf_counter()
            with self.applied(), torch.no_grad():
                self.graph_runner = VerifyGraphRunner(self, self.graph_plan)
            self.capture_seconds = time.perf_counter() - start

    def _draft_source(self, draft: DraftSource | str) -> DraftSource:
        source = DraftSource.parse(draft) if isinstance(draft, str) else draft
        if self.algorithm == "none" and source.kind != "model":
            raise ValueError("spec_algorithm 'none' decodes without drafts; draft sources need dspark or mtp")
        return source

    def _check_graph(self, graph: bool, lockstep) -> None:
        if graph and self.device.type != "cuda":
            raise ValueError("graph=True needs a CUDA/ROCm device (CUDA graphs)")
        if graph and lockstep is not None:
            raise ValueError("graph=True is single-rank only (the verify graph holds no collectives)")

    def _build_models(self, cfg: TinyConfig, target: TargetModel | None) -> None:
        """The target (given, e.g. shared by DP ranks, or built), the draft model and this rank's pools."""
        self.target = target if target is not None else TargetModel(cfg, self.device)
        w, cos, sin = self.target.w, self.target.cos, self.target.sin
        self.draft = {"dspark": DSparkDraft, "mtp": MtpDraft}.get(self.algorithm)
        self.draft = self.draft(cfg, w, cos, sin) if self.draft else None
        self.state = RankState.build(
            self.spec, n_layers=cfg.n_layers, kv_backend=self.kv_backend, device=self.device, draft=self.draft,
            cos=cos, sin=sin, eps=cfg.eps, max_positions=cfg.max_pos,
        )

    def _start_bookkeeping(self) -> None:
        """Empty queues, records and counters."""
        self.stats = AcceptanceStats()
        self.records: list[StepRecord] = []
        self.waiting: deque[Request] = deque()
        self.finished: dict[int, Request] = {}
        self.step_index = 0
        self.generated_tokens = 0
        self.elapsed = 0.0

    # ---- requests ----
    def add_request(self, prompt: list[int], max_new_tokens: int, rid: int | None = None) -> int:
        if not prompt:
            raise ValueError("prompt must not be empty")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if len(prompt) + max_new_tokens + self.gamma + 1 > self.cfg.max_pos:
            raise ValueError(f"prompt + max_new_tokens exceed the model's max_pos ({self.cfg.max_pos})")
        if any(not 0 <= t < self.cfg.vocab for t in prompt):
            raise ValueError(f"prompt tokens must be in [0, {self.cfg.vocab})")
        rid = len(self.finished) + len(self.state.running) + len(self.waiting) if rid is None else rid
        self.waiting.append(Request(rid, list(prompt), max_new_tokens))
        return rid

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.state.running

    def run(self, max_steps: int | None = None) -> dict[int, list[int]]:
        while not self.idle:
            if max_steps is not None and self.step_index >= max_steps:
                break
            self.step()
        return {rid: r.generated for rid, r in sorted(self.finished.items())}

    # ---- one step ----
    def step(self) -> StepRecord:
        start = time.perf_counter()
        timer = active_timer()
        if timer is not None:
            timer.begin_step()
        with self.applied(), torch.no_grad():
            record = StepRecord(self.step_index, [], [], [], [], None)
            joining = []
            while self.waiting and self.state.slots.free:
                req = self.waiting.popleft()
                self.state.admit(req)
                req.joined_step = self.step_index
                joining.append(req)
            joining_anywhere = self._agree("prefill", bool(joining))
            if joining:
                self._prefill(joining)
                record.joined = [r.rid for r in joining]
            elif joining_anywhere:
                self.lockstep.idle("prefill")
            decoding = [r for r in self.state.running.values() if not r.done]
            decoding_anywhere = self._agree("decode", bool(decoding))
            if decoding:
                self._decode(decoding, record)
            elif decoding_anywhere:
                self.lockstep.idle("decode")
            if self.checker:  # before releasing: a released paged slot forgets its rows
                self.checker.verify([(r.slot, r.seq_len) for r in self.state.running.values()], self.step_index)
            for req in [r for r in self.state.running.values() if r.done]:
                del req.generated[req.max_new_tokens:]
                req.finished_step = self.step_index
                self.state.release(req)  # after its last injection (this step's)
                if self.checker:
                    self.checker.forget_slot(req.slot)
                self.finished[req.rid] = req
                record.finished.append(req.rid)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.elapsed += time.perf_counter() - start
        if timer is not None:
            timer.end_step()
        self.records.append(record)
        self.step_index += 1
        return record

    @contextlib.contextmanager
    def applied(self):
        """The run's gates (check mode, kernel backend, ...) for every op called inside."""
        with gates_in_effect(self.options.gates):
            yield

    def _agree(self, phase: str, local: bool) -> bool:
        """Single rank: ``local``. Data-parallel: whether any rank has work in ``phase``
        (every rank then runs the phase's forwards, idle ranks with zero tokens)."""
        return local if self.lockstep is None else self.lockstep.agree(phase, local)

    # ---- prefill ----
    def _prefill(self, reqs: list[Request]) -> None:
        dev, pool = self.device, self.state.target_pool
        rpi = torch.tensor([r.slot for r in reqs], dtype=torch.int64, device=dev)
        ext = torch.tensor([len(r.prompt) for r in reqs], dtype=torch.int64, device=dev)
        prefix = torch.zeros_like(ext)
        with section("metadata"):
            md = build_prefill_metadata(prefix, ext, rpi, window=self.cfg.window, path="ragged-eager",
                                        platform=self.platform, algorithm=self.algorithm)
            loc = pool.locate(md.state_slot, md.positions, final_pos=md.final_pos)
            rows = rows_from_metadata(md, prefix)
        tokens = torch.tensor([t for r in reqs for t in r.prompt], dtype=torch.int64, device=dev)
        store = TargetStore(pool, positions=md.positions, loc=loc, cos=self.target.cos, sin=self.target.sin,
                            eps=self.cfg.eps)
        with section("model"):
            out = self.target.forward_extend(tokens, rows, store)
        last = (md.extend_start_loc.to(torch.int64) + ext - 1)
        first = self._pick(out.logits[last])
        if self.checker:
            keep = md.positions > md.final_pos - self.cfg.window  # the window trim, computed here independently
            slots, positions = md.state_slot[keep], md.positions[keep]
            for layer, k in enumerate(out.keys):
                self.checker.expect("target", layer, slots, positions, k[keep])
            if self.draft is not None:
                rows = self._expected_draft_rows(out.hidden, md.positions)[keep]
                self.checker.expect("draft", 0, slots, positions, rows)
        if self.state.injector is not None:
            with section("writes"):
                self.state.injector.inject_prefill(out.hidden, positions=md.positions, state_slot=md.state_slot,
                                                   final_pos=md.final_pos)
        first = first.tolist()
        for i, r in enumerate(reqs):
            r.generated = [first[i]]
            r.seq_len = len(r.prompt)
            r.last_hidden = out.hidden[int(last[i])]
        self.generated_tokens += len(reqs)

    def _expected_draft_rows(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Injected rows for ALL of ``hidden`` (same shapes as the injector, so the same bits);
        the caller selects the rows that must be written."""
        kv = self.draft.inject_rows(hidden)
        self.state.draft_pool.norm_rope_(kv, positions=positions, norm_weight=self.draft.kv_norm_weight,
                                         eps=self.cfg.eps, cos=self.target.cos, sin=self.target.sin)
        return kv

    def _pick(self, logits: torch.Tensor) -> torch.Tensor:
        """The token after a prefill: argmax, or a sample from the processed distribution."""
        if self.sampling is None:
            return torch.argmax(logits, dim=-1)
        s = self.sampling
        probs = sampling_probs(logits.unsqueeze(1), temperature=s.temperature, top_k=s.top_k, top_p=s.top_p)[:, 0]
        u = torch.rand(probs.shape[0], generator=self.generator, device=probs.device)
        return sample_from(probs, u)

    # ---- draft ----
    def _propose(self, reqs, anchors, prefix, slots) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Draft tokens ``[bs, gamma]`` and the draft logits they were drawn from (sampling)."""
        g, pool = self.gamma, self.state.draft_pool
        if self.algorithm == "dspark":
            logits = self.draft.block_logits(anchors, prefix, slots, pool, g)
            tokens = self._pick(logits.reshape(-1, logits.shape[-1])).view(len(reqs), g)
        else:
            hidden = torch.stack([r.last_hidden for r in reqs])
            tokens, logits = self.draft.chain(hidden, anchors, prefix, slots, pool, g, pick=self._pick)
        if self.override is not None:
            proposed = self.override.propose([r.rid for r in reqs], [len(r.generated) for r in reqs], g)
            tokens = proposed.to(self.device)
            if self.source.kind == "random":
                logits = torch.zeros_like(logits)  # uniform q
            else:  # oracle sources: q is a point mass on the proposal
                logits = torch.full_like(logits, -1e4).scatter_(2, tokens.unsqueeze(2), 0.0)
        return tokens, logits

    # ---- verify + commit + inject ----
    def _decode(self, reqs: list[Request], record: StepRecord) -> None:
        dev, g = self.device, self.gamma
        bs = len(reqs)
        anchors = torch.tensor([r.anchor for r in reqs], dtype=torch.int64, device=dev)
        prefix = torch.tensor([r.seq_len for r in reqs], dtype=torch.int64, device=dev)
        slots = torch.tensor([r.slot for r in reqs], dtype=torch.int64, device=dev)
        if g:
            with section("draft"):
                drafts, draft_logits = self._propose(reqs, anchors, prefix, slots)
        else:
            drafts, draft_logits = torch.empty(bs, 0, dtype=torch.int64, device=dev), None
        tokens = torch.cat([anchors.view(-1, 1), drafts], dim=1).reshape(-1)
        if self.graph_runner is not None:
            out, decision = self.graph_runner.verify(tokens, prefix, slots)
        else:
            out, decision = self._verify_forward(tokens, prefix, slots)
        record.sync_decision = decision
        if self.observer is not None:
            self.observer(reqs, tokens.view(bs, g + 1), prefix, out.logits.view(bs, g + 1, -1))
        with section("accept"):
            res = self.verify_drafts(out.logits.view(bs, g + 1, -1), drafts, prefix, draft_logits=draft_logits)
        if self.checker:
            rows = prefix.view(-1, 1) + torch.arange(g + 1, device=dev)
            row_slots = slots.view(-1, 1).expand_as(rows).reshape(-1).contiguous()
            for layer, k in enumerate(out.keys):  # the target writes every verify row
                self.checker.expect("target", layer, row_slots, rows.reshape(-1), k)
            if self.draft is not None:
                committed = (torch.arange(g + 1, device=dev).view(1, -1) < res.commit_len.view(-1, 1)).reshape(-1)
                expected = self._expected_draft_rows(out.hidden, rows.reshape(-1))[committed]
                self.checker.expect("draft", 0, row_slots[committed], rows.reshape(-1)[committed], expected)
        if self.state.injector is not None:
            with section("writes"):
                self.state.injector.inject_verify(out.hidden, req_pool_indices=slots, prefix_lens=prefix,
                                                  commit_lens=res.commit_len, stride=g + 1)
        self.stats.update(res.correct_len)
        commit = res.commit_len.tolist()
        out_tokens = res.output_tokens.tolist()
        for i, r in enumerate(reqs):
            c = commit[i]
            before = len(r.generated)
            r.generated.extend(out_tokens[i][:c])
            del r.generated[r.max_new_tokens:]
            self.generated_tokens += len(r.generated) - before
            r.seq_len += c
            r.last_hidden = out.hidden[i * (g + 1) + c - 1]
            r.accept_lens.append(c)
        record.verified = [r.rid for r in reqs]
        record.accept_lens = commit

    def verify_drafts(self, target: torch.Tensor, drafts: torch.Tensor, prefix: torch.Tensor, *,
                      draft_logits: torch.Tensor | None = None) -> VerifyResult:
        """Verify ``[bs, gamma]`` drafts (DSpark block or MTP chain) against the target's
        ``[bs, gamma + 1]`` rows (logits, or argmax ids for greedy): greedy, or chain
        rejection sampling against ``draft_logits`` (docs/design.md §6.2-§6.4)."""
        g = self.gamma
        if drafts.dim() != 2 or drafts.shape[1] != g:
            raise ValueError(f"draft_tokens must be [bs, {g}] (gamma = {g} drafts per request, "
                             f"{self.algorithm!r}), got {list(drafts.shape)}")
        if self.sampling is None:
            return greedy_verify(target, drafts, prefix_lens=prefix)
        s = self.sampling
        return sampling_verify(target, draft_logits, drafts, prefix_lens=prefix, temperature=s.temperature,
                               top_k=s.top_k, top_p=s.top_p, generator=self.generator)

    def verify_metadata(self, prefix, slots, ragged=None):
        """Target-verify metadata: ``gamma + 1`` rows per request through the sync policy of
        this run's platform and algorithm (``mtp`` keeps its sync on HIP, docs/design.md §4.3);
        one row per request for algorithm ``none``."""
        if self.gamma == 0:  # plain decoding (algorithm 'none'): one row per request
            ones = torch.ones_like(prefix)
            return build_prefill_metadata(prefix, ones, slots, window=self.cfg.window, path="uniform",
                                          num_tokens=prefix.shape[0], platform=self.platform, algorithm=self.algorithm,
                                          workspace=self.metadata_workspace)
        return build_verify_metadata(self.spec, seq_lens=prefix, req_pool_indices=slots, ragged=ragged,
                                     platform=self.platform, algorithm=self.algorithm,
                                     workspace=self.metadata_workspace)

    def _verify_forward(self, tokens, prefix, slots):
        pool = self.state.target_pool
        with section("metadata"):
            md = self.verify_metadata(prefix, slots)
            loc = pool.locate(md.state_slot, md.positions)  # every verify row (the target has no commit gate)
            rows = rows_from_metadata(md, prefix)
        store = TargetStore(pool, positions=md.positions, loc=loc, cos=self.target.cos, sin=self.target.sin,
                            eps=self.cfg.eps)
        with section("model"):
            return self.target.forward_extend(tokens, rows, store), md.decision

    # ---- reporting ----
    def accept_lengths_per_step(self) -> list[list[int]]:
        return [rec.accept_lens for rec in self.records if rec.verified]

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.elapsed if self.elapsed else 0.0
