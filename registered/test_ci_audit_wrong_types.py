"""dspark-audit over workflows whose values have the wrong type: never an internal error.

A crafted workflow can put a number, a list or a mapping where GitHub expects something else
(``shell: 7``, ``steps: 5``, ``matrix: include: true``); GitHub rejects such a file, but the audit
reads it, and an exception there was exit 3 ("internal error") where the caller expects 0, 1 or 2
(docs/audit-exit-codes.md). Hypothesis replaces one to three values of a workflow of the sglang-shaped
fixtures (and of the fork-safety fixtures, whose jobs call reusable workflows) with values of other
types, and runs the audit in-process on the tree: the exit code must be 0, 1 or 2. Per commit a few
hundred examples (a few ms each), nightly ten times more.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import shutil
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci.audit import cli as audit_cli
from ci.registration import register
from registered.fixture_repo import REAL_ROOT
from registered.schedule import hypothesis_profile

FIXTURES = REAL_ROOT / "registered" / "fixtures"
SGLANG_BASE = FIXTURES / "sglang" / "base"
WORKFLOWS = sorted((SGLANG_BASE / ".github" / "workflows").glob("*.yml")) + sorted(
    (FIXTURES / "fork_safety").glob("*.yml"))
DOCS = {path: yaml.safe_load(path.read_text()) for path in WORKFLOWS}
ODD = [5, -1, 0, 1.5, True, False, None, "text", "", "${{ x }}", "${{ fromJSON(needs.a.outputs.b) }}", [], [1, "a"],
       [[]], {}, {"a": 1}, {"run": 5}, {"steps": 5}]
EXAMPLES = 3000 if hypothesis_profile() == "nightly" else 300


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, path + (index,))


def _replaced(doc, path, value):
    if not path:
        return value
    node = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return doc


@st.composite
def wrong_typed_workflow(draw):
    source = draw(st.sampled_from(WORKFLOWS))
    doc = copy.deepcopy(DOCS[source])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))))
        doc = _replaced(doc, path, copy.deepcopy(draw(st.sampled_from(ODD))))
    return source, doc


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=15)
@register(suite="ci", hardware="cpu", schedule="nightly", est_time=120)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=wrong_typed_workflow())
def test_a_value_of_the_wrong_type_is_never_an_internal_error(case):
    source, doc = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        shutil.copytree(SGLANG_BASE, root)
        if source.parent == FIXTURES / "fork_safety":  # with the reusable workflows its jobs call
            for other in (FIXTURES / "fork_safety").glob("*.yml"):
                shutil.copy(other, root / ".github" / "workflows" / other.name)
        (root / ".github" / "workflows" / source.name).write_text(json.dumps(doc, default=str))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = audit_cli.main(["--root", str(root), "--adapter", "sglang", "--format", "json"])
    assert code in (0, 1, 2), f"{source.name}: {json.dumps(doc, default=str)[:2000]}\n{err.getvalue()}"
