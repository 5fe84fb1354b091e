"""The metadata samples and one call of an engine's metadata path, with its syncs and its output_size.

A sample is a verify batch (prefixes, slots, ragged lens); per path it becomes the lens the
engine is fed (uniform: rows per request; ragged eager: the lens; ragged graph: the lens padded
to the captured tier, the last row taking the surplus as ``pad_verify_lens_to_bucket`` with no
padding rows does) and the oracle's fields (``reference.verify_metadata.unified_extend_fields``).
The call runs the path's entry with a stand-in ``self`` whose forwarding method calls the real
builder, under ``impl.sync_detector.count_syncs`` and a recorder of every ``repeat_interleave``'s
``output_size`` against the sum of its repeats (docs/design.md §9.12). Imports torch, impl, the
kit's adapters and reference.
"""
from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from impl import sync_policy
from impl.config import SpecConfig
from impl.sync_detector import count_syncs
from impl.testing.conformance.adapter import engine_call
from impl.testing.conformance.meta_adapter import MetaPath, MetadataAdapter
from reference.verify_metadata import pad_lens, unified_extend_fields

CONFIG = SpecConfig(gamma=3, window=8, head_dim=16, rope_dim=8, num_slots=8, capture_batch_sizes=(1, 2, 4))

# name, prefixes, slots, ragged verify lens (clipped to the role's rows); listed smallest first
SAMPLES = (
    ("bs1", [0], [3], [2]),
    ("bs3-mixed", [5, 127, 40], [2, 0, 5], [4, 1, 3]),
    ("bs4-ring-wrap", [126, 128, 255, 7], [1, 3, 0, 6], [4, 4, 2, 1]),
)

# The keys a path's Arg may take (CASE_KEYS), built per sample and path.
CASE_KEYS = {
    "req_pool_indices": "int64 [bs] request slots",
    "prefix_lens": "int32 [bs] committed lengths before the step (verify entries add the lens themselves)",
    "seq_lens": "int32 [bs] lengths after the step (prefix + lens; extend entries take these)",
    "prefix_host": "list: prefix_lens on the host", "seq_lens_host": "list: seq_lens on the host",
    "max_seq_len": "int: the largest length after the step", "rows": "int: rows per request of the path's role",
    "layout": "the engine's ragged layout (None on the uniform path), built from layout_attrs",
}


def _tier(need: int) -> int:
    return next(t for t in CONFIG.graph_token_tiers if t >= need)


@dataclass
class MetaCase:
    name: str
    kwargs: dict[str, Any]  # CASE_KEYS
    want: dict[str, Any]  # the oracle's fields and num_tokens
    lens: list[int]  # what the entry feeds the builder per request
    real_lens: list[int]


def make_case(adapter: MetadataAdapter, path: MetaPath, sample, device) -> MetaCase:
    name, prefix, slots, ragged = sample
    rows = CONFIG.verify_rows(path.role)
    real = [rows] * len(prefix) if path.layout == "uniform" else [min(v, rows) for v in ragged]
    lens, tier = real, None
    if path.layout == "ragged-graph":
        tier = _tier(len(prefix) * rows)
        lens = pad_lens(real, tier, len(prefix))
    t = lambda xs, dt: torch.tensor(xs, dtype=dt, device=device)  # noqa: E731
    after = [p + e for p, e in zip(prefix, lens)]
    layout = None
    if path.layout != "uniform":
        starts = [sum(lens[:i]) for i in range(len(lens))]
        ours = {"verify_lens": t(lens, torch.int32), "real_lens": t(real, torch.int32),
                "extend_start_loc": t(starts, torch.int32), "total": tier, "tier": tier}
        layout = types.SimpleNamespace(**{attr: ours[key] for attr, key in adapter.layout_attrs})
    kwargs = dict(req_pool_indices=t(slots, torch.int64), prefix_lens=t(prefix, torch.int32),
                  seq_lens=t(after, torch.int32), prefix_host=list(prefix), seq_lens_host=after,
                  max_seq_len=max(after), rows=rows, layout=layout)
    return MetaCase(name, kwargs, unified_extend_fields(prefix, lens, slots), lens, real)


