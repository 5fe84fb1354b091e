"""Messages that must not mislead (issue 24 §7), on throw-away fixture repositories.

An unknown skip key is told to add it to registered/skips.py (the audit before the run, the
runner after it); the summary's "skipped (registered)" column counts registered skips only; and
``--job`` on a suite whose registrations are all disabled says so, with the reasons.
"""
from __future__ import annotations

import datetime as dt

from ci.audit.own import run_audit
from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo

SUITES = """
import pytest
from registered.skips import registered_skip

@register(suite="typo-key", hardware="cpu", schedule="per-commit", est_time=1)
def test_passes():
    pass

@register(suite="typo-key", hardware="cpu", schedule="per-commit", est_time=1)
def test_skips_with_a_made_up_key():
    pytest.skip("[registered:needs-gpuu] looks official")

@register(suite="typo-key", hardware="cpu", schedule="per-commit", est_time=1)
def test_skips_for_a_registered_reason():
    registered_skip("needs-gpu")

@register(suite="parked", hardware="cpu", schedule="per-commit", est_time=1,
          disabled={"reason": "compiler hang, issue #12", "until": "2027-01-31"})
def test_parked_one():
    pass

@register(suite="parked", hardware="cpu", schedule="per-commit", est_time=1,
          disabled={"reason": "needs the new pool, issue #14", "until": "2027-02-15"})
def test_parked_two():
    pass
"""


def _repo(tmp_path, body: str = SUITES) -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.test_file("test_suites.py", body)
    return repo


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_audit_tells_an_unknown_skip_key_to_be_added_to_skips_py(tmp_path):
    repo = _repo(tmp_path, """
        import pytest
        from registered.skips import registered_skip, skip_message

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        def test_typo_in_body():
            if True:
                registered_skip("needs-gpuu")

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        @pytest.mark.skipif(not pytest, reason=skip_message("needs-hipp"))
        def test_typo_in_marker():
            pass
    """)
    found = run_audit(repo.root, today=dt.date(2026, 12, 1)).violations["impossible-test"]
    body = [v for v in found if "test_typo_in_body" in v]
    marker = [v for v in found if "test_typo_in_marker" in v]
    assert len(body) == 1 and len(marker) == 1, found
    for message, key in ((body[0], "needs-gpuu"), (marker[0], "needs-hipp")):
        assert f"with skip key '{key}', which registered/skips.py does not declare" in message, message
        assert "add it to SKIP_REASONS in registered/skips.py" in message, message
        assert "use registered_skip(key)" not in message, message   # it did use it


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_runner_counts_an_unregistered_skip_apart_and_names_the_missing_key(tmp_path):
    proc = _repo(tmp_path).run_module("ci.runner.run_suite", "--job", "per-commit/cpu/typo-key", "--workers", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("skip key 'needs-gpuu' is not in SKIP_REASONS: add it to registered/skips.py" in proc.stderr), proc.stderr
    assert "registered_skip(key) / requires_gpu()" not in proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("| passed"))
    row = proc.stdout.splitlines()[proc.stdout.splitlines().index(header) + 2]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    assert cells["passed"] == "1", cells
    assert cells["skipped (registered)"] == "1", cells      # needs-gpu only
    assert cells["skipped (unregistered)"] == "1", cells    # the made-up key
    assert "1 skipped, 1 skipped without a registered reason" in proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_job_of_a_wholly_disabled_suite_says_disabled_with_reasons(tmp_path):
    repo = _repo(tmp_path)
    for module in ("ci.runner.run_suite", "ci.runner.run_many"):
        proc = repo.run_module(module, "--job", "per-commit/cpu/parked")
        assert proc.returncode == 2, (module, proc.stdout + proc.stderr)
        err = proc.stderr.strip()
        assert len(err.splitlines()) == 1, (module, err)
        assert "no registered job" not in err, (module, err)
        assert "'per-commit/cpu/parked' is registered, but all its registrations are disabled" in err, (module, err)
        assert "compiler hang, issue #12 (until 2027-01-31)" in err and "needs the new pool, issue #14" in err, err
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/parkd")   # a typo stays "no registered job"
    assert proc.returncode == 2 and "no registered job 'per-commit/cpu/parkd'" in proc.stderr, proc.stderr
