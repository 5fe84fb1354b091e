"""Job ids (round trip, parsing), jobs per hardware and variant, and the hardware catalog."""
from __future__ import annotations

import itertools

import pytest

from ci.registry.catalog import CatalogError, load_catalog, parse_catalog
from registered.fixture_repo import REAL_ROOT, FixtureRepo
from ci.registry.jobs import JobKey, job_id, load_registry, parse_job_id, sanitize, workflow_key
from ci.registration import register


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_job_id_round_trips_and_reads_as_documented():
    for schedule, hw, suite, variant in itertools.product(
            ["per-commit", "nightly"], ["cpu", "h200-1", "mi35x-8"], ["kernels", "dspark-e2e", "ci_v2.1"],
            [None, "kv", "hip.mtp-2"]):
        text = job_id(schedule, hw, suite, variant)
        assert parse_job_id(text) == JobKey(schedule, hw, suite, variant)
        assert parse_job_id(text).id == text
    assert job_id("nightly", "mi35x-8", "dspark-e2e", "kv") == "nightly/mi35x-8/dspark-e2e[kv]"
    assert job_id("per-commit", "cpu", "kernels") == "per-commit/cpu/kernels"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("bad", ["", "per-commit/cpu", "per-commit/cpu/kernels/x", "per-commit/cpu/kernels[]",
                                 "per-commit/cpu/Kernels", "per-commit//kernels", "per-commit/cpu/kernels[a b]",
                                 "/cpu/kernels", "per-commit/cpu/kernels[kv"])
