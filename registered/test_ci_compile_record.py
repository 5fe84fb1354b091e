"""ci.tools.compile_kernels records a graph-safe op's launches without running its kernels: the same launches."""
from __future__ import annotations

import json

from ci.tools.compile_kernels import record_launches
from ci.registration import register
from impl.testing.op_table import OPS


def _key(specs: list[dict]) -> set[str]:
    return {json.dumps(s, sort_keys=True) for s in specs}


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=20)
def test_launches_recorded_without_executing_equal_the_executed_ones():
    runs = []
    for op in OPS:
        if "triton" not in op.tags:
            continue
        assert op.graph_safe, f"{op.name}: launches Triton kernels but is not graph safe: it must run to record"
        variants = [{}, *(op.variants() if op.variants else {}).values()]
        samples = op.samples(False)
        picked = samples if "renorm" not in op.name else samples[:1]   # renorm: each tuning, one sample
        runs += [(op, sample, extra) for sample in picked for extra in variants]
    executed = record_launches(runs, execute_graph_safe=True)
    recorded = record_launches(runs)
    assert len(executed) >= 20
    assert _key(recorded) == _key(executed)
