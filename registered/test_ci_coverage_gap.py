"""Coverage gap: changed impl lines that no per-commit cpu job executes (on a tiny git repo)."""
from __future__ import annotations

import subprocess

from ci.tools.coverage_gap import parse_diff, ranges
from registered.fixture_repo import FixtureRepo
from ci.registration import register

BASE_IMPL = '''\
def tested(x):
    return x + 1
'''

CHANGED_IMPL = '''\
def tested(x):
    y = x + 1
    return y


def untested(x):
    if x > 0:
        return x * 2
    return -x


def only_nightly(x):
    return x - 1
'''

TESTS = '''
from impl.mod import only_nightly, tested


@register(suite="unit", hardware="cpu", schedule="per-commit", est_time=1)
def test_tested():
    assert tested(1) == 2


@register(suite="unit", hardware="mi35x-8", schedule="nightly", est_time=1)
def test_only_nightly():
    assert only_nightly(1) == 0
'''


def _mod_repo(tmp_path) -> FixtureRepo:
    """impl/mod.py at BASE_IMPL and registered/test_mod.py (TESTS), not yet under git."""
    repo = FixtureRepo(tmp_path)
    repo.write("impl/__init__.py", "")
    repo.write("impl/mod.py", BASE_IMPL)
    repo.test_file("test_mod.py", TESTS)
    return repo


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", *args],
                   cwd=root, check=True, capture_output=True)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_coverage_gap_lists_changed_lines_no_per_commit_job_runs(tmp_path):
    repo = _mod_repo(tmp_path)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "base")
    repo.write("impl/mod.py", CHANGED_IMPL)
    repo.write("impl/new_module.py", "def brand_new():\n    return 1\n")   # untracked: every line is new

    proc = repo.run_module("ci.tools.coverage_gap", "--base", "HEAD")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    gaps = [line.strip() for line in proc.stdout.splitlines() if line.startswith("  impl/")]
    # tested() runs per-commit; untested() never; only_nightly() only in a nightly job
    assert gaps == ["impl/mod.py: 7-9, 13", "impl/new_module.py: 1-2"], proc.stdout  # never imported

    proc = repo.run_module("ci.tools.coverage_gap", "--base", "HEAD", "--report-only")
    assert proc.returncode == 0 and "impl/mod.py: 7-9, 13" in proc.stdout

    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "change")
    proc = repo.run_module("ci.tools.coverage_gap", "--base", "HEAD")
    assert proc.returncode == 0 and "no changed Python lines" in proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_diff_parsing_and_range_formatting():
    diff = """\
diff --git a/impl/a.py b/impl/a.py
--- a/impl/a.py
+++ b/impl/a.py
@@ -3 +3,2 @@ def f():
-    old
+    new
+    newer
@@ -10,2 +11,0 @@
-    gone
-    gone too
@@ -20,0 +20 @@
+    added
diff --git a/impl/gone.py b/impl/gone.py
--- a/impl/gone.py
+++ /dev/null
@@ -1,2 +0,0 @@
-x
-y
"""
    assert parse_diff(diff) == {"impl/a.py": {3, 4, 20}}
    assert ranges({1, 2, 3, 7, 9, 10}) == "1-3, 7, 9-10"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_bad_arguments_get_one_line_and_exit_2_before_any_work(tmp_path):
    repo = _mod_repo(tmp_path)
    proc = repo.run_module("ci.tools.coverage_gap", "--base", "HEAD")          # not a git repository yet
    assert proc.returncode == 2 and "not a git working tree" in proc.stderr and "Traceback" not in proc.stderr
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "base")
    for args, needle in ((("--base", "nosuchrev"), "--base 'nosuchrev': not a git revision here"),
                         (("--base", "HEAD", "--hardware", "tpu-9"), "--hardware 'tpu-9': not a label"),
                         (("--base", "HEAD", "--suite-prefix", "zzz"), "no per-commit job matches")):
        proc = repo.run_module("ci.tools.coverage_gap", *args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert needle in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "[coverage-gap]" not in proc.stdout
