"""The hooks ``ci.runner.pytest_plugin`` adds to pytest (registered with ``pluginmanager.add_hookspecs``)."""
from __future__ import annotations

import pytest


class CiHookSpecs:
    @pytest.hookspec(firstresult=True)
    def pytest_ci_machine(self, config):
        """Return a ``ci.runner.machine.Machine`` to use instead of probing (tests only; announced as not probed)."""
