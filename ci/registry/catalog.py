"""The hardware catalog (``ci/hardware.yaml``): labels -> runners, GPUs, default env, toolchain.

Loading validates every entry; any problem is a :class:`CatalogError` naming the
file, line and field. Gate variables in a default env are checked against the
gate table in ``impl/gates.py`` (which imports no torch). Never imports torch,
``impl`` (beyond the torch-free gate table, through ci.registry.gatecheck) or test code.
"""
from __future__ import annotations

from ci.input_errors import InputError

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from ci.registry.gatecheck import gate_env_problem
from ci.safe_files import read_inside
from ci.safe_yaml import load_yaml

CATALOG_PATH = "ci/hardware.yaml"
VENDORS = ("cpu", "nvidia", "amd")
BACKENDS = ("cpu", "cuda", "hip")
ARCHES = ("cpu", "sm90", "gfx942", "gfx950")
LABEL_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_REQUIRED = ("runs_on", "vendor", "arch", "gpus", "backend")
_OPTIONAL = ("workers", "env", "container", "toolchain")
SCHEDULES = ("per-commit", "nightly")
_DEFAULT_KEYS = ("shard_budget_s", "python", "until_horizon_days", "liveness_days", "nox", "declared_suites")
VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+){1,3}$")
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")
_TOOLCHAIN_KEYS = ("torch", "triton", "index_url")


class CatalogError(InputError):
    """The catalog file is malformed, or a label is not in it."""


@dataclass(frozen=True)
class Toolchain:
    """What a label's jobs install: pinned torch/triton, and the pip index torch comes from.

    Container labels (ROCm) take torch and triton from the pinned image: ``index_url`` is
    None there and ``torch`` records the version the image ships.
    """
    torch: str
    triton: str | None = None
    index_url: str | None = None

    def get(self, key: str, default: Any = None) -> Any:
        """Mapping-style read (``toolchain.get("torch")``) for callers that treat it as the YAML block."""
        return getattr(self, key) if key in _TOOLCHAIN_KEYS else default


@dataclass(frozen=True)
class Hardware:
    label: str
    runs_on: tuple[str, ...]
    vendor: str
    arch: str
    gpus: int
    backend: str
    workers: int = 1
    env: Mapping[str, str] = field(default_factory=dict)
    container: Mapping[str, str] | None = None
    toolchain: Toolchain | None = None

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0

    def toolchain_problem(self) -> str | None:
        """Why this label's toolchain is not pinned (None when it is)."""
        if self.toolchain is None:
            return f"hardware {self.label!r}: no toolchain: pin torch (and triton, index_url or an image digest)"
        if self.container and not DIGEST_RE.search(self.container["image"]):
            return (f"hardware {self.label!r}: container image {self.container['image']!r} is not pinned by digest "
                    "(write it as name:tag@sha256:<64 hex>)")
        return None


@dataclass(frozen=True)
class Catalog:
    hardware: Mapping[str, Hardware]
    shard_budget_s: float = 600.0
    python: str = "3.11"
    path: str = CATALOG_PATH
    until_horizon_days: int = 90
    liveness_days: Mapping[str, int] = field(default_factory=lambda: {"nightly": 3, "per-commit": 7})
    nox: str | None = None                 # nox version the generated workflows install

    def toolchain_problems(self) -> list[str]:
        """Labels whose torch/triton/image are not pinned (the workflow check fails on any)."""
        return [p for p in (hw.toolchain_problem() for hw in self.hardware.values()) if p]

    def get(self, label: str, *, where: str = "") -> Hardware:
        try:
            return self.hardware[label]
        except KeyError:
            prefix = f"{where}: " if where else ""
            raise CatalogError(
                f"{prefix}unknown hardware label {label!r}; {self.path} defines {sorted(self.hardware)}"
            ) from None

    @property
    def labels(self) -> list[str]:
        return list(self.hardware)


def _key_lines(text: str) -> dict[str, int]:
    """Line numbers of the entries under ``hardware:`` (for error messages)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "hardware" and isinstance(value, yaml.MappingNode):
                for hw_key, _ in value.value:
                    lines[str(hw_key.value)] = hw_key.start_mark.line + 1
    return lines


def _parse_entry(label: str, raw: Any, where: str) -> Hardware:
    def fail(msg: str) -> CatalogError:
        return CatalogError(f"{where}: hardware {label!r}: {msg}")

    if not LABEL_RE.match(label):
        raise fail("label must be lower-case letters, digits, '.', '-'")
    if not isinstance(raw, dict):
        raise fail("entry must be a mapping")
    unknown = set(raw) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise fail(f"unknown field(s) {sorted(unknown)}; allowed {list(_REQUIRED + _OPTIONAL)}")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise fail(f"missing field(s) {missing}")
    runs_on = raw["runs_on"]
    if isinstance(runs_on, str):
        runs_on = [runs_on]
    if not runs_on or not all(isinstance(x, str) and x for x in runs_on):
        raise fail("runs_on must be a runner label or a non-empty list of them")
    for name, allowed in (("vendor", VENDORS), ("backend", BACKENDS), ("arch", ARCHES)):
        if raw[name] not in allowed:
            raise fail(f"{name} {raw[name]!r} not in {list(allowed)}")
    gpus = raw["gpus"]
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        raise fail(f"gpus must be a non-negative integer, got {gpus!r}")
    if (gpus == 0) != (raw["backend"] == "cpu"):
        raise fail("backend 'cpu' goes with gpus: 0, and only with it")
    workers = raw.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise fail(f"workers must be a positive integer, got {workers!r}")
    env = raw.get("env") or {}
    _check_env(env, fail)
    container = raw.get("container")
    if container is not None:
        _check_container(container, fail)
    toolchain = _parse_toolchain(raw.get("toolchain"), container is not None, fail)
    return Hardware(
        label=label,
        runs_on=tuple(runs_on),
        vendor=raw["vendor"],
        arch=raw["arch"],
        gpus=gpus,
        backend=raw["backend"],
        workers=workers,
        env=dict(env),
        container=dict(container) if container else None,
        toolchain=toolchain,
    )


def _check_env(env: Any, fail) -> None:
    """A hardware entry's ``env``: gate variables with valid string values."""
    if not isinstance(env, dict):
        raise fail("env must be a mapping of variable -> string value")
    for var, value in env.items():
        if not isinstance(var, str) or not isinstance(value, str):
            raise fail(f"env {var!r}: names and values must be strings (quote numbers)")
        problem = gate_env_problem(var, value)
        if problem:
            raise fail(f"env: {problem}")