# ---------------------------------------------------------------- the stand-in self
class _Core:
    """Stands in for the engine's per-forward metadata object: attributes start as None."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


@dataclass
class Feed:
    """What the entry handed the builder (through the stand-in's forwarding method)."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    core: Any = None


def _forwarder(builder: Callable, standin_ref: list, feed: Feed) -> Callable:
    params = list(inspect.signature(builder).parameters)[2:]  # after self and the metadata object

    def forward(*args, **kwargs):
        feed.kwargs = dict(kwargs)
        feed.core = _Core()
        builder(standin_ref[0], feed.core, **{p: kwargs[p] for p in params if p in kwargs})
        return feed.core
    return forward


STANDIN_RULES: dict[str, tuple[str, Callable]] = {
    "rows": ("the path's rows per request (gamma + 1 for the target, gamma for a DSpark draft)",
             lambda ctx: ctx["rows"]),
    "device": ("the inputs' device", lambda ctx: ctx["device"]),
    "to-device": ("a function: host list -> int32 tensor on the device",
                  lambda ctx: (lambda xs: torch.tensor(xs, dtype=torch.int32, device=ctx["device"]))),
    "int32-kwargs": ("{device, dtype int32}", lambda ctx: {"device": ctx["device"], "dtype": torch.int32}),
    "forward-to-builder": ("a method that calls the real builder with the arguments of the same names and "
                           "returns the metadata object", lambda ctx: ctx["forward"]),
}


# ---------------------------------------------------------------- output_size recorder
class _OutputSizes(TorchDispatchMode):
    """Every repeat_interleave's (output_size, sum of repeats); entered outside count_syncs so its own
    reads of the repeats are not counted as the engine's syncs."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[int | None, int]] = []

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.repeat_interleave.Tensor:
            size = kwargs.get("output_size", args[1] if len(args) > 1 else None)
            self.seen.append((None if size is None else int(size), int(args[0].sum())))
        return func(*args, **kwargs)


@dataclass
class CallOutcome:
    written: bool = False  # the builder wrote its fields (False: it returned early, e.g. on another platform)
    values: dict[str, list[int]] = field(default_factory=dict)
    fed_count: int | None = None  # the token count the entry fed the builder
    fed_total: int | None = None  # the sum of the lens it fed with it
    syncs: list[str] = field(default_factory=list)
    output_sizes: list[tuple[int | None, int]] = field(default_factory=list)
    error: str = ""

    @property
    def expand_sync(self) -> bool:
        return sync_policy.SYNC_EXPAND in self.syncs


def _get(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def call_path(adapter: MetadataAdapter, entry: Callable, builder: Callable, path: MetaPath, case: MetaCase,
              device) -> CallOutcome:
    feed = Feed()
    standin_ref: list = [None]
    ctx = {"rows": case.kwargs["rows"], "device": torch.device(device),
           "forward": _forwarder(builder, standin_ref, feed)}
    standin = types.SimpleNamespace(**{attr: STANDIN_RULES[rule][1](ctx) for attr, rule in adapter.standin})
    standin_ref[0] = standin
    call = engine_call(_as_op(path), case.kwargs)
    out = CallOutcome()
    recorder = _OutputSizes()
    try:
        with recorder, count_syncs() as log:
            entry(standin, *call.args, **call.kwargs)
    except Exception as exc:  # noqa: BLE001 - the engine's error is the observation
        from impl.testing.conformance.cases import _exc_text
        out.error = _exc_text(exc)
    else:
        out.syncs = log.kinds()
    out.output_sizes = recorder.seen
    count, lens = feed.kwargs.get(adapter.count_arg), feed.kwargs.get(adapter.lens_arg)
    out.fed_count = None if count is None else int(count)
    out.fed_total = None if lens is None else int(lens.sum())
    if feed.core is not None:
        for ours, attr in adapter.fields:
            value = _get(feed.core, attr)
            if value is not None:
                out.written = True
                out.values[ours] = value.tolist()
    return out


def _as_op(path: MetaPath):
    """engine_call takes anything with ``args``: the path's entry arguments."""
    return types.SimpleNamespace(args=path.args)


def value_problems(adapter: MetadataAdapter, case: MetaCase, out: CallOutcome) -> list[str]:
    """Every field against the oracle, the token count fed, and each output_size against its repeats."""
    problems = []
    for size, total in out.output_sizes:
        if size is not None and size != total:
            problems.append(f"repeat_interleave got output_size={size} but its repeats sum to {total} "
                            f"(a count that is not the exact total; out of bounds on HIP, docs/design.md §9.12)")
    if out.fed_count is not None and out.fed_total is not None and out.fed_count != out.fed_total:
        problems.append(f"token count fed to the builder {out.fed_count}, the lens fed with it sum to {out.fed_total}")
    if out.error:
        problems.append(f"raises {out.error}")
        return problems
    for ours, _ in adapter.fields:
        got, want = out.values.get(ours), case.want[ours]
        if got is None:
            problems.append(f"{ours}: not written")
        elif got != want:
            first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
            g = got[first] if first < len(got) else "(none)"
            w = want[first] if first < len(want) else "(none)"
            problems.append(f"{ours}: {len(got)} rows (oracle {len(want)}), first difference at token {first}: "
                            f"{g} vs {w}")
    return problems


def describe_case(case: MetaCase) -> str:
    k = case.kwargs
    return (f"prefix={k['prefix_host']}, slots={k['req_pool_indices'].tolist()}, lens fed={case.lens}"
            + (f" (real {case.real_lens})" if case.lens != case.real_lens else "") + f", rows={k['rows']}")
