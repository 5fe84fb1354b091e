"""impl.bench.metadata_cost on CPU: the table pairs before and after per case, and a case only the
after has (the workspace rows) stands alone; a tree imported under the before alias uses its own
modules."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ci.registration import register
from impl.bench.metadata_cost import table

ROOT = Path(__file__).resolve().parents[1]


def _row(op, variant, launches, host, kernel=2.5):
    return dict(op=op, batch=64, variant=variant, launches=launches, kernel_us=kernel, host_us=host, gpu_us=80.0,
                graph_us=3.0)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_the_table_pairs_versions_and_keeps_after_only_rows():
    rows = [_row("verify uniform", "before", 57, 1146.2), _row("verify uniform", "after", 1, 47.7),
            _row("verify uniform, workspace", "after", 1, 30.1)]
    lines = table(rows).splitlines()
    assert "kernel us" in lines[0] and "host us" in lines[0]
    plain = next(line for line in lines if line.startswith("verify uniform "))
    assert "57 -> 1" in plain and "1146.2 -> 47.7" in plain
    alone = next(line for line in lines if line.startswith("verify uniform, workspace"))
    assert "->" not in alone and "30.1" in alone


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=8)
def test_a_tree_imports_under_its_alias_with_its_own_workspace():
    """This tree imported as ``impl_before`` (how ``--before-root`` runs an older checkout beside
    ``impl``): its modules import each other under the alias, and its workspace module is found
    there (so the workspace rows would be measured for it too)."""
    code = ("import importlib, sys; from impl.bench.metadata_cost import import_renamed; from pathlib import Path;"
            f"pkg = import_renamed(Path({str(ROOT)!r}));"
            "k = importlib.import_module(pkg.__name__ + '.kernels');"
            "ws = k.metadata_workspace; tm = k.token_metadata;"
            "print(pkg.__name__, ws.__name__, tm.MetadataWorkspace is ws.MetadataWorkspace,"
            " any(m == 'impl' or m.startswith('impl.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    # impl itself is imported (the bench module lives there); the copy's modules are its own
    assert out.stdout.split() == ["impl_before", "impl_before.kernels.metadata_workspace", "True", "True"]
