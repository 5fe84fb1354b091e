"""The import graph has no cycle and keeps its layers (ci/tools/import_graph.py; docs/contributing.md).

The repository itself must pass; small planted trees show each rule can fail: a cycle
closed by an import inside a function, ``ci/`` importing a test module, and
``reference/`` importing the implementation. This file needs no torch.
"""
from __future__ import annotations

from pathlib import Path

from ci.tools.import_graph import PACKAGES, cycles, import_edges, layer_violations, main
from ci.registration import register

ROOT = Path(__file__).resolve().parents[1]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_repository_has_no_cycle_and_keeps_its_layers(capsys):
    graph = import_edges(ROOT)
    assert "impl.e2e" in graph and "ci.audit.own" in graph, f"the graph missed modules: {sorted(graph)[:10]}"
    assert "impl.gates" in graph["ci.audit.rules.ungated_value"], \
        "ci.audit.rules.ungated_value imports impl.gates: an edge the reader must see"
    assert cycles(graph) == []
    assert layer_violations(graph) == []
    assert main(["--root", str(ROOT)]) == 0
    assert "cycles: none" in capsys.readouterr().out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_cycle_through_a_function_level_import_is_found(tmp_path, capsys):
    root = _tree(tmp_path, {
        "impl/a.py": "from impl.b import helper\n",
        "impl/b.py": "def helper():\n    from impl import a  # postponed, still a cycle\n    return a\n",
        "impl/c.py": "import impl.a\n",  # reaches the cycle, is not part of it
    })
    assert cycles(import_edges(root)) == [["impl.a", "impl.b"]]
    assert main(["--root", str(root)]) == 1
    assert "impl.a <-> impl.b" in capsys.readouterr().out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_layer_rules_name_the_offending_import(tmp_path):
    root = _tree(tmp_path, {
        "registered/helpers.py": "X = 1\n",
        "ci/audit/own.py": "from registered.helpers import X\n",
        "impl/op.py": "Y = 2\n",
        "reference/oracle.py": "from ..impl import op\n",  # relative imports resolve too
        "registered/test_x.py": "import ci.audit.own\nimport impl.op\n",  # tests may import anything
    })
    assert layer_violations(import_edges(root)) == [
        "ci.audit.own imports registered.helpers (ci/ must not import registered/)",
        "reference.oracle imports impl.op (reference/ must not import impl/)",
    ]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_root_without_the_packages_is_refused(tmp_path, capsys):
    try:
        main(["--root", str(tmp_path)])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("main accepted a root without impl/, reference/, ci/, registered/")
    assert "--root" in capsys.readouterr().err
