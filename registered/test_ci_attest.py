"""Hardware attestation with hand-made machine records (no GPU, no torch import)."""
from __future__ import annotations

import pytest

from ci.runner.attest import attest, toolchain_notes
from ci.registry.catalog import load_catalog
from ci.runner.machine import Machine
from ci.registration import register
from registered.fixture_repo import REAL_ROOT

H200 = Machine("h200-1", "h200-1", "cuda", "sm90", 1, torch="2.11.0+cu130", torch_build="cuda",
               device_name="NVIDIA H200", triton="3.6.0", cuda="13.0")
MI355 = Machine("mi35x-8", "mi35x-1", "hip", "gfx950", 8, torch="2.7.1+rocm7.0", torch_build="hip",
                device_name="AMD Instinct MI355X", triton="3.3.1", hip="7.0.0")
CPU = Machine(torch="2.13.0+cpu", triton="3.9.0")
CUDA_BUILD_NO_GPU = Machine(torch="2.11.0+cu130", torch_build="cuda", triton="3.6.0", cuda="13.0")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(REAL_ROOT)


def _attest(catalog, label, machine, env=None, **kw):
    hw = catalog.get(label)
    expected = dict(hw.env)
    return attest(f"per-commit/{label}/kernels", hw, machine, {**expected, **(env or {})}, expected_env=expected, **kw)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_gpu_labels_refuse_the_wrong_machine_with_one_line(catalog):
    cases = [
        ("h200-1", CPU, "expected a CUDA build of torch with a visible NVIDIA (CUDA) GPU, found torch 2.13.0+cpu"),
        ("h200-1", CUDA_BUILD_NO_GPU, "found torch 2.11.0+cu130 (cuda build), no visible GPU"),
        ("mi35x-1", H200, ("expected a HIP build of torch with a visible AMD (ROCm/HIP) GPU, found torch "
                           "2.11.0+cu130 (cuda build), 1 visible cuda device(s)")),
        ("h200-1", MI355, "expected a CUDA build of torch"),
        ("mi30x-1", MI355, "expected architecture gfx942, found gfx950 (AMD Instinct MI355X)"),
        ("mi35x-8", Machine(**{**MI355.__dict__, "gpus": 4}), "expected at least 8 GPU(s), found 4"),
    ]
    for label, machine, needle in cases:
        result = _attest(catalog, label, machine)
        assert not result.ok and result.verdict == "FAILED", (label, machine)
        line = result.failure_line()
        assert line.startswith(f"attestation failed for {label} (job per-commit/{label}/kernels): ") and needle in line
        assert "\n" not in line
        assert result.properties()["attestation.failure"] == line


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_right_machine_attests_and_records_itself(catalog):
    for label, machine in (("h200-1", H200), ("mi35x-1", MI355), ("mi35x-8", MI355)):
        result = _attest(catalog, label, machine)
        assert result.ok and result.verdict == "OK", result.problems
        props = result.properties()
        assert props["emulated"] == "no" and props["machine.device_name"] == machine.device_name
        assert props["machine.arch"] == machine.arch and props["machine.torch"] == machine.torch


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_compiled_triton_and_promised_gates_are_attested(catalog):
    result = _attest(catalog, "h200-1", H200, {"TRITON_INTERPRET": "1"})
    assert not result.ok and "found TRITON_INTERPRET=1" in result.failure_line()
    result = _attest(catalog, "h200-1", H200, {"DSPARK_KERNEL_BACKEND": "triton-interpret"})
    assert not result.ok and "expected kernel_backend triton" in result.failure_line()
    result = _attest(catalog, "h200-1", Machine(**{**H200.__dict__, "triton": None}))
    assert not result.ok and "found no triton package" in result.failure_line()
    hw = catalog.get("cpu")   # the catalog's gate values must hold in the process env, on every label
    result = attest("per-commit/cpu/kernels", hw, CPU, {"TRITON_INTERPRET": "1"}, expected_env=dict(hw.env))
    assert not result.ok and "expected DSPARK_KERNEL_BACKEND='triton-interpret' (catalog/variant), found " \
                            "DSPARK_KERNEL_BACKEND unset" in result.failure_line()
    result = attest("per-commit/cpu/kernels", hw, CPU, dict(hw.env), expected_env=dict(hw.env))
    assert result.ok and result.verdict == "not applicable (cpu label)"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_emulation_is_the_only_way_around_and_is_announced(catalog):
    result = _attest(catalog, "mi35x-1", H200, emulate="hip")
    assert result.ok and result.verdict == "EMULATED"
    assert result.emulated.startswith("per-commit/mi35x-1/kernels runs with DSPARK_PLATFORM=hip emulated on "
                                      "1 x NVIDIA H200")
    assert result.properties()["emulated"] == result.emulated
    assert any(line.startswith("[ci] EMULATION: ") for line in result.lines())
    result = _attest(catalog, "cpu", CPU, emulate="hip")
    assert not result.ok and "the cpu label (it needs no emulation)" in result.failure_line()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_toolchain_differences_are_reported_not_failed(catalog):
    assert toolchain_notes({"torch": "2.11.0", "triton": "3.6.0"}, H200) == []   # local +cu130 is the same release
    notes = toolchain_notes({"torch": "==2.13.0", "triton": "3.9.0"}, H200)
    assert notes == ["toolchain: catalog pins torch 2.13.0, found 2.11.0+cu130",
                     "toolchain: catalog pins triton 3.9.0, found 3.6.0"]
    result = _attest(catalog, "h200-1", H200, toolchain={"torch": "2.13.0"})
    assert result.ok and result.notes == ["toolchain: catalog pins torch 2.13.0, found 2.11.0+cu130"]
