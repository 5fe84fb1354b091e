"""The objects the kit puts into an engine's stubbed modules so the engine sees the emulated platform.

An adapter names them as data (``MetadataAdapter.values``: ``("pkg.utils.is_hip", "is-platform:hip")``);
:func:`value_objects` turns the rules into objects. They read ``impl.platform.current_platform()``
at call time, so one loaded engine module answers for every emulated platform in turn.
Imports impl.platform only.
"""
from __future__ import annotations

from typing import Callable


def _is_platform(backend: str) -> Callable[..., bool]:
    def probe(*args, **kwargs) -> bool:
        from impl.platform import current_platform
        return current_platform().backend == backend
    probe.__name__ = f"is_{backend}"
    return probe


class _EnvValue:
    def __init__(self, value: str | None):
        self.value = value

    def get(self):
        return self.value

    def __bool__(self):
        return bool(self.value)


class _Envs:
    """An engine's settings registry: ``envs.NAME.get()`` gives the declared value, else None."""

    def __init__(self, pairs: dict[str, str]):
        self._pairs = pairs

    def __getattr__(self, name: str) -> _EnvValue:
        if name.startswith("__"):
            raise AttributeError(name)
        return _EnvValue(self._pairs.get(name))


VALUE_RULES: dict[str, tuple[str, Callable[[str], object]]] = {
    "is-platform": ("a function returning whether the emulated platform is the named one (e.g. hip)",
                    _is_platform),
    "env": ("a settings object: NAME.get() returns the declared value (NAME=value;NAME2=value2)",
            lambda spec: _Envs(dict(pair.split("=", 1) for pair in spec.split(";") if pair))),
}


def value_objects(values: tuple[tuple[str, str], ...]) -> dict[str, object]:
    out = {}
    for target, rule in values:
        name, _, parameter = rule.partition(":")
        if name not in VALUE_RULES:
            raise ValueError(f"stub value rule must be one of {sorted(VALUE_RULES)}, got {rule!r} for {target}")
        out[target] = VALUE_RULES[name][1](parameter)
    return out
