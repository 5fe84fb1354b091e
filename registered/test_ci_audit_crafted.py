"""dspark-audit over crafted trees, part two (SECURITY.md "dspark-audit", docs/audit-exit-codes.md): reads
checked against the audited root, caps on every Python file parsed whole, merge keys and matrix rows
bounded, no exit 3 on crafted content, nothing raw in the log, no write through a linked folder.

Every tree is written here by the test itself, in a tmp folder (sglang-shaped: ``test/registered/`` and
``.github/workflows/``; or this project's layout through registered/fixture_repo.FixtureRepo).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml

from ci.audit import cli as audit_cli
from ci.audit.foreign import run_foreign_audit
from ci.registration import register
from ci.safe_files import MAX_SOURCE_BYTES, UnreadableFile, UnsafeOutput, write_atomic
from registered.fixture_repo import REAL_ROOT, FixtureRepo

SECRET = "SECRET_NAME_FROM_OUTSIDE"
LIMIT_S, LIMIT_MB = 30, 300
LAUNCHER = """
import json, resource, subprocess, sys
p = subprocess.run([sys.executable, *sys.argv[1:]], capture_output=True, timeout=120)
print(json.dumps({"rc": p.returncode, "out": p.stdout.decode("utf-8", "backslashreplace"),
                  "err": p.stderr.decode("utf-8", "backslashreplace"),
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""
WORKFLOW = ("name: ok\non: pull_request\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
            "      - name: run suite\n        run: python3 run_suite.py --hw cuda --suite stage-a\n")


def audit(*args: str, flags: tuple[str, ...] = (), cwd: Path = REAL_ROOT, **env_extra: str) -> dict:
    """The audit as a child of a child (RUSAGE_CHILDREN is its peak memory), with its time."""
    env = {**os.environ, "PYTHONPATH": str(REAL_ROOT), **env_extra}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, *flags, "-m", "ci.audit.cli", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=180)
    got = json.loads(proc.stdout)
    got["seconds"] = time.monotonic() - started
    return got


def sglang_tree(base: Path, tests: dict[str, str | bytes] | None = None, workflow: str = WORKFLOW) -> Path:
    root = base / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    (root / ".github" / "workflows" / "ok.yml").write_text(workflow)
    for name, text in (tests or {"test_ok.py": 'register_cuda_ci(est_time=60, suite="stage-a")\n'}).items():
        path = root / "test" / "registered" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return root


def own_tree(base: Path) -> FixtureRepo:
    repo = FixtureRepo(base / "own")
    repo.test_file("test_a.py", """
        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
        def test_a(): pass
    """)
    repo.generate_workflows()
    return repo


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    return err


# ---------------------------------------------------------------- r03: reads checked against the root
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("linked", ["impl", "reference", "reference/more.py"])
def test_impl_or_reference_linked_out_of_the_tree_is_exit_2_and_never_read(tmp_path, capsys, linked):
    """ops.py read impl/__init__.py and reference/ through a link that left --root (its "root" was each
    file's own folder): a name that only the outside file holds reached the report. Every read is now
    checked against the audited root: exit 2, one line naming the file, nothing of the outside file."""
    repo = own_tree(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "__init__.py").write_text(f'_LAZY = {{"{SECRET}": "impl.kernels"}}\n__all__ = ["{SECRET}"]\n')
    (outside / "more.py").write_text(f"def {SECRET}(): pass\n")
    target = repo.root / linked
    if linked == "reference/more.py":
        repo.write("reference/__init__.py", "from .more import *\n")
        target.symlink_to(outside / "more.py")
    else:
        for path in sorted(target.rglob("*"), reverse=True):
            path.unlink()
        target.rmdir()
        target.symlink_to(outside, target_is_directory=True)
    assert audit_cli.main(["--root", str(repo.root), "--adapter", "dspark", "--format", "json"]) == 2
    captured = capsys.readouterr()
    err = one_line(captured.err)
    assert "outside the audited tree" in err and f"{linked.split('/')[0]}/" in err, err
    assert SECRET not in captured.out + captured.err


# ---------------------------------------------------------------- r13: 1 MiB on every Python parsed whole
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("rel", ["impl/__init__.py", "reference/__init__.py", "registered/skips.py",
                                 "impl/testing/op_table.py"])
def test_every_python_file_parsed_whole_is_capped_at_1_mib(tmp_path, capsys, rel):
    """impl/__init__.py, reference/, registered/skips.py and the op table were read under the 4 MiB
    default: a 4 MiB list literal peaked at 2 GB. Each is capped at MAX_SOURCE_BYTES (the syntax tree of
    1 MiB peaks near 170 MB): just over the cap is exit 2 naming the file and the cap, never parsed."""
    repo = own_tree(tmp_path)
    if rel == "impl/testing/op_table.py":   # read only when a per-commit test mentions the op table
        repo.write("impl/__init__.py", '_LAZY = {"op_a": "impl.kernels"}\n')
        repo.test_file("test_b.py", """
            from impl.testing import op_table
            @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
            def test_b(): op_table
        """)
    big = "X = [" + "0," * ((MAX_SOURCE_BYTES + 4096) // 2) + "]\n"
    repo.write(rel, big)
    started = time.monotonic()
    assert audit_cli.main(["--root", str(repo.root), "--adapter", "dspark"]) == 2
    err = one_line(capsys.readouterr().err)
    assert rel in err and f"over the {MAX_SOURCE_BYTES}-byte cap" in err, err
    assert time.monotonic() - started < LIMIT_S


# ---------------------------------------------------------------- r06: merge keys counted while expanded
def _merge_bomb(levels: int, keys: int = 9, fan: int = 9) -> str:
    lines = ["x-b0: &b0 {" + ", ".join(f"k{i}: {i}" for i in range(keys)) + "}"]
    lines += [f"x-b{n}: &b{n} {{<<: [{', '.join([f'*b{n - 1}'] * fan)}]}}" for n in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _flatten_without_dedup(self, node):
    """PyYAML's flatten_mapping before 6.0.4 (it copied every merged pair, repeated keys included): written
    here so that the bound is checked whatever PyYAML the test runs with."""
    merge, index = [], 0
    while index < len(node.value):
        key_node, value_node = node.value[index]
        if key_node.tag == "tag:yaml.org,2002:merge":
            del node.value[index]
            subs = [value_node] if isinstance(value_node, yaml.MappingNode) else value_node.value
            for sub in subs:
                self.flatten_mapping(sub)
                merge.extend(sub.value)
        else:
            index += 1
    if merge:
        node.value = merge + node.value


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_merge_key_bomb_is_refused_before_it_expands(monkeypatch):
    """``x-bN: &bN {<<: [*bN-1 x 9]}``: PyYAML (before 6.0.4) copied 9**N pairs while it loaded, before
    the alias count could see anything (683 bytes: 37 s, 727 MB, then exit 0). BoundedLoader counts the
    pairs each merge brings in before they are copied and refuses past MAX_NODES: in well under a second
    with either PyYAML; a chain of merges of many distinct keys is refused the same way; ordinary merges
    load as before, and the CLI reports the file as unreadable-input."""
    import yaml.constructor

    from ci.safe_yaml import MAX_NODES, YamlTooLarge, load_yaml

    assert load_yaml("a: &a {x: 1, y: 2}\nb: {<<: *a, z: 3}\nc: {<<: [*a, {w: 0}], x: 9}\n") == {
        "a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 2, "z": 3}, "c": {"x": 9, "y": 2, "w": 0}}
    with pytest.raises(YamlTooLarge, match="recursive"):
        load_yaml("a: &a {x: 1, <<: *a}\n")
    wide = _merge_bomb(levels=(MAX_NODES // (600 * 9)) + 2, keys=600)   # distinct keys: no dedup can help
    for flatten in (None, _flatten_without_dedup):
        if flatten is not None:
            monkeypatch.setattr(yaml.constructor.SafeConstructor, "flatten_mapping", flatten)
        for text in (_merge_bomb(12), wide):
            started = time.monotonic()
            try:
                load_yaml(text)
                refused = False
            except YamlTooLarge as exc:
                refused = "merge keys" in str(exc)
            assert time.monotonic() - started < 1.0
            assert refused or (flatten is None and text != wide), (flatten, len(text))
    monkeypatch.undo()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_workflow_with_a_merge_key_bomb_is_one_unreadable_input_finding(tmp_path):
    wide = _merge_bomb(levels=60, keys=600)
    root = sglang_tree(tmp_path, workflow=wide + WORKFLOW)
    got = audit("--root", str(root), "--adapter", "sglang")
    assert got["rc"] == 1 and got["seconds"] < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, got
    lines = [line for line in got["out"].splitlines() if "[unreadable-input]" in line and "ok.yml" in line]
    assert len(lines) == 1 and "merge keys" in lines[0], got["out"][-2000:]


# ---------------------------------------------------------------- r05: linear registration scan
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_file_of_register_mentions_is_scanned_in_linear_time(tmp_path):
    """A 1 MiB comment line of 75,000 ``register_a_ci(`` took 15 s per file (the line of each mention was
    counted from the start of the file); four such files, 64 s. The lines are now found with one pass
    and a binary search, and the column-0 fast path never scans a call's text twice: four files,
    one subprocess, within LIMIT_S; the lines found are the right ones."""
    from ci.adapters.sglang import _fast_registrations, _lines_of

    text = "a\nbb\n\nccc"
    assert _lines_of(text, [0, 1, 2, 4, 5, 6, 9]) == {1, 2, 3, 4}
    nested = "register_cuda_ci(est_time=1, suite='s', disabled='''\nregister_cuda_ci(est_time=2, suite='t')\n''')\n"
    assert _fast_registrations("x.py", nested) is None   # a call inside another: the whole parse decides
    line = "# " + "register_a_ci(" * ((MAX_SOURCE_BYTES - 100) // 14) + "\n"
    root = sglang_tree(tmp_path, {f"test_{i}.py": "x = 1\n" + line for i in range(4)})
    got = audit("--root", str(root), "--adapter", "sglang")
    assert got["rc"] == 1 and got["seconds"] < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, (got["seconds"], got["err"])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_call_nested_in_another_is_not_read_as_a_registration_of_its_own(tmp_path):
    from ci.adapters.sglang import collect_suites

    root = sglang_tree(tmp_path, {"test_a.py": "register_cuda_ci(est_time=1, suite='s', disabled='''\n"
                                                 "register_cuda_ci(est_time=2, suite='t')\n''')\n"})
    found = collect_suites(root)
    assert [(r.suite, r.line) for r in found.registrations] == [("s", 1)] and found.problems == []


# ---------------------------------------------------------------- r16: matrix rows x script size
def _matrix_workflow(rows: int, arms: int, extra: str = "") -> str:
    script = ('case "$X" in\n' + "".join(f"  a{i}) echo {i} ;;\n" for i in range(arms)) + "esac\n" + extra
              + "python3 run_suite.py --hw cuda --suite ${{ matrix.s }}\n")
    body = "".join(f"          {line}\n" for line in script.splitlines())
    return ("name: m\non: pull_request\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-latest\n"
            "    strategy:\n      matrix:\n        s: [" + ", ".join(f"s{i}" for i in range(rows)) + "]\n"
            f"    steps:\n      - name: run suite\n        run: |\n{body}")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_matrix_rows_times_script_size_is_bounded_and_every_row_still_resolved(tmp_path):
    """A step whose 40 KB script names ``${{ matrix.s }}``, in a 256-row matrix (GitHub's cap): each row
    was a fresh read of the script (93 s). Re-reads for other rows now count against MAX_REREAD_CHARS;
    past it a row reads the script once with its row values unknown, and the runner's options are still
    resolved per row: one subprocess within LIMIT_S, all 256 suites seen (none registered: 256
    unknown-suite findings, as with no budget)."""
    root = sglang_tree(tmp_path, workflow=_matrix_workflow(256, 2000))
    got = audit("--root", str(root), "--adapter", "sglang", "--format", "json")
    assert got["rc"] == 1 and got["seconds"] < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, (got["seconds"], got["err"])
    unknown = {f["suite"] for f in json.loads(got["out"])["findings"] if f["rule"] == "unknown-suite"}
    assert unknown == {f"s{i}" for i in range(256)}, sorted(unknown)[:5]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_within_the_reread_budget_answers_are_per_row_and_past_it_unproven_not_wrong(tmp_path, monkeypatch):
    """A run reached only in one row (``if [ "${{ matrix.s }}" = s1 ]``): within the budget the row that
    reaches it makes it definite (pull_request), as before; with the budget spent, the row-free reading
    cannot tell, so the run is a maybe (unproven), never a definite answer or a missed run."""
    import ci.github.scan as scan_module
    from ci.github.scan import scan_workflows

    extra = 'if [ "${{ matrix.s }}" = s1 ]; then python3 run_suite.py --hw cuda --suite special; fi\n'
    root = sglang_tree(tmp_path, workflow=_matrix_workflow(3, 3, extra))

    def special():
        refs = [r for r in scan_workflows(root, "sglang").refs if r.target.endswith("/special")]
        return {(tuple(sorted(r.events)), tuple(sorted(r.maybe_events))) for r in refs}

    assert special() == {(("pull_request",), ())}
    monkeypatch.setattr(scan_module, "MAX_REREAD_CHARS", 0)
    assert special() == {((), ("pull_request",))}


# ---------------------------------------------------------------- no exit 3 on crafted content
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_crafted_sglang_literals_are_unreadable_registrations_not_exit_3(tmp_path, capsys):
    """``disabled={[]: 1}`` / ``{[1]}`` (TypeError in literal_eval) and an est_time of 400 digits
    (OverflowError in float()) were exit 3, in the fast path and in the whole-file parse. Each is now an
    unreadable-registration finding naming file:line (exit 1)."""
    cases = {"test_dict.py": 'register_cuda_ci(est_time=1, suite="stage-a", disabled={[]: 1})\n',
             "test_set.py": 'register_cuda_ci(est_time=1, suite="stage-a", disabled={[1]})\n',
             "test_big.py": "register_cuda_ci(est_time=1" + "0" * 400 + ', suite="stage-a")\n',
             "test_inf.py": 'register_cuda_ci(est_time=1e999, suite="stage-a")\n',
             "test_whole.py": "if True: pass\nx = 1; register_cuda_ci(est_time=1, suite='s', disabled={[]: 1})\n"}
    root = sglang_tree(tmp_path, cases)
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang"]) == 1
    captured = capsys.readouterr()
    assert captured.err == ""
    for name in cases:
        lines = [line for line in captured.out.splitlines()
                 if "[unreadable-registration]" in line and f"test/registered/{name}:" in line]
        assert len(lines) == 1, (name, captured.out[-3000:])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_registered_files_whose_names_hold_a_colon_keep_keys_of_their_own(tmp_path):
    """An unreadable registration is keyed by its file (a baseline matches on that key). Two files whose names
    share the text before a ":" (``test_a:x.py``, ``test_a:y.py``) must not share a key, or a baselined problem of
    one would hide a new problem of the other."""
    bad = 'register_cuda_ci(est_time=1, suite="stage-a", disabled={[]: 1})\n'
    root = sglang_tree(tmp_path, {"test_a:x.py": bad, "test_a:y.py": bad, "test_b.py": bad})
    keys = sorted(f.suite for f in run_foreign_audit(root).findings if f.rule == "unreadable-registration")
    assert keys == ["test/registered/test_a:x.py", "test/registered/test_a:y.py", "test/registered/test_b.py"], keys


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("rel, text, code, said", [
    ("registered/test_a.py", "import pytest\nfrom ci.registration import register\n\n"
     "@pytest.mark.skipif({[]: 1}, reason='x')\n"
     "@register(suite='kernels', hardware='cpu', schedule='per-commit', est_time=5)\ndef test_a(): pass\n", 1, ""),
    ("impl/__init__.py", "_LAZY = [1]\n", 2, "impl/__init__.py:1: _LAZY must be a literal dict"),
    ("impl/__init__.py", "_LAZY = {[]: 1}\n", 2, "impl/__init__.py:1: _LAZY must be a literal dict"),
    ("impl/__init__.py", "AUDITED_OPS = 5\n", 2, "impl/__init__.py:1: AUDITED_OPS must be a literal list"),
    ("impl/__init__.py", "def (\n", 2, "impl/__init__.py: syntax error at line 1"),
    ("reference/__init__.py", "def (\n", 2, "reference/__init__.py: syntax error at line 1"),
    ("reference/__init__.py", "__all__ = {[]: 1}\n", None, ""),
    ("registered/skips.py", "SKIP_REASONS = {\n", 2, "registered/skips.py: syntax error at line 1"),
    ("registered/skips.py", "SKIP_REASONS = {[1]: {'text': 'x'}}\n", None, ""),
    ("reference/__init__.py", "".join(f"from .m{i} import *\n" for i in range(1)), None, ""),
])
def test_crafted_files_of_this_projects_layout_are_a_finding_or_exit_2_never_3(tmp_path, capsys, rel, text, code, said):
    """Each was exit 3 (TypeError, AttributeError, SyntaxError): a skipif condition Python cannot evaluate,
    an _LAZY or AUDITED_OPS of the wrong shape, a syntax error in impl/, reference/ or
    registered/skips.py, an unhashable __all__ or SKIP_REASONS key. Now a finding (exit 0 or 1) or exit 2
    in one line naming the file (and line)."""
    repo = own_tree(tmp_path)
    repo.write(rel, text)
    rc = audit_cli.main(["--root", str(repo.root), "--adapter", "dspark"])
    captured = capsys.readouterr()
    if code == 2:
        assert rc == 2 and said in one_line(captured.err), captured.err
    else:
        assert rc in ((0, 1) if code is None else (code,)) and captured.err == "", (rc, captured.err)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_star_import_chain_of_a_thousand_modules_is_read_without_recursion(tmp_path, capsys):
    """reference/__init__.py -> m0 -> m1 ... -> m999 by ``from .mN import *``: RecursionError, exit 3. The
    exports are now gathered with a work-list: every public name of the chain counts, private ones of
    the star-imported modules do not, and a cycle ends."""
    from ci.audit.ops import reference_names

    repo = own_tree(tmp_path)
    repo.write("reference/__init__.py", "from .m0 import *\n_own_private = 1\n")
    for i in range(1000):
        repo.write(f"reference/m{i}.py", f"def op_{i}(): pass\n_hidden_{i} = 1\n"
                                         + (f"from .m{i + 1} import *\n" if i < 999 else "from .m0 import *\n"))
    names = reference_names(repo.root)
    assert {f"op_{i}" for i in range(1000)} <= names and "_own_private" in names
    assert not any(n.startswith("_hidden") for n in names)
    assert audit_cli.main(["--root", str(repo.root), "--adapter", "dspark"]) in (0, 1)
    assert capsys.readouterr().err == ""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_deep_and_overlong_folders_under_the_registered_folder_are_named_in_one_line(tmp_path, capsys):
    """``test/registered`` nested 1,100 folders deep was a RecursionError (Path.rglob recurses), and
    paths past PATH_MAX an OSError: both exit 3. The walk is an explicit stack capped at MAX_DEPTH: the
    folder past the cap, or one that cannot be listed, is an unreadable-registration finding (sglang) or
    exit 2 (this project's layout), one short line; the files above it are still read. (300 levels here:
    the walk stops at MAX_DEPTH whatever the depth, and pytest's own clean-up of tmp folders recurses.)"""
    from ci.tree_files import MAX_DEPTH, MAX_SHOWN

    def deep(base: Path, levels: int, name: str = "a") -> Path:
        folder = base
        for _ in range(levels):
            folder = folder / name
            try:
                os.mkdir(folder)
            except OSError:   # past PATH_MAX: build the rest relative to an open folder
                break
        return folder

    root = sglang_tree(tmp_path / "sg", {"test_ok.py": 'register_cuda_ci(est_time=60, suite="stage-a")\n'})
    deep(root / "test" / "registered", 300)
    fd = os.open(root / "test" / "registered", os.O_RDONLY)
    try:   # a second chain of 250-character names, past PATH_MAX (mkdir relative to the deepest open folder)
        current = fd
        for _ in range(20):
            os.mkdir("b" * 250, dir_fd=current)
            nxt = os.open("b" * 250, os.O_RDONLY, dir_fd=current)
            if current != fd:
                os.close(current)
            current = nxt
        with open(os.open("test_far.py", os.O_WRONLY | os.O_CREAT, dir_fd=current), "w") as handle:
            handle.write('register_cuda_ci(est_time=60, suite="far")\n')
        os.close(current)
    finally:
        os.close(fd)
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "", captured.err
    problems = [line for line in captured.out.splitlines() if "[unreadable-registration]" in line]
    assert any(f"nested deeper than {MAX_DEPTH}" in line for line in problems), problems
    assert any("cannot be listed" in line or "cannot be opened" in line for line in problems), problems
    assert all(len(line) < MAX_SHOWN + 400 for line in problems), [len(line) for line in problems]

    repo = own_tree(tmp_path / "own")
    deep(repo.root / "registered", 300)
    assert audit_cli.main(["--root", str(repo.root), "--adapter", "dspark"]) == 2
    assert f"nested deeper than {MAX_DEPTH}" in one_line(capsys.readouterr().err)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("where", ["test/registered/test_caf\udce9.py", ".github/workflows/caf\udce9.yml"])
def test_a_file_name_that_is_not_utf8_gives_valid_sarif_and_json(tmp_path, where):
    """``test_caf\\xe9.py`` with ``--format sarif --output F`` (the Action's mode) was a UnicodeEncodeError,
    exit 3: nothing uploaded. The SARIF is now valid UTF-8 JSON, its URI percent-encodes the name's own
    bytes and its message shows the byte as ``\\xe9``; JSON and text on stdout are the same under a
    strict UTF-8 locale."""
    root = sglang_tree(tmp_path)
    raw = os.fsencode(str(root / where))
    with open(raw, "wb") as handle:
        handle.write(b'register_cuda_ci(est_time=1, suite="stage-new")\n' if where.endswith(".py") else
                     WORKFLOW.encode().replace(b"stage-a", b"stage-b"))
    sarif = tmp_path / "out.sarif"
    strict = {"PYTHONIOENCODING": "utf-8:strict"}   # a locale whose stdout refuses surrogates
    got = audit("--root", str(root), "--adapter", "sglang", "--format", "sarif", "--output", str(sarif), **strict)
    assert got["rc"] == 1 and "internal error" not in got["err"], got["err"]
    doc = json.loads(sarif.read_bytes().decode("utf-8"))   # strict: valid UTF-8
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]
            for loc in r["locations"]}
    texts = json.dumps(doc)
    if where.endswith(".py"):   # the registration's own location
        assert any("caf%E9.py" in uri for uri in uris), uris
    assert "\\udce9" not in texts
    for fmt in ("json", "text"):
        env_got = audit("--root", str(root), "--adapter", "sglang", "--format", fmt, **strict)
        assert env_got["rc"] == 1 and env_got["err"] == "", env_got["err"]
        assert ("caf\\\\xe9" if fmt == "json" else "caf\\xe9") in env_got["out"]   # JSON: the text \xe9, escaped


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_file_name_with_a_backslash_or_a_colon_gives_valid_sarif(tmp_path):
    """A broken workflow named ``a\\b.yml`` was exit 3 in SARIF mode (the URI writer refused a backslash as
    a Windows path): the Action uploaded nothing. Such names are POSIX file names from the tree: the SARIF
    is schema-valid, each URI percent-encodes the backslash and the colons (no ``c:`` reads as a scheme)
    and resolves back to the file's own name."""
    import jsonschema
    from urllib.parse import unquote

    root = sglang_tree(tmp_path)
    names = ["a\\b.yml", "c:x.yml", "d:\\e.yml"]
    for name in names:
        (root / ".github" / "workflows" / name).write_text("on: [\n")
    sarif = tmp_path / "out.sarif"
    got = audit("--root", str(root), "--adapter", "sglang", "--format", "sarif", "--output", str(sarif))
    assert got["rc"] == 1 and got["err"] == "", got["err"]
    doc = json.loads(sarif.read_text())
    schema = json.loads((REAL_ROOT / "registered" / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(doc)
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]
            for loc in r["locations"]}
    assert {unquote(u) for u in uris} >= {f".github/workflows/{n}" for n in names}, uris
    assert not any("\\" in u or ":" in u for u in uris), uris


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_composite_step_env_of_the_wrong_type_reads_as_empty(tmp_path):
    """``uses: ./act`` with ``env: [a, b]`` or ``env: 5``, or an inner step's ``env: [a]``: TypeError, exit 3.
    Each reads as empty, as docs/audit-exit-codes.md says of every wrong-type mapping."""
    root = sglang_tree(tmp_path)
    act = root / ".github" / "actions" / "act"
    act.mkdir(parents=True)
    (act / "action.yml").write_text(json.dumps({"name": "act", "runs": {"using": "composite", "steps": [
        {"run": "python3 run_suite.py --hw cuda --suite stage-renamed", "shell": "bash", "env": ["a"]}]}}))
    jobs = {f"j{i}": {"runs-on": "ubuntu-latest", "steps": [{"uses": "./.github/actions/act", "env": env}]}
            for i, env in enumerate((["a", "b"], 5, None))}
    (root / ".github" / "workflows" / "comp.yml").write_text(json.dumps(
        {"name": "comp", "on": "pull_request", "permissions": {}, "jobs": jobs}))
    got = audit("--root", str(root), "--adapter", "sglang", "--format", "json")
    assert got["rc"] == 1 and got["err"] == "", got["err"]
    assert any("stage-renamed" in f["message"] for f in json.loads(got["out"])["findings"])


# ---------------------------------------------------------------- r10, r12, ANSI: nothing raw in the log
WARNED = 'x = f"""{1}\n::add-mask::hello \\d"""\n'


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_python_warnings_about_the_audited_code_never_reach_the_log(tmp_path):
    """An invalid escape in a test file: ast.parse warns (SyntaxWarning on 3.12+, DeprecationWarning
    before) and the default warning print quotes the source line, read from disk by its file name,
    so ``::add-mask::hello`` reached stderr raw on 3.12. Every parse of the tree's Python is now
    quiet and names no path: with every warning shown (-W always, which prints it on any version)
    stderr stays empty, in both layouts, also with the audited root as the working directory (-P, as
    the console script: ``-m`` would import the tree's own packages first)."""
    from ci.adapters.sglang import collect_suites
    from ci.registry.collect import collect

    sg = sglang_tree(tmp_path / "sg", {"test_ok.py": 'register_cuda_ci(est_time=60, suite="stage-a")\n',
                                       "test_warn.py": "def f():\n    pass\n" + '    register_cuda_ci(est_time=1, '
                                       'suite="s")\n' + WARNED})
    repo = own_tree(tmp_path / "own")
    repo.write("registered/test_warn.py", "from ci.registration import register\n" + WARNED)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        collect_suites(sg)
        from ci.registry.catalog import load_catalog
        collect(repo.root, load_catalog(repo.root))
    assert [str(w.message) for w in seen] == []
    for root, adapter in ((sg, "sglang"), (repo.root, "dspark")):
        for cwd in (REAL_ROOT, root):
            got = audit("--root", str(root), "--adapter", adapter, flags=("-P", "-W", "always"), cwd=cwd)
            assert got["rc"] in (0, 1) and got["err"] == "", got["err"]
            assert not any(line.lstrip().startswith("::") for line in got["out"].splitlines())


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_json_and_sarif_on_stdout_carry_no_command_in_either_form(tmp_path):
    """``--format json``/``sarif`` printed to stdout held ``"suite": "##[add-mask]G"``: the runner parses
    the legacy ``##[`` form anywhere in a line. ``::`` and ``##[`` are now JSON-escaped on stdout
    (``\\u003a``, ``\\u005b``): no line holds either, and the document parses to the same strings as the
    file written with --output."""
    suite = "##[add-mask]G::warning::x\x1b[2K"
    root = sglang_tree(tmp_path, {"test_ok.py": f"register_cuda_ci(est_time=60, suite={suite!r})\n"})
    for fmt in ("json", "sarif"):
        printed = audit("--root", str(root), "--adapter", "sglang", "--format", fmt)
        written = tmp_path / f"out.{fmt}"
        audit("--root", str(root), "--adapter", "sglang", "--format", fmt, "--output", str(written))
        assert printed["rc"] == 1 and "##[" not in printed["out"] and "::" not in printed["out"]
        assert "\x1b" not in printed["out"]
        assert json.loads(printed["out"]) == json.loads(written.read_text()), fmt
        assert suite in printed["out"].encode().decode("unicode_escape", "ignore") or suite in json.dumps(
            json.loads(printed["out"]), ensure_ascii=False)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_log_safe_writes_control_characters_and_lone_surrogates_as_text():
    from ci.log_escape import json_log_safe, log_safe

    text = log_safe("a\x1b[2Kb\x07c\x9bd\tcaf\udce9 ok\n  ::add-mask::x")
    assert text == "a\\x1b[2Kb\\x07c\\x9bd\tcaf\\xe9 ok\n  %3A%3Aadd-mask::x", text
    text.encode("utf-8")
    doc = json_log_safe(json.dumps({"k": "x::y ##[z \x85 caf\udce9"}, ensure_ascii=False))
    assert "::" not in doc and "##[" not in doc and json.loads(doc) == {"k": "x::y ##[z \x85 caf\\xe9"}


# ---------------------------------------------------------------- r11: no write through a linked folder
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("flag", ["--output", "--write-baseline"])
def test_an_output_whose_folder_is_a_link_is_exit_2_and_writes_nothing_outside(tmp_path, flag, monkeypatch, capsys):
    """``reports -> outside`` committed in the tree: ``--output <root>/reports/audit.sarif`` replaced the
    file outside, ``--write-baseline`` created one. A linked component anywhere in the output's folder
    (absolute, or relative below the working directory) is now refused, exit 2, one line; nothing is
    written outside, and no temporary file is left."""
    root = sglang_tree(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "audit.sarif").write_text("keep me")
    (root / "reports").symlink_to(victim, target_is_directory=True)
    (root / "real").mkdir()
    (root / "real" / "inner").symlink_to(victim, target_is_directory=True)
    extra = ["--format", "sarif"] if flag == "--output" else []
    monkeypatch.chdir(root)
    for path in (str(root / "reports" / "audit.sarif"), "reports/audit.sarif", "real/inner/audit.sarif",
                 "real/../reports/audit.sarif"):
        assert audit_cli.main(["--root", str(root), "--adapter", "sglang", *extra, flag, path]) == 2, path
        err = one_line(capsys.readouterr().err)
        assert flag in err and ("is a symlink" in err or "resolves to" in err), err
        assert sorted(p.name for p in victim.iterdir()) == ["audit.sarif"]
        assert (victim / "audit.sarif").read_text() == "keep me"
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang", *extra, flag, "real/out.sarif"]) in (0, 1)
    assert (root / "real" / "out.sarif").is_file()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_write_atomic_refuses_any_linked_folder_and_read_inside_checks_what_it_opened(tmp_path, monkeypatch):
    from ci.safe_files import linked_folder, read_inside

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(UnsafeOutput, match="is a symlink"):
        write_atomic(tmp_path / "link" / "x.json", "{}", refuse_linked_folders=True)
    assert linked_folder(tmp_path / "real") is None and not list((tmp_path / "real").iterdir())
    write_atomic(tmp_path / "real" / "x.json", "caf\udce9\n")   # a lone surrogate: written escaped, no crash
    assert (tmp_path / "real" / "x.json").read_bytes() == b"caf\\udce9\n"

    (tmp_path / "a.py").write_text("A = 1\n")
    (tmp_path / "b.py").write_text("B = 2\n")
    real_open = os.open

    def swapping_open(path, flags, *args, **kwargs):   # the file is replaced between the check and the open
        if str(path).endswith("a.py"):
            os.replace(tmp_path / "b.py", tmp_path / "a.py")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)
    with pytest.raises(UnreadableFile, match="changed while it was opened"):
        read_inside(tmp_path, tmp_path / "a.py")


DIGITS = "1" * 5000   # past the 4,300 digits int() reads
HEX = "0x" + "F" * 400   # past a float's range


def _numbers_workflow(run: str = "python3 run_suite.py --hw cuda --suite stage-a", on: str = "pull_request",
                      step_if: str = "", runs_on: str = "ubuntu-latest") -> str:
    return (f"name: n\non: {on}\npermissions: {{}}\njobs:\n  j:\n    runs-on: {runs_on}\n    steps:\n"
            f"      - name: run suite\n{step_if}        run: {json.dumps(run)}\n")


CRAFTED_NUMBERS = {
    # each raised ValueError or OverflowError inside the audit before (exit 3, "a bug in the audit")
    "partition id in other digits": _numbers_workflow(
        "python3 run_suite.py --hw cuda --suite stage-a --auto-partition-id \u00b2 --auto-partition-size 3"),
    "partition size of 5,000 digits": _numbers_workflow(
        f"python3 run_suite.py --hw cuda --suite stage-a --auto-partition-id 0 --auto-partition-size {DIGITS}"),
    "cron in other digits": _numbers_workflow(on="\n  schedule:\n    - cron: '0 0 \u00b2 \u00b2 *'"),
    "cron of 5,000 digits": _numbers_workflow(on=f"\n  schedule:\n    - cron: '0 0 1 {DIGITS} *'"),
    "hexadecimal past a float": _numbers_workflow(step_if=f"        if: ${{{{ {HEX} == 1 }}}}\n"),
    "format placeholder of 5,000 digits": _numbers_workflow(
        "python3 run_suite.py --hw cuda --suite ${{ format('stage-a{" + DIGITS + "}', 'x') }}"),
    "a GPU count of 5,000 digits": _numbers_workflow(f"python3 run_suite.py --hw amd --suite stage-{DIGITS}-gpu",
                                                     runs_on="linux-mi325-gpu-1"),
    "a shell test of 5,000 digits": _numbers_workflow(
        f"[ {DIGITS} -eq 1 ] && exit 0\npython3 run_suite.py --hw cuda --suite stage-a"),
}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("name", sorted(CRAFTED_NUMBERS))
def test_numbers_int_and_float_cannot_hold_are_read_not_crashed_on(tmp_path, name):
    """A crafted number in a workflow (a shard, a cron field, an expression literal, a format placeholder,
    a suite's GPU count, a shell test) is read as no number, an infinite one or an unknown: the audit
    answers with findings (ci/numbers.py), never exit 3."""
    tests = {"test_ok.py": 'register_cuda_ci(est_time=60, suite="stage-a")\n'
                           f'register_amd_ci(est_time=60, suite="stage-{DIGITS}-gpu")\n'}
    root = sglang_tree(tmp_path, tests=tests, workflow=CRAFTED_NUMBERS[name])
    report = run_foreign_audit(root)
    assert report.findings is not None
    if name == "a GPU count of 5,000 digits":
        [mismatch] = [f for f in report.findings if f.rule == "runner-mismatch"]
        assert mismatch.severity == "error" and "wasteful" not in mismatch.message   # too few GPUs: no note
