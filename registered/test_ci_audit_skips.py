"""Skips and disables expire, tests that can never run, the debt and retries tables (rules f, h, i)."""
from __future__ import annotations

import datetime as dt
import re
import textwrap

import pytest

from ci.audit.own import format_report, run_audit
from ci.registration import register
from registered.fixture_repo import FixtureRepo, skips_source

TODAY = dt.date(2026, 12, 1)
REASONS = '''\
    "needs-gpu": {{"text": "needs a GPU", "skips_when": "gpus<1"}},
    "needs-multi-gpu": {{"text": "needs N GPUs", "skips_when": "gpus<N"}},
    "needs-hip": {{"text": "needs ROCm", "skips_when": "vendor!=amd"}},
    "flaky-infra": {flaky},
'''
MORE_HELPERS = '''

def requires_gpus(n):
    return pytest.mark.skipif(True, reason=skip_message("needs-multi-gpu"))


def requires_hip():
    return pytest.mark.skipif(True, reason=skip_message("needs-hip"))
'''
GOOD_FLAKY = '{"text": "the shared model cache is flaky", "skips_when": "always", "owner": "ci", "until": "2027-01-15"}'


def repo_with(tmp_path, body: str, flaky: str = GOOD_FLAKY) -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    repo.write("registered/skips.py", skips_source(REASONS.format(flaky=flaky), MORE_HELPERS))
    repo.test_file("test_x.py", "from registered.skips import registered_skip, requires_gpu, requires_gpus, "
                                "requires_hip\n" + textwrap.dedent(body))
    repo.generate_workflows()
    return repo


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("flaky, words", [
    ('"the shared model cache is flaky"', ["can skip on any machine: no `owner`", "no `until` expiry date"]),
    ('{"text": "cache", "skips_when": "always", "until": "2027-01-15"}', ["no `owner`"]),
    ('{"text": "cache", "skips_when": "always", "owner": "ci", "until": "2026-11-30"}', ["expired on 2026-11-30"]),
    ('{"text": "cache", "skips_when": "always", "owner": "ci", "until": "2027-06-01"}',
     ["beyond the 90-day horizon (2027-03-01"]),
    ('{"text": "cache", "skips_when": "sometimes"}', ["skips_when='sometimes'", "no `owner`", "no `until`"]),
    (GOOD_FLAKY, []),
])
def test_h_unconditional_skip_reasons_need_owner_and_unexpired_until(tmp_path, flaky, words):
    repo = repo_with(tmp_path, """
        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        def test_cached():
            if True:
                registered_skip("flaky-infra")
    """, flaky)
    found = run_audit(repo.root, today=TODAY).violations["skip-debt"]
    assert len(found) == len(words), found
    for word in words:
        assert any(word in f and f.startswith("registered/skips.py:") for f in found), (word, found)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_h_the_horizon_comes_from_the_catalog(tmp_path):
    repo = repo_with(tmp_path, "@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                               "def test_a(): pass\n")
    catalog = repo.root / "ci" / "hardware.yaml"
    text = catalog.read_text()
    if "until_horizon_days:" in text:
        text = re.sub(r"until_horizon_days:\s*\d+", "until_horizon_days: 30", text)
    else:
        text = text.replace("defaults:\n", "defaults:\n  until_horizon_days: 30\n", 1)
    catalog.write_text(text)
    found = run_audit(repo.root, today=TODAY).violations["skip-debt"]
    assert found == ["registered/skips.py:7: skip reason 'flaky-infra' can skip on any machine: until=2027-01-15 "
                     "is beyond the 30-day horizon (2026-12-31; ci/hardware.yaml defaults.until_horizon_days)"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_i_a_test_that_can_never_run_where_it_is_registered(tmp_path):
    repo = repo_with(tmp_path, """
        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        @requires_gpu()
        def test_gpu_only_on_cpu(): pass

        @register(suite="s", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=1)
        @requires_gpu()
        def test_gpu_on_cpu_and_h200(): pass

        @register(suite="s", hardware="h200-1", schedule="per-commit", est_time=1)
        @requires_gpus(2)
        def test_two_gpus_on_one(): pass

        @register(suite="s", hardware="mi35x-8", schedule="nightly", est_time=1)
        @requires_gpus(2)
        def test_two_gpus_on_eight(): pass

        @register(suite="s", hardware="h200-1", schedule="per-commit", est_time=1)
        @requires_hip()
        class TestHipOnNvidia:
            def test_m(self): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        def test_always_skips():
            registered_skip("needs-gpu")

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        @pytest.mark.skip(reason="later")
        def test_marked_skip(): pass
    """)
    found = run_audit(repo.root, today=TODAY).violations["impossible-test"]
    f = "registered/test_x.py"
    assert sorted(found) == sorted([
        f"{f}:5: {f}::test_gpu_only_on_cpu is registered only for ['cpu'], where marker requires_gpu() ({f}:6) "
        "always skips it (needs-gpu: skips when gpus<1): it can never run",
        f"{f}:13: {f}::test_two_gpus_on_one is registered only for ['h200-1'], where marker requires_gpus() "
        f"({f}:14) always skips it (needs-multi-gpu: skips when gpus<2): it can never run",
        f"{f}:21: {f}::TestHipOnNvidia is registered only for ['h200-1'], where marker requires_hip() ({f}:22) "
        "always skips it (needs-hip: skips when vendor!=amd): it can never run",
        f"{f}:28: {f}::test_always_skips: registered_skip() in the body skips it unconditionally: it never runs "
        "(register it with disabled={'reason': ..., 'until': ...} instead)",
        f"{f}:31: {f}::test_marked_skip: @pytest.mark.skip skips it unconditionally: it never runs "
        "(register it with disabled={'reason': ..., 'until': ...} instead)",
    ])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_debt_table_and_the_retries_table(tmp_path):
    repo = repo_with(tmp_path, """
        @register(suite="s", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=1, retries=2)
        @requires_gpu()
        def test_gpu(): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        @register(suite="s", hardware="mi35x-8", schedule="nightly", est_time=1,
                  disabled={"reason": "ROCm 7.2 hang", "until": "2027-01-31"})
        def test_off_on_mi35x():
            if 1 + 1 == 3:
                registered_skip("flaky-infra")
    """)
    report = run_audit(repo.root, today=TODAY)
    f = "registered/test_x.py"
    assert sorted(report.debt_rows) == sorted([
        (f"{f}::test_gpu", "skip needs-gpu", "needs a GPU", "-", "when gpus<1", f"{f}:6"),
        (f"{f}::test_off_on_mi35x", "disabled", "ROCm 7.2 hang", "-", "2027-01-31", f"{f}:10"),
        (f"{f}::test_off_on_mi35x", "skip flaky-infra", "the shared model cache is flaky", "ci", "2027-01-15",
         f"{f}:14"),
    ])
    assert report.retry_rows == [(f"{f}::test_gpu", "per-commit/cpu,h200-1/s", 2, f"{f}:5")]
    text = format_report(report)
    assert "disabled and conditionally skipped tests:" in text
    assert "tests that opted into retries (a pass on a retry is reported flaky):" in text


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_i_skips_pytest_would_take_that_no_registered_reason_covers(tmp_path):
    repo = repo_with(tmp_path, """
        import pytest
        from registered.skips import skip_message

        np = pytest.importorskip("numpy")

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        @pytest.mark.xfail(run=False, reason="crashes the interpreter")
        def test_never_run_xfail(): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        def test_plain_skip():
            if np is None:
                pytest.skip("numpy missing")

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        @pytest.mark.skipif(not np, reason=skip_message("needs-gpu"))
        def test_skipif_gpu_on_cpu(): pass
    """)
    found = run_audit(repo.root, today=TODAY).violations["impossible-test"]
    f = "registered/test_x.py"
    assert sorted(found) == sorted([
        f"{f}:8: module-level pytest.importorskip() skips every test of {f} without a registered reason: the runner "
        "fails the job when it does (use registered_skip(key) / a marker from registered/skips.py)",
        f"{f}:11: {f}::test_never_run_xfail: @pytest.mark.xfail(run=False) skips it unconditionally: it never runs "
        "(register it with disabled={'reason': ..., 'until': ...} instead)",
        f"{f}:17: skip() in the body skips {f}::test_plain_skip without a registered reason: the runner fails "
        "the job when it does (use registered_skip(key) / a marker from registered/skips.py)",
        f"{f}:19: {f}::test_skipif_gpu_on_cpu is registered only for ['cpu'], where @pytest.mark.skipif(...) "
        f"({f}:20) always skips it (needs-gpu: skips when gpus<1): it can never run",
    ])