def _check_container(container: Any, fail) -> None:
    """A hardware entry's ``container``: an ``image`` (pinned by a well-formed digest, if any) and ``options``."""
    if not isinstance(container, dict) or not isinstance(container.get("image"), str):
        raise fail("container must be a mapping with an 'image' string (and optional 'options')")
    if set(container) - {"image", "options"}:
        raise fail(f"container: unknown field(s) {sorted(set(container) - {'image', 'options'})}")
    if "@" in container["image"] and not DIGEST_RE.search(container["image"]):
        raise fail(f"container.image {container['image']!r}: a digest must read @sha256:<64 lower-case hex>")


def _parse_toolchain(raw: Any, in_container: bool, fail) -> Toolchain | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise fail("toolchain must be a mapping (torch, triton, index_url)")
    unknown = set(raw) - set(_TOOLCHAIN_KEYS)
    if unknown:
        raise fail(f"toolchain: unknown field(s) {sorted(unknown)}; allowed {list(_TOOLCHAIN_KEYS)}")
    for key in ("torch", "triton"):
        value = raw.get(key)
        if value is not None and not (isinstance(value, str) and VERSION_RE.match(value)):
            raise fail(f"toolchain.{key} must be an exact version string like \"2.13.0\" (quoted), got {value!r}")
    if "torch" not in raw:
        raise fail("toolchain: missing field 'torch'")
    index = raw.get("index_url")
    if in_container:
        if index is not None:
            raise fail("toolchain.index_url: a container label takes torch from its pinned image, not from an index")
    else:
        if not (isinstance(index, str) and index.startswith("https://")):
            raise fail(f"toolchain.index_url must be an https:// pip index for torch, got {index!r}")
        if raw.get("triton") is None:
            raise fail("toolchain: missing field 'triton' (pin it next to torch)")
    return Toolchain(torch=raw["torch"], triton=raw.get("triton"), index_url=index)


def parse_catalog(text: str, *, path: str = CATALOG_PATH) -> Catalog:
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("hardware"), dict):
        raise CatalogError(f"{path}: expected a top-level 'hardware:' mapping")
    unknown_top = set(data) - {"hardware", "defaults"}
    if unknown_top:
        raise CatalogError(f"{path}: unknown top-level key(s) {sorted(unknown_top)}")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise CatalogError(f"{path}: defaults must be a mapping")
    unknown_defaults = set(defaults) - set(_DEFAULT_KEYS)
    if unknown_defaults:
        raise CatalogError(f"{path}: defaults: unknown key(s) {sorted(unknown_defaults)}; "
                           f"allowed {list(_DEFAULT_KEYS)}")
    budget = defaults.get("shard_budget_s", 600)
    if not isinstance(budget, (int, float)) or isinstance(budget, bool) or budget <= 0:
        raise CatalogError(f"{path}: defaults.shard_budget_s must be a positive number")
    horizon = defaults.get("until_horizon_days", 90)
    if not _positive_int(horizon):
        raise CatalogError(f"{path}: defaults.until_horizon_days must be a positive integer, got {horizon!r}")
    liveness = defaults.get("liveness_days", {"nightly": 3, "per-commit": 7})
    if (not isinstance(liveness, dict) or set(liveness) != set(SCHEDULES)
            or not all(map(_positive_int, liveness.values()))):
        raise CatalogError(f"{path}: defaults.liveness_days must map each of {list(SCHEDULES)} to a positive "
                           f"number of days, got {liveness!r}")
    nox_pin = defaults.get("nox")
    if nox_pin is not None and not (isinstance(nox_pin, str) and VERSION_RE.match(nox_pin)):
        raise CatalogError(f"{path}: defaults.nox must be an exact version string (quoted), got {nox_pin!r}")
    lines = _key_lines(text)
    hardware = {
        str(label): _parse_entry(str(label), raw, f"{path}:{lines.get(str(label), '?')}")
        for label, raw in data["hardware"].items()
    }
    if not hardware:
        raise CatalogError(f"{path}: defines no hardware")
    return Catalog(hardware=hardware, shard_budget_s=float(budget),
                   python=str(defaults.get("python", "3.11")), path=path,
                   until_horizon_days=horizon, liveness_days=dict(liveness), nox=nox_pin)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def load_catalog(root: str | Path) -> Catalog:
    path = Path(root) / CATALOG_PATH
    if not path.is_file():
        raise CatalogError(f"{CATALOG_PATH}: missing under {root}")
    return parse_catalog(read_inside(root, path))
