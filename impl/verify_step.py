"""The verify-step write pipeline, with static shapes so one CUDA graph can hold it.

    metadata (uniform target verify) -> commit-inject layout -> fused RMSNorm + RoPE -> scatter into the ring

Inputs live in static buffers (``load`` copies a batch in); ``run`` reads only
those buffers and writes the pool's ring plus static outputs, so
``capture()`` + ``replay()`` reproduce ``run()`` for any batch contents of the
same size. It needs the unified pool (paged allocation is host bookkeeping) and
a sync policy cell that passes ``output_size`` for the uniform layout (on HIP,
MTP keeps its sync, so MTP verify there is not capturable: a clear error).
Used by the CUDA-graph test and the benchmark.
"""
from __future__ import annotations

import torch

from impl import sync_policy
from impl.cuda_graphs import capture_graph
from impl.pools.unified import UnifiedKVPool
from impl.prefill_metadata import resolve_platform_and_algorithm
from impl.validation import INDEX_DTYPES, check_positive_int, check_tensor
from impl.verify_metadata import build_verify_metadata


class VerifyStep:
    """One layer's verify-row write for a fixed batch size."""

    def __init__(
        self,
        pool: UnifiedKVPool,
        *,
        batch_size: int,
        norm_weight: torch.Tensor,
        eps: float,
        cos: torch.Tensor,
        sin: torch.Tensor,
        layer: int = 0,
        platform: str | None = None,
        algorithm: str | None = None,
    ) -> None:
        if not isinstance(pool, UnifiedKVPool):
            raise TypeError(
                f"VerifyStep needs a UnifiedKVPool (paged allocation syncs and cannot be captured), "
                f"got {type(pool).__name__}"
            )
        check_positive_int("batch_size", batch_size)
        self.platform, self.algorithm = resolve_platform_and_algorithm(platform, algorithm)
        decision = sync_policy.decide(self.platform, self.algorithm, "uniform", exact_num_tokens=True)
        if decision != sync_policy.OUTPUT_SIZE:
            raise ValueError(
                f"verify step for platform={self.platform!r}, algorithm={self.algorithm!r} keeps a "
                f"device-to-host sync ({sync_policy.lookup(self.platform, self.algorithm, 'uniform').reason}); "
                "it cannot be captured in a CUDA graph -- run it eager"
            )
        pool.buffer(layer)  # validates the layer index
        self.pool, self.layer, self.batch_size = pool, layer, batch_size
        self.config = pool.config
        self.stride = self.config.verify_rows("target")
        self.norm_weight, self.eps, self.cos, self.sin = norm_weight, float(eps), cos, sin
        dev, n = pool.device, batch_size * self.stride
        # static inputs
        self.req_pool_indices = torch.zeros(batch_size, dtype=torch.int64, device=dev)
        self.prefix_lens = torch.zeros(batch_size, dtype=torch.int64, device=dev)
        self.commit_lens = torch.zeros(batch_size, dtype=torch.int64, device=dev)
        self.kv_in = torch.zeros(n, self.config.head_dim, dtype=pool.dtype, device=dev)
        # static work space and outputs
        self.kv_work = torch.zeros_like(self.kv_in)
        self.positions = torch.zeros(n, dtype=torch.int64, device=dev)
        self.seq_lens_causal = torch.zeros(n, dtype=torch.int32, device=dev)
        self.loc = torch.zeros(n, dtype=torch.int32, device=dev)
        self.graph: torch.cuda.CUDAGraph | None = None

    def load(self, *, req_pool_indices, prefix_lens, commit_lens, kv) -> None:
        """Copy one batch into the static inputs (kv: ``[bs * (gamma+1), head_dim]`` projected rows)."""
        bs, n = self.batch_size, self.batch_size * self.stride
        for name, t in (("req_pool_indices", req_pool_indices), ("prefix_lens", prefix_lens),
                        ("commit_lens", commit_lens)):
            check_tensor(name, t, dtype=INDEX_DTYPES, shape=[bs], contiguous=False)
        check_tensor("kv", kv, dtype=self.pool.dtype, shape=[n, self.config.head_dim], contiguous=False)
        self.req_pool_indices.copy_(req_pool_indices)
        self.prefix_lens.copy_(prefix_lens)
        self.commit_lens.copy_(commit_lens)
        self.kv_in.copy_(kv)

    def run(self) -> None:
        """The pipeline on the static buffers (no host sync: capturable)."""
        meta = build_verify_metadata(
            self.config, seq_lens=self.prefix_lens, req_pool_indices=self.req_pool_indices,
            role="target", platform=self.platform, algorithm=self.algorithm,
        )
        positions, loc = self.pool.locate_commit(
            self.req_pool_indices, self.prefix_lens, self.commit_lens, stride=self.stride
        )
        self.kv_work.copy_(self.kv_in)  # norm/RoPE run in place; keep the input for the next replay
        self.pool.norm_rope_(self.kv_work, positions=positions, norm_weight=self.norm_weight,
                             eps=self.eps, cos=self.cos, sin=self.sin)
        self.pool.store(self.layer, self.kv_work, loc)
        self.positions.copy_(meta.positions)
        self.seq_lens_causal.copy_(meta.seq_lens_causal)
        self.loc.copy_(loc)

    def capture(self, *, warmup: int = 2) -> torch.cuda.CUDAGraph:
        """Capture ``run`` in a CUDA graph (warm-up runs first compile the kernels;
        :func:`impl.cuda_graphs.capture_graph`).

        The warm-up runs write the ring with the currently loaded batch; load
        the batch you want before capturing, or reset the ring afterwards.
        """
        self.graph = capture_graph(self.run, device=self.pool.device, warmup=warmup).graph
        return self.graph

    def replay(self) -> None:
        if self.graph is None:
            raise RuntimeError("call capture() before replay()")
        self.graph.replay()
