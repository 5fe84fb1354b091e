"""Run an engine's metadata builders: values against reference/, and the sync contract per policy cell.

For each :class:`~impl.testing.conformance.meta_adapter.MetadataAdapter` and each of its paths, under
each emulated platform (``impl.platform.emulate``) and each algorithm the path runs under, every
metadata sample is run through the engine's entry and builder (``meta_cases``). A cell says whether
the builder kept the expansion's sync (``repeat_interleave`` without ``output_size``) and compares
that with the sync policy (``impl.sync_policy``, docs/design.md §4.3): eliding where the policy keeps
the sync FAILS (naming the builder, the path and the policy row); keeping a sync the policy allows
is a note. Value differences (a field, the token count fed, an ``output_size`` that is not the sum of
its repeats) fail the builder, shown on the smallest sample. By default everything runs in one
spawned child per builder (the engine's code never runs in the kit's process).
Imports torch (in the child), impl and the kit's modules.
"""
from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass, field

from impl import sync_policy
from impl.testing.conformance.adapter import EngineAdapter
from impl.testing.conformance.isolate import CASE_TIMEOUT_S, CLOSED, HUNG, next_message, reap, stop_message
from impl.testing.conformance.meta_adapter import MetadataAdapter

ALGORITHMS = ("mtp", "dspark")


@dataclass
class SyncCell:
    path: str  # the engine path (MetaPath.name)
    layout: str  # its policy path
    platform: str
    algorithm: str
    engine: str  # "kept", "elided", "mixed", "not built" (the builder wrote nothing here), "raises"
    policy: str  # the policy row's decision
    verdict: str  # "agree", "FAIL", "note", "n/a"
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict == "FAIL"


@dataclass
class ValueCase:
    path: str
    platform: str
    algorithm: str
    sample: str
    tokens: int
    problems: list[str]
    call: str


@dataclass
class MetaResult:
    name: str
    where: str
    verdict: str  # "agree", "differ", "sync-policy", "differ, sync-policy", "not provided", "load error"
    cells: list[SyncCell] = field(default_factory=list)
    values_agree: int = 0
    value_failures: list[ValueCase] = field(default_factory=list)
    stubs: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict not in ("agree", "not provided")

    @property
    def compared(self) -> int:
        return self.values_agree + len(self.value_failures)

    @property
    def smallest_failures(self) -> list[ValueCase]:
        """Per (path, problem kind), the failing case with the fewest tokens."""
        best: dict[tuple[str, str], ValueCase] = {}
        for case in self.value_failures:
            key = (case.path, case.problems[0].split(":")[0].split(" ")[0])
            if key not in best or case.tokens < best[key].tokens:
                best[key] = case
        return list(best.values())


def judge(engine_state: str, policy: str) -> str:
    """A cell's verdict: eliding where the policy keeps the sync fails; keeping where it allows is a note."""
    if engine_state in ("not built", "raises"):
        return "n/a"
    keeps = policy == sync_policy.KEEP_SYNC
    if engine_state in ("elided", "mixed") and keeps:
        return "FAIL"
    if engine_state == "kept" and not keeps:
        return "note"
    return "agree"


def _cell_detail(adapter: MetadataAdapter, path, platform: str, algorithm: str, verdict: str) -> str:
    row = sync_policy.lookup(platform, algorithm, path.layout)
    if verdict == "FAIL":
        return (f"{adapter.where} elides the expansion's sync on {path.name} ({path.entry}) where the policy "
                f"row ({row.platform}, {row.algorithm}, {row.path}) -> {row.decision} keeps it: {row.reason}")
    if verdict == "note":
        return f"keeps a sync the policy row ({row.platform}, {row.algorithm}, {row.path}) allows to drop"
    return ""


