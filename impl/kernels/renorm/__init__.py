"""Top-k / top-p renormalisation of probability rows (docs/design.md §3.9, graph safe).

Pivot semantics: a row keeps every entry ``>= pivot`` (ties at the pivot all
survive), then is divided by its kept mass (zero mass -> zeros, never NaN).
NaN, +-inf and negative entries weigh 0 and are never kept (output 0); a row with no positive
finite mass returns zeros; a NaN in a tensor ``p`` means 1 (keep every positive entry). p means
the fp32 value nearest to it, whether a float, an fp32 or an fp64 tensor (docs/design.md §3.9).
  top-k: pivot = the k-th largest entry, k clamped to [1, V].
  top-p: drop the smallest entries whose cumulative mass is < (1 - p) * row mass,
         p clamped to [0, 1]; for a row summing to 1 this is docs/design.md's "< 1 - p".
         p = 1 is a no-op, p = 0 keeps the largest entries (and their ties).
         At an exact boundary (the dropped mass would reach the target exactly) the pivot
         entry survives: one level more than FlashInfer's kernel keeps (minimal nucleus).

The package, each module importing only those listed above it:
  kernels.py     the Triton kernels of the range select and their state-word offsets
  tuning.py      RenormTuning and DEFAULT_TUNING: every launch knob, checked when built
  plan.py        how the select works, and every launch of one call worked out once per shape
  torch_path.py  the sort-based torch path (the kernel_backend gate "torch")
  checks.py      the argument checks of the full path (one-line errors naming the argument)
  workspace.py   the cached workspaces, bound launches, eager CUDA-graph capture and replay
  fast_path.py   the eager fast path: a prepared call's checks, index lookup and launch
  api.py         top_k_renorm and top_p_renorm (their docstrings state the contract)
"""
from impl.kernels.renorm.api import top_k_renorm, top_p_renorm
from impl.kernels.renorm.tuning import DEFAULT_TUNING, RenormTuning

__all__ = ["top_k_renorm", "top_p_renorm", "RenormTuning", "DEFAULT_TUNING"]
