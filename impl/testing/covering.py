"""A covering subset of the op table's cases, for the paths that repeat a sample another test already runs.

Every sample of every op runs on the default backend per commit (``test_default_backend_runs_triton``
for the ops that launch Triton kernels, ``test_impl_matches_reference`` for the others). Paths that
re-run the same samples with one thing changed (check mode on, the sync counter, the
kernel-backend gate from the job's environment) need not repeat the whole cross product per
commit under the Triton interpreter. :func:`covering_cases` is a covering design over those
paths: for each op that launches Triton kernels, each path runs one sample per distinct dtype
signature (the dtypes of the op's ``dtype_args``; the first in table order that is not empty)
and its share of the other samples (round robin over the paths), so every op x dtype x path
and every sample (edge class) x at least one repeated path runs per commit; ops that launch no
Triton kernel keep every sample on every path. The full cross product runs in the nightly jobs.
Imports torch and impl.testing.op_info only.
"""
from __future__ import annotations

import functools

import torch

from impl.testing.op_info import OpInfo, Sample


@functools.lru_cache(maxsize=None)
def _shape_of(op: OpInfo, sample: Sample) -> tuple[tuple[str, ...], bool]:
    """(dtype signature, whether a dtype argument is empty) of a sample built once on CPU."""
    kwargs = sample.make(torch.device("cpu"))
    tensors = [kwargs[a] for a in op.dtype_args if isinstance(kwargs.get(a), torch.Tensor)]
    return tuple(str(t.dtype) for t in tensors), any(t.numel() == 0 for t in tensors)


def dtype_signature(op: OpInfo, sample: Sample) -> tuple[str, ...]:
    """The dtypes of the sample's ``op.dtype_args`` tensors (built on CPU), in argument order."""
    return _shape_of(op, sample)[0]


def _empty(op: OpInfo, sample: Sample) -> bool:
    return _shape_of(op, sample)[1]


REPEATED_PATHS = ("reference", "check-mode", "syncs", "gates[torch]", "gates[interpret]", "gates[check-on]")


def covering_cases(cases: list[tuple[OpInfo, Sample]], path: str, *, paths: tuple[str, ...] = REPEATED_PATHS,
                   tag: str = "triton") -> list[tuple[OpInfo, Sample]]:
    """The cases ``path`` runs per commit: for each op tagged ``tag``, one sample per dtype signature
    (every path covers every op x dtype) plus every ``len(paths)``-th other sample, starting at the
    path's index (every sample runs on at least one of ``paths``); every sample of the other ops.
    Table order is kept."""
    if path not in paths:
        raise ValueError(f"covering_cases: path {path!r} is not one of {list(paths)}")
    share, count = paths.index(path), len(paths)
    picked: set[int] = set()
    rest: dict[str, list[Sample]] = {}
    cover: dict[tuple[str, tuple[str, ...]], tuple[OpInfo, Sample]] = {}
    for op, sample in cases:
        if tag not in op.tags:
            picked.add(id(sample))
            continue
        key = (op.name, dtype_signature(op, sample))
        if key not in cover or (_empty(*cover[key]) and not _empty(op, sample)):
            cover[key] = (op, sample)
    picked.update(id(s) for _, s in cover.values())
    for op, sample in cases:
        if tag in op.tags and id(sample) not in picked:
            rest.setdefault(op.name, []).append(sample)
    for samples in rest.values():
        picked.update(id(s) for s in samples[share::count])
    return [c for c in cases if id(c[1]) in picked]