def run_builder_here(engine: EngineAdapter, adapter: MetadataAdapter, root: str, device: str) -> MetaResult:
    """Load and run one builder in this process (the child, by default)."""
    import impl.kernels  # noqa: F401 - Triton's mode is fixed before the engine loads
    from impl.platform import emulate
    from impl.testing.conformance.cases import _exc_text
    from impl.testing.conformance.loader import NotFound, load_function, tree_imports
    from impl.testing.conformance.meta_cases import SAMPLES, call_path, describe_case, make_case, value_problems
    from impl.testing.conformance.meta_rules import value_objects

    stubs = tuple(dict.fromkeys(engine.stubs + adapter.stubs))
    values = value_objects(adapter.values)
    try:
        builder, log = load_function(root, adapter.module, adapter.builder, stubs, values)
        entries = {p.name: load_function(root, adapter.module, p.entry, stubs, values)[0] for p in adapter.paths}
    except NotFound as exc:
        return MetaResult(adapter.name, adapter.where, "not provided", detail=f"not found at this commit: {exc}")
    except Exception as exc:  # noqa: BLE001 - a module that fails to import is reported, not raised
        return MetaResult(adapter.name, adapter.where, "load error", detail=_exc_text(exc))
    result = MetaResult(adapter.name, adapter.where, "agree", stubs=list(log.stubs))
    for path in adapter.paths:
        for platform in adapter.platforms:
            for algorithm in ALGORITHMS:
                policy = sync_policy.lookup(platform, algorithm, path.layout).decision
                if algorithm not in path.algorithms:
                    continue
                states = []
                for sample in SAMPLES:
                    case = make_case(adapter, path, sample, device)
                    with emulate(platform), tree_imports(root, engine.package, stubs, values):
                        out = call_path(adapter, entries[path.name], builder, path, case, device)
                    states.append("raises" if out.error and not out.written else
                                  "not built" if not out.written else "kept" if out.expand_sync else "elided")
                    if not out.written and not out.error:
                        continue
                    problems = value_problems(adapter, case, out)
                    if problems:
                        result.value_failures.append(ValueCase(path.name, platform, algorithm, case.name,
                                                               sum(case.lens), problems, describe_case(case)))
                    else:
                        result.values_agree += 1
                built = [s for s in states if s in ("kept", "elided")]
                state = ("raises" if "raises" in states else "not built") if not built else \
                    built[0] if len(set(built)) == 1 else "mixed"
                verdict = judge(state, policy)
                result.cells.append(SyncCell(path.name, path.layout, platform, algorithm, state, policy, verdict,
                                             _cell_detail(adapter, path, platform, algorithm, verdict)))
    parts = (["differ"] if result.value_failures else []) + (["sync-policy"] if any(c.failed for c in result.cells)
                                                             else [])
    result.verdict = ", ".join(parts) or "agree"
    return result


def _child(engine, adapter, root, device, out) -> None:
    try:
        out.send(run_builder_here(engine, adapter, root, device))
    except Exception as exc:  # noqa: BLE001 - the harness failed: say so in one line
        out.send(MetaResult(adapter.name, adapter.where, "load error", detail=f"harness: {type(exc).__name__}: {exc}"))


def run_builder(engine: EngineAdapter, adapter: MetadataAdapter, root: str, device: str,
                isolate: bool = True, case_timeout: float = CASE_TIMEOUT_S) -> MetaResult:
    """One builder's checks, in a spawned child unless ``isolate`` is off; a child that sends nothing
    for ``case_timeout`` seconds is stopped and the builder reported as a load error (hung)."""
    if not isolate:
        return run_builder_here(engine, adapter, root, device)
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(engine, adapter, root, device, send))
    child.start()
    send.close()
    result = next_message(receive, child, case_timeout)
    receive.close()
    reap(child, case_timeout)
    if result is HUNG:
        return MetaResult(adapter.name, adapter.where, "load error", detail=stop_message(case_timeout))
    if result is CLOSED:
        return MetaResult(adapter.name, adapter.where, "load error",
                          detail=f"crashed the process (exit code {child.exitcode})")
    return result


def run_metadata(engine: EngineAdapter, root: str, device: str, names: list[str] | None = None,
                 isolate: bool = True, case_timeout: float = CASE_TIMEOUT_S) -> list[MetaResult]:
    chosen = [m for m in engine.metadata if not names or m.name in names]
    return [run_builder(engine, m, root, device, isolate, case_timeout) for m in chosen]
