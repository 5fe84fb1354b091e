"""Adapters: how one kind of repository registers tests and names them in workflows.

An adapter turns a repository into registrations (reading syntax trees, never
importing), recognizes the command a workflow step uses to run a suite, and
says whether the repository has gates the audit should check. ``dspark`` (this
project's ``@register``) is the default; ``sglang`` reads ``register_*_ci(...)``.

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

from ci.input_errors import InputError

from ci.adapters.base import Adapter, RunnerCall, Target

ADAPTER_NAMES = ("dspark", "sglang")


def get_adapter(name: str) -> Adapter:
    """The adapter called ``name``; a ValueError lists the known ones."""
    if name == "dspark":
        from ci.adapters.dspark import DSparkAdapter
        return DSparkAdapter()
    if name == "sglang":
        from ci.adapters.sglang import SGLangAdapter
        return SGLangAdapter()
    raise InputError(f"unknown adapter {name!r} (--adapter); known adapters: {list(ADAPTER_NAMES)}")


__all__ = ["ADAPTER_NAMES", "Adapter", "RunnerCall", "Target", "get_adapter"]