def test_parse_job_id_rejects_malformed_ids_clearly(bad):
    with pytest.raises(ValueError, match="schedule/hardware/suite"):
        parse_job_id(bad)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_workflow_keys_are_identifiers_and_file_names_are_safe():
    assert workflow_key("nightly/mi35x-8/dspark-e2e[kv]") == "nightly__mi35x-8__dspark-e2e__kv"
    assert workflow_key("per-commit/cpu/ci_v2.1") == "per-commit__cpu__ci_v2-1"
    assert sanitize("nightly/mi35x-8/dspark-e2e[kv]") == "nightly_mi35x-8_dspark-e2e_kv"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_one_job_per_hardware_and_variant_with_its_env(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_e2e.py", """
        @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900,
                  env={"kv": {"DSPARK_KV_BACKEND": "unified"}, "paged": {"DSPARK_KV_BACKEND": "paged"}})
        class TestE2E:
            def test_gsm8k(self): pass

        @register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=40)
        def test_scatter(): pass

        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5,
                  env={"hip": {"DSPARK_PLATFORM": "hip"}})
        def test_scatter_hip(): pass
    """)
    registry = load_registry(tmp_path)
    assert list(registry.jobs) == [
        "per-commit/cpu/kernels", "per-commit/cpu/kernels[hip]", "per-commit/h200-1/kernels",
        "nightly/mi35x-8/dspark-e2e[kv]", "nightly/mi35x-8/dspark-e2e[paged]"]
    paged = registry.job("nightly/mi35x-8/dspark-e2e[paged]")
    assert [t.node_id for t in paged.tests] == ["registered/test_e2e.py::TestE2E"]
    assert paged.env == {"DSPARK_KV_BACKEND": "paged"}
    assert paged.hardware.gpus == 8 and paged.est_time == 900
    hip = registry.job("per-commit/cpu/kernels[hip]")
    assert hip.full_env()["DSPARK_PLATFORM"] == "hip"
    assert hip.full_env()["TRITON_INTERPRET"] == "1"  # the cpu default env stays underneath
    with pytest.raises(KeyError, match="did you mean"):
        registry.job("per-commit/cpu/kernel")


# ------------------------------------------------------------------ catalog
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_real_catalog_describes_every_documented_label():
    catalog = load_catalog(REAL_ROOT)
    expect = {"cpu": ("cpu", "cpu", 0, "cpu", "ubuntu-latest"),
              "h200-1": ("nvidia", "sm90", 1, "cuda", "linux-h200-gpu-1"),
              "mi30x-1": ("amd", "gfx942", 1, "hip", "linux-mi300-gpu-1"),
              "mi35x-1": ("amd", "gfx950", 1, "hip", "linux-mi35x-gpu-1"),
              "mi35x-8": ("amd", "gfx950", 8, "hip", "linux-mi35x-gpu-8")}
    for label, (vendor, arch, gpus, backend, runner) in expect.items():
        hw = catalog.get(label)
        assert (hw.vendor, hw.arch, hw.gpus, hw.backend) == (vendor, arch, gpus, backend)
        assert runner in hw.runs_on
        if vendor == "amd":
            assert "rocm" in hw.container["image"]
            assert "--device=/dev/kfd" in hw.container["options"] and "--device=/dev/dri" in hw.container["options"]
    assert catalog.get("cpu").env == {"TRITON_INTERPRET": "1", "DSPARK_KERNEL_BACKEND": "triton-interpret",
                                     "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}  # cpu jobs see no GPU
    with pytest.raises(CatalogError, match="unknown hardware label 'mi400-1'"):
        catalog.get("mi400-1")


GOOD_ENTRY = """\
hardware:
  cpu:
    runs_on: [ubuntu-latest]
    vendor: cpu
    arch: cpu
    gpus: 0
    backend: cpu
{extra}"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("extra, words", [
    ("    colour: red\n", ["unknown field", "colour"]),
    ("    env:\n      DSPARK_KV_BACKEND: ring\n", ["DSPARK_KV_BACKEND='ring'"]),
    ("    env:\n      DSPARK_TYPO: x\n", ["DSPARK_TYPO", "not a gate"]),
    ("    env:\n      TRITON_INTERPRET: 1\n", ["strings"]),
    ("    workers: 0\n", ["workers"]),
    ("    container: rocm/pytorch\n", ["container"]),
])
def test_catalog_errors_name_file_line_and_field(extra, words):
    with pytest.raises(CatalogError) as info:
        parse_catalog(GOOD_ENTRY.format(extra=extra))
    message = str(info.value)
    assert message.startswith("ci/hardware.yaml:2: hardware 'cpu':"), message
    assert all(w in message for w in words), message


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("text, words", [
    (GOOD_ENTRY.format(extra="").replace("vendor: cpu", "vendor: intel"), ["vendor 'intel'"]),
    (GOOD_ENTRY.format(extra="").replace("gpus: 0", "gpus: 2"), ["backend 'cpu' goes with gpus: 0"]),
    (GOOD_ENTRY.format(extra="").replace("    arch: cpu\n", ""), ["missing field", "arch"]),
    ("hardware: []\n", ["top-level 'hardware:' mapping"]),
    ("hardware: {}\nrunners: {}\n", ["unknown top-level"]),
])
def test_catalog_rejects_malformed_entries(text, words):
    with pytest.raises(CatalogError) as info:
        parse_catalog(text)
    assert all(w in str(info.value) for w in words), str(info.value)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_parse_catalog_accepts_the_good_entry():
    catalog = parse_catalog(GOOD_ENTRY.format(extra=""))
    assert catalog.labels == ["cpu"] and catalog.shard_budget_s == 600


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_one_job_filter_and_group_ids(tmp_path):
    from ci.registry.jobs import JobFilter, parse_group_id

    repo = FixtureRepo(tmp_path)
    repo.test_file("test_f.py", """
        @register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=4)
        def test_a(): pass

        @register(suite="e2e", hardware="mi35x-8", schedule="nightly", est_time=9,
                  env={"kv": {"DSPARK_KV_BACKEND": "unified"}})
        def test_b(): pass
    """)
    registry = load_registry(tmp_path)
    ids = lambda f: [j.id for j in f.select(registry)]  # noqa: E731
    assert ids(JobFilter(schedule="per-commit", hardware="cpu")) == ["per-commit/cpu/kernels"]
    assert ids(JobFilter(hardware_prefix="mi35x")) == ["nightly/mi35x-8/e2e[kv]"]
    assert ids(JobFilter(job="nightly/mi35x-8/e2e[kv]")) == ["nightly/mi35x-8/e2e[kv]"]
    with pytest.raises(KeyError, match="did you mean"):
        JobFilter(job="nightly/mi35x-8/e2e").select(registry)
    assert sorted(registry.groups) == ["nightly/mi35x-8", "per-commit/cpu", "per-commit/h200-1"]
    assert registry.groups["per-commit/cpu"].jobs[0].id == "per-commit/cpu/kernels"
    assert parse_group_id("per-commit/cpu") == ("per-commit", "cpu")
    with pytest.raises(ValueError, match="schedule/hardware"):
        parse_group_id("per-commit/cpu/kernels")
    with pytest.raises(KeyError, match="no registered group"):
        registry.group("nightly/cpu")
