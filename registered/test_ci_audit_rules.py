"""The audit's rule registry (ci/audit/rules/, a module a rule), the docs generated from it, the output format,
and the two rules from issue 24: suite-name-typo and non-native-gpu-backend."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import yaml

from ci.audit.own import run_audit
from ci.audit.report import FindingCollector, format_findings
from ci.audit.rules import DOCS, FOREIGN_RULES, MODULES, OWN_RULES, splice
from ci.audit.rules import REGISTRY as RULES
from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo
from registered.test_ci_audit import TODAY, baseline


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_every_rule_id_the_audits_use_is_registered_once_with_its_prose():
    """Every ``report.add(id, ...)`` / ``report.extend(id, ...)`` names a declared rule: a rule module only
    its own (``RULE.id``, never a bare string), the audits and the shared modules a declared one."""
    used: set[str] = set()
    ids = {m.__name__.rpartition(".")[2]: m.RULE.id for m in MODULES}
    modules = sorted((REAL_ROOT / "ci" / "audit" / "rules").glob("*.py"))
    assert {p.stem for p in modules} - {"__init__", "__main__"} == set(ids), "a rule module is not in the list"
    for path in [*modules, *(REAL_ROOT / "ci" / "audit").glob("*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("add", "extend") and node.args):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                assert path.parent.name != "rules", f"{path.name}:{node.lineno}: a bare rule id; use RULE.id"
                used.add(arg.value)
            elif isinstance(arg, ast.Attribute) and arg.attr == "id" and isinstance(arg.value, ast.Name) \
                    and arg.value.id == "RULE":
                assert path.stem in ids, f"{path.name}:{node.lineno}: RULE.id outside a rule module"
                used.add(ids[path.stem])
            elif isinstance(arg, ast.Attribute) and arg.attr == "id" and isinstance(arg.value, ast.Attribute) \
                    and arg.value.attr == "RULE" and isinstance(arg.value.value, ast.Name):
                assert path.parent.name != "rules", f"{path.name}:{node.lineno}: reports another rule's id"
                used.add(ids[arg.value.value.id])
    assert used >= {"masked-step", "dormant-suite"}, "no report.add(...) found: the test reads the wrong thing"
    assert used <= set(RULES.rules), used - set(RULES.rules)
    assert used == set(RULES.rules) == set(OWN_RULES) | set(FOREIGN_RULES), "a declared rule reports nothing"
    for rule in RULES:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)+", rule.id), rule.id
        assert rule.title and rule.prevents and rule.example and f"[{rule.id}]" in rule.output


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_rule_tables_in_the_docs_are_the_generated_ones():
    for rel in DOCS:
        text = (REAL_ROOT / rel).read_text()
        assert "audit-rules:begin" in text, rel
        assert splice(text) == text, f"{rel}: rule table drifted; run python -m ci.audit.rules --write"
    stale = splice("a\n<!-- audit-rules:begin (python -m ci.audit.rules --markdown) -->\nSTALE-ROW\n"
                   "<!-- audit-rules:end -->\n")
    assert "STALE-ROW" not in stale and "| `dormant-suite` |" in stale


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_text_prints_rule_ids_and_why_a_warning_is_unproven_for_a_filtered_list():
    report = FindingCollector()
    report.add("dormant-suite", "DORMANT nightly/amd/x: at test/registered/x.py:7", hardware="amd", suite="x",
               schedule="nightly")
    report.add("dormant-suite", "UNPROVEN per-commit/cuda/y", severity="warning", why_unproven="a job if: on changes")
    assert [(loc.path, loc.line) for loc in report.findings[0].locations] == [("test/registered/x.py", 7)]
    text = "\n".join(format_findings(FOREIGN_RULES, report.findings))
    assert "         error   [dormant-suite] DORMANT nightly/amd/x" in text
    assert ("warning [dormant-suite] UNPROVEN per-commit/cuda/y\n"
            "                 not proven: a job if: on changes") in text
    assert text.endswith(f"audit: 1 error(s) in 1 of {len(FOREIGN_RULES)} rule(s); 1 warning(s)")
    only_warning = "\n".join(format_findings(FOREIGN_RULES, report.findings[1:]))
    assert only_warning.endswith("audit: OK (1 warning(s))") and "[WARN] [dormant-suite]" in only_warning
    try:
        report.add("dormant-suite", "no reason given", severity="warning")
    except ValueError as exc:
        assert "must say why" in str(exc)
    else:
        raise AssertionError("a warning without why_unproven was accepted")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_audit_imports_no_torch():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"
            "import ci.audit.own, ci.audit.cli, ci.audit.foreign, ci.audit.rules, ci.github.scan\n"
            "print(ci.audit.cli.main(['--root', 'registered/fixtures/sglang/base', '--adapter', 'sglang',"
            " '--format', 'json']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("1")


def _typo_repo(tmp_path: Path) -> FixtureRepo:
    repo = baseline(tmp_path)
    repo.test_file("test_typo.py", """
        @register(suite="kernles", hardware="cpu", schedule="per-commit", est_time=2)
        def test_oops(): pass
    """)
    repo.generate_workflows()
    return repo


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_suite_name_two_edits_from_a_bigger_suite_warns_unless_declared(tmp_path):
    repo = _typo_repo(tmp_path)
    report = run_audit(repo.root, today=TODAY)
    typos = report.of("suite-name-typo")
    assert [(f.severity, f.hardware, f.suite, f.schedule) for f in typos] == [
        ("warning", "cpu", "kernles", "per-commit")]
    assert "suite 'kernles' (1 test(s)) is 2 edit(s) from 'kernels'" in typos[0].message
    assert typos[0].message.startswith("registered/test_typo.py:")
    assert report.ok   # a warning, not an error
    path = repo.root / "ci/hardware.yaml"
    data = yaml.safe_load(path.read_text())
    data.setdefault("defaults", {})["declared_suites"] = ["kernles"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert run_audit(repo.root, today=TODAY).of("suite-name-typo") == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_gpu_label_whose_env_selects_a_non_native_backend_is_an_error(tmp_path):
    repo = baseline(tmp_path)
    path = repo.root / "ci/hardware.yaml"
    text = path.read_text()
    head, _, rest = text.partition("  h200-1:\n")
    assert rest, "ci/hardware.yaml has no h200-1 label"
    rest = rest.replace("    env: {}\n", "    env: {DSPARK_KERNEL_BACKEND: torch}\n", 1)
    path.write_text(head + "  h200-1:\n" + rest)
    report = run_audit(repo.root, today=TODAY)
    [found] = report.of("non-native-gpu-backend")
    assert (found.severity, found.hardware) == ("error", "h200-1")
    assert "selects the torch kernel backend" in found.message
    rows = {row[0]: row for row in report.job_rows}
    assert rows["per-commit/h200-1/kernels"][-1] == "torch"
    assert rows["per-commit/cpu/kernels[torch-none]"][-1] == "torch (variant torch-none)"
    assert run_audit(baseline(tmp_path / "clean").root, today=TODAY).of("non-native-gpu-backend") == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_workflow_scan_reports_input_findings_only_under_rules_that_take_them():
    """ci/github/ cannot import the rules (rooms point one way), so the scan names its rules by string:
    each such id must be one a rule module's ``from_scan`` takes, and any other id is refused by name."""
    from ci.audit.rules import SCAN_RULES, add_scan_findings
    from ci.github import fork_safety

    named = {fork_safety.RULE}
    for rel in ("ci/github/scan.py", "ci/github/fork_safety.py"):
        for node in ast.walk(ast.parse((REAL_ROOT / rel).read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "append" and node.args \
                    and isinstance(node.args[0], ast.Tuple) and isinstance(node.args[0].elts[0], ast.Constant):
                named.add(node.args[0].elts[0].value)
    assert {"unreadable-input", "oversize-matrix", "fork-on-self-hosted"} <= named, named
    assert named <= set(SCAN_RULES), named - set(SCAN_RULES)
    report = FindingCollector()
    add_scan_findings(report, [("oversize-matrix", "w.yml:j: too many", "w.yml", 3)], "own")
    assert [(f.rule, f.suite, f.locations[0].line) for f in report.findings] == [("oversize-matrix", "w.yml", 3)]
    try:
        add_scan_findings(report, [("no-such-rule", "m", "w.yml", 1)], "own")
    except KeyError as exc:
        assert "no-such-rule" in str(exc) and "oversize-matrix" in str(exc)
    else:
        raise AssertionError("an id no rule module takes was accepted")
