"""The foundation modules: SpecConfig's derived values, the gate table, platform emulation."""
from __future__ import annotations

import pytest

from ci.registration import register
from impl.config import SpecConfig
from impl.gates import GATES, GateError, format_gate_table, gate_value, get_gate, validate_gate_value
from impl.platform import current_platform, default_device, emulate, kernel_backend



# ---------------------------------------------------------------- SpecConfig
@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize(
    "gamma,ring,target_rows,draft_rows,tiers",
    [
        (1, 129, 2, 1, (2, 4, 8, 16)),
        (3, 131, 4, 3, (4, 8, 16, 32)),
        (5, 133, 6, 5, (6, 12, 24, 48)),
        (8, 136, 9, 8, (9, 18, 36, 72)),
    ],
)
def test_spec_config_derived_values(gamma, ring, target_rows, draft_rows, tiers):
    """Pinned per gamma: num_draft_tokens, ring (window 128), per-role verify rows, graph tiers."""
    cfg = SpecConfig(gamma=gamma, window=128, capture_batch_sizes=(1, 2, 4, 8), num_slots=3)
    assert cfg.num_draft_tokens == gamma + 1
    assert cfg.ring == ring == cfg.window + cfg.num_draft_tokens - 1
    assert cfg.verify_rows("target") == target_rows
    assert cfg.verify_rows("draft") == draft_rows
    assert cfg.verify_rows("server") == target_rows
    assert cfg.graph_token_tiers == tiers
    assert cfg.ring_rows() == 3 * ring


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_spec_config_tiers_are_sorted_and_deduplicated():
    cfg = SpecConfig(gamma=2, capture_batch_sizes=(8, 1, 4, 4))
    assert cfg.graph_token_tiers == (3, 12, 24)


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("gamma", [1, 3, 5, 8])
def test_ring_override_too_small_rejected(gamma):
    """Invariant 10: a ring below window + num_draft_tokens - 1 is refused, naming the numbers."""
    need = 128 + gamma
    assert SpecConfig(gamma=gamma, window=128, ring_override=need).ring == need
    assert SpecConfig(gamma=gamma, window=128, ring_override=need + 10).ring == need + 10
    with pytest.raises(ValueError, match=rf"ring_override={need - 1} is too small.*128 \+ {gamma + 1} - 1 = {need}"):
        SpecConfig(gamma=gamma, window=128, ring_override=need - 1)


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_spec_config_rejects_bad_fields():
    with pytest.raises(ValueError, match="SpecConfig.gamma must be a positive int"):
        SpecConfig(gamma=0)
    with pytest.raises(ValueError, match="rope_dim must be a non-negative even int"):
        SpecConfig(rope_dim=7)
    with pytest.raises(ValueError, match=r"rope_dim \(600\) must not exceed head_dim \(512\)"):
        SpecConfig(rope_dim=600)
    with pytest.raises(ValueError, match="capture_batch_sizes"):
        SpecConfig(capture_batch_sizes=())
    with pytest.raises(ValueError, match="role must be one of"):
        SpecConfig().verify_rows("verifier")


# ---------------------------------------------------------------- gates
@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("name", sorted(GATES))
def test_gate_unknown_value_names_env_var(name):
    gate = get_gate(name)
    with pytest.raises(GateError, match=f"environment variable {gate.env_var}="):
        gate_value(name, {gate.env_var: "definitely-not-a-value"})
    for value in gate.values:
        assert gate_value(name, {gate.env_var: value}) == value
    assert gate_value(name, {}) == gate.default
    assert gate_value(name, {gate.env_var: ""}) == gate.default


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_gate_table_is_well_formed():
    expected = {"platform", "spec_algorithm", "kv_backend", "kernel_backend", "check_mode"}
    assert set(GATES) == expected
    env_vars = [g.env_var for g in GATES.values()]
    assert len(set(env_vars)) == len(env_vars) and all(v.startswith("DSPARK_") for v in env_vars)
    for g in GATES.values():
        assert g.default is None or g.default in g.values
        assert g.name in format_gate_table() and g.env_var in format_gate_table()
    with pytest.raises(GateError, match="unknown gate 'colour'"):
        get_gate("colour")
    with pytest.raises(GateError, match="gate 'kv_backend'"):
        validate_gate_value("kv_backend", "ring")


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_kernel_backend_gate(monkeypatch):
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    assert kernel_backend() == "torch"
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "bogus")
    with pytest.raises(GateError, match="DSPARK_KERNEL_BACKEND"):
        kernel_backend()
    monkeypatch.delenv("DSPARK_KERNEL_BACKEND")
    assert kernel_backend() == ("triton" if default_device().type == "cuda" else "triton-interpret")
    if default_device().type == "cpu":
        monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "triton")
        with pytest.raises(ValueError, match="needs a GPU"):
            kernel_backend()


# ---------------------------------------------------------------- platform
@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_emulate_hip_changes_backend_not_device(capsys):
    real = current_platform()
    with emulate("hip", arch="gfx942", device_count=3) as p:
        now = current_platform()
        assert now.backend == "hip" and now.arch == "gfx942" and now.device_count == 3
        assert now.emulated and p == now
        assert now.device == real.device == default_device().type
    assert current_platform() == real
    err = capsys.readouterr().err
    assert "PLATFORM EMULATION ACTIVE" in err and "hip/gfx942 x3" in err


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_platform_gate_emulates_and_rejects_unknown(monkeypatch, capsys):
    monkeypatch.setenv("DSPARK_PLATFORM", "hip")
    p = current_platform()
    assert p.backend == "hip" and p.device == default_device().type
    if p.emulated:
        assert "EMULATED" in p.describe()
    monkeypatch.setenv("DSPARK_PLATFORM", "tpu")
    with pytest.raises(GateError, match="DSPARK_PLATFORM"):
        current_platform()
    with pytest.raises(GateError, match="backend 'tpu'"):
        with emulate("tpu"):
            pass
