"""Metadata builders as data: where an engine builds its per-step unified-KV metadata and how the kit calls it.

A :class:`MetadataAdapter` names the engine's builder (the function that expands per-request
lengths into per-token fields), the fields it writes and where they land on its result, the
engine paths that feed it (:class:`MetaPath`: the entry the kit calls, the policy layout path of
docs/design.md §4.3, the role that sets the rows per request, the algorithms it runs under), the
attributes of the minimal stand-in for ``self`` (named rules of ``metadata.STANDIN_RULES``) and
the values the kit puts into stubbed modules so the engine sees the emulated platform
(``metadata.VALUE_RULES``). Holds no code; imports only the kernel adapters' :class:`Arg`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from impl.testing.conformance.adapter import Arg

# Our per-token fields (reference.verify_metadata.unified_extend_fields) a builder may write.
FIELDS = {
    "state_slot": "the request's slot, per token",
    "chunk_start": "the request's first position in this step (its prefix length), per token",
    "cu_q": "the request's first row in the packed token layout (exclusive cumsum of the lens), per token",
    "final_pos": "the request's last position after this step, per token",
}


@dataclass(frozen=True)
class MetaPath:
    """One engine path that feeds the builder."""

    name: str  # e.g. "target-verify uniform"
    entry: str  # "Class.method" in the builder's module that the kit calls
    args: tuple[Arg, ...]  # the entry's arguments, taken from the kit's case keys (metadata.CASE_KEYS)
    layout: str  # the sync policy's path for it: uniform | ragged-eager | ragged-graph
    role: str = "target"  # rows per request = SpecConfig.verify_rows(role) ("target": gamma + 1, "draft": gamma)
    algorithms: tuple[str, ...] = ("mtp", "dspark")  # the algorithms under which the engine runs this path
    notes: str = ""


@dataclass(frozen=True)
class MetadataAdapter:
    """One builder of an engine, the paths that feed it, and how to stand in for what it needs."""

    name: str  # e.g. "unified_kv_prefill_meta" (--ops selects it by this name)
    module: str  # dotted module path inside --root
    builder: str  # "Class.method": the function that writes the fields
    fields: tuple[tuple[str, str], ...]  # (our field of FIELDS, attribute path on the builder's first argument)
    paths: tuple[MetaPath, ...]
    standin: tuple[tuple[str, str], ...] = ()  # (attribute of the stand-in self, rule of metadata.STANDIN_RULES)
    layout_attrs: tuple[tuple[str, str], ...] = ()  # (attribute of the engine's ragged layout, our key)
    values: tuple[tuple[str, str], ...] = ()  # ("stubbed.module.attribute", rule of metadata.VALUE_RULES)
    count_arg: str = "num_tokens"  # the entry's keyword that carries the token count to the builder
    lens_arg: str = "extend_seq_lens"  # ... and the one that carries the per-request lens it expands
    stubs: tuple[str, ...] = ()  # on top of the engine's shared stubs
    platforms: tuple[str, ...] = ("cuda", "hip")  # emulated platforms the cells run under
    notes: str = ""

    @property
    def where(self) -> str:
        return f"{self.module}.{self.builder}"

    def path(self, name: str) -> MetaPath | None:
        return next((p for p in self.paths if p.name == name), None)

    def with_functions(self, builder: str | None = None, entries: dict[str, str] | None = None) -> "MetadataAdapter":
        """The same adapter with the builder and/or path entries renamed (how the fixture swaps in a mistake)."""
        paths = tuple(replace(p, entry=(entries or {}).get(p.name, p.entry)) for p in self.paths)
        return replace(self, builder=builder or self.builder, paths=paths)
