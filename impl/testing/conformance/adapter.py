"""Engine adapters as data: where an engine's function for one of our ops lives and how to call it.

An :class:`EngineAdapter` lists, per op of the op table, an :class:`OpAdapter`: the module path
inside ``--root`` and the function name, each engine argument (:class:`Arg`: taken from one of our
arguments, renamed, or derived from them by a named rule of :data:`DERIVATIONS`), how the engine's
result maps to our outputs, the dtypes it claims and the contract clauses it claims
(:data:`CLAUSES`). Adapters hold no code; :func:`engine_call` turns one into a call.
Imports torch only.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

# The clauses of our contract an engine may claim for an op (anything it does not claim is still
# run, and its differences are listed apart as out of contract).
CLAUSES = {
    "core": "every in-contract sample of the op table equals the oracle (always claimed)",
    "error-types": "structural checks raise our error type (TypeError / ValueError) on the op table's error inputs",
    "error-messages": "... and the message matches ours (names the argument)",
    "check-mode": "value checks (check=True error inputs) raise ValueError",
    "§10": "every out-of-contract (bad-value) sample gets the decided answer of docs/design.md §10",
}


def _arange(kwargs: dict[str, Any], of: str) -> torch.Tensor:
    device = next((v.device for v in kwargs.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
    return torch.arange(int(kwargs[of]), dtype=torch.int64, device=device)


def _complex(kwargs: dict[str, Any], of: str) -> torch.Tensor:
    real, imag = of.split(",")
    return torch.complex(kwargs[real].float(), kwargs[imag].float())


# name -> (what it builds, builder(our kwargs, parameter)); an Arg says e.g. derive="arange:stride"
DERIVATIONS: dict[str, tuple[str, Callable[[dict[str, Any], str], Any]]] = {
    "arange": ("int64 0, 1, ..., our argument - 1, on the inputs' device", _arange),
    "complex": ("complex64 table from our two real tables (real,imag), e.g. cos,sin -> freqs_cis", _complex),
}


@dataclass(frozen=True)
class Arg:
    """One argument of the engine's function."""

    name: str  # the engine's parameter name
    ours: str | None = None  # our argument it takes (default: the same name); ignored when derived
    derive: str | None = None  # "rule:our_argument", a rule of DERIVATIONS
    positional: bool = False  # passed by position (in declaration order) rather than by keyword

    def value(self, kwargs: dict[str, Any]) -> Any:
        if self.derive is not None:
            rule, _, of = self.derive.partition(":")
            return DERIVATIONS[rule][1](kwargs, of)
        return kwargs.get(self.ours or self.name)

    def describe(self) -> str:
        if self.derive is not None:
            return f"{self.name}={self.derive}"
        return self.name if (self.ours or self.name) == self.name else f"{self.name}={self.ours}"


@dataclass(frozen=True)
class OpAdapter:
    """Where the engine's counterpart of one of our ops lives, and how to call it."""

    op: str  # our op's name (impl.testing.op_table.OPS_BY_NAME)
    module: str  # dotted module path inside --root (loaded by file path)
    function: str  # its name in that module ("Class.method" reaches into a class)
    args: tuple[Arg, ...]
    outputs: tuple[str, ...] = ()  # attribute names (or "0", "1", ... indices) of its result, in our order;
    #                                () = our op's output as is (in-place ops: the mutated argument)
    dtypes: tuple[str, ...] | None = None  # torch dtype names it claims for our op's dtype_args; None: all ours
    claims: tuple[str, ...] = ("core",)  # clauses of CLAUSES it claims
    stubs: tuple[str, ...] = ()  # modules replaced by placeholders when its module is loaded
    implied: tuple[str, ...] = ()  # our arguments the engine infers from the others (not passed)
    arg_ranks: tuple[tuple[str, int], ...] = ()  # (our argument, the only rank the engine takes)
    notes: str = ""

    @property
    def where(self) -> str:
        return f"{self.module}.{self.function}"

    def takes(self) -> set[str]:
        """Our argument names this adapter passes on (directly, through a derivation, or implied)."""
        out = set(self.implied)
        for arg in self.args:
            out.update(arg.derive.partition(":")[2].split(",") if arg.derive else [arg.ours or arg.name])
        return out

    def unclaimed_rank(self, kwargs: dict[str, Any]) -> str:
        """"" when every argument has a rank the engine accepts, else which one does not."""
        for name, rank in self.arg_ranks:
            value = kwargs.get(name)
            if isinstance(value, torch.Tensor) and value.dim() != rank:
                return f"{name} is {value.dim()}-D, the engine takes {rank}-D"
        return ""

    def claims_dtype(self, dtype: torch.dtype) -> bool:
        return self.dtypes is None or str(dtype).removeprefix("torch.") in self.dtypes


@dataclass(frozen=True)
class EngineAdapter:
    """One engine: its top-level package (inside --root), the stubs all its ops need, its ops."""

    name: str
    package: str
    ops: tuple[OpAdapter, ...]
    stubs: tuple[str, ...] = ()  # shared by every op (the server stack around the kernels)
    root_hint: str = ""  # what --root points at, for messages
    notes: str = ""
    metadata: tuple[Any, ...] = ()  # meta_adapter.MetadataAdapter: the engine's metadata builders

    def op(self, name: str) -> OpAdapter | None:
        return next((a for a in self.ops if a.op == name), None)

    def stubs_for(self, op: OpAdapter) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.stubs + op.stubs))

    def with_function(self, op: str, function: str, module: str | None = None) -> "EngineAdapter":
        """The same adapter with one op pointed at another function (how the fixture swaps in a bug)."""
        ops = tuple(replace(a, function=function, module=module or a.module) if a.op == op else a for a in self.ops)
        return replace(self, ops=ops)


@dataclass(frozen=True)
class EngineCall:
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def unexpressible(adapter: OpAdapter, kwargs: dict[str, Any]) -> list[str]:
    """Our arguments with a value that the adapter does not pass on (the engine cannot take the sample)."""
    return sorted(k for k, v in kwargs.items() if v is not None and k not in adapter.takes())


def engine_call(adapter: OpAdapter, kwargs: dict[str, Any]) -> EngineCall:
    positional = tuple(arg.value(kwargs) for arg in adapter.args if arg.positional)
    keywords = {arg.name: arg.value(kwargs) for arg in adapter.args if not arg.positional}
    return EngineCall(positional, keywords)


def engine_outputs(adapter: OpAdapter, result: Any) -> tuple[Any, ...] | None:
    """The engine's result in our output order (None: take our op's outputs as is)."""
    if not adapter.outputs:
        return None
    out = []
    for name in adapter.outputs:
        out.append(result[int(name)] if name.isdigit() else getattr(result, name))
    return tuple(out)
