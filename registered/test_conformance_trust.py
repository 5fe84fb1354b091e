"""The conformance kit as a tool another project runs (issue 30 item 8, issue 32's small things).

The kit executes the engine's code, so by default none of it runs in the kit's own process (a
marker the engine's module writes at import names the process that ran it); ``--help`` says
the tree must be trusted and lists the exit codes; a run that compares nothing exits 5 with a
one-line reason; ``--json`` into a missing folder fails before anything runs; ``--root`` may be
the engine's repository root; and the pytest entry works from an engine's checkout while the kit
is importable from this project's source tree (an editable install), whose root conftest must
not be loaded into the engine's session.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from ci.registration import register
from impl.testing.conformance import metadata
from impl.testing.conformance.__main__ import TRUST, main, resolve_root
from impl.testing.conformance.engines import fixture

REPO = Path(__file__).resolve().parent.parent
TREE = REPO / "registered" / "fixtures" / "engine_tree"
MARK = "import os as _os\nwith open({path!r}, 'a') as _f:\n    _f.write(f'{{_os.getpid()}}\\n')\n"


def _marked_tree(tmp_path: Path) -> tuple[Path, Path]:
    root, marker = tmp_path / "tree", tmp_path / "pids.txt"
    shutil.copytree(TREE, root)
    file = root / "toyengine" / "attention" / "ring_meta.py"
    head, sep, rest = file.read_text().partition("from __future__ import annotations\n")
    file.write_text(head + sep + MARK.format(path=str(marker)) + rest)
    return root, marker


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=8)
def test_metadata_builders_run_only_in_a_child_process_by_default(tmp_path):
    """(The op cases: registered/test_conformance_kit.py::test_isolated_runs_survive_a_crash_and_a_device_fault.)"""
    root, marker = _marked_tree(tmp_path)
    meta = metadata.run_builder(fixture.ADAPTER, fixture.RING_META_BUILDER, str(root), "cpu")
    assert meta.verdict == "agree" and meta.compared == 36, (meta.verdict, meta.detail)
    pids = {int(line) for line in marker.read_text().split()}
    assert pids and os.getpid() not in pids, pids  # the builder's module ran, never in this process
    assert not any(name.startswith("toyengine") for name in sys.modules)


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_help_says_the_root_is_executed_and_lists_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert done.value.code == 0
    assert "The kit executes the engine's code" in out and "--root must be a tree you trust" in out
    for code in ("0 every compared case agrees", "1 a core difference", "2 a bad argument", "5 nothing was compared"):
        assert code in out, code
    assert "--in-process" in out
    docs = " ".join((REPO / "docs" / "conformance.md").read_text().split())
    assert TRUST in docs  # the same sentence where the README and SECURITY.md link


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_nothing_compared_is_not_a_pass_and_json_to_a_missing_folder_fails_up_front(tmp_path, capsys):
    code = main(["--engine", "fixture", "--root", str(TREE), "--ops", "unified_inject_loc", "--in-process"])
    out, err = capsys.readouterr()
    assert code == 5 and "result: NOTHING COMPARED" in out
    assert err.count("\n") == 1 and "nothing was compared (unified_inject_loc: not provided)" in err, err
    code = main(["--engine", "fixture", "--root", str(TREE), "--json", str(tmp_path / "absent" / "r.json")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "--json: the folder of" in err, (out, err)


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_root_may_be_the_repository_root_or_its_python_folder(tmp_path):
    shutil.copytree(TREE / "toyengine", tmp_path / "python" / "toyengine")
    assert resolve_root(tmp_path, "toyengine") == tmp_path / "python"
    assert resolve_root(tmp_path / "python", "toyengine") == tmp_path / "python"
    assert resolve_root(tmp_path / "elsewhere", "toyengine") is None


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=3)
def test_pytest_entry_from_an_engine_checkout_with_the_kit_in_a_source_tree(tmp_path, monkeypatch, capsys):
    """The kit is imported from this checkout (as under an editable install) while pytest runs in the
    engine's checkout: its tests must be collected without loading this checkout's root conftest."""
    shutil.copytree(TREE / "toyengine", tmp_path / "toyengine")
    monkeypatch.chdir(tmp_path)
    code = pytest.main(["-p", "impl.testing.conformance.pytest_plugin", "-p", "no:cacheprovider", "--collect-only",
                        "-q", "--rootdir", str(tmp_path), "--engine", "fixture", "--engine-root", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]  # was: "Defining 'pytest_plugins' in a non-top-level conftest" (this checkout's)
    assert "test_conformance[build_commit_inject_layout]" in out, out[-2000:]
