"""pytest configuration for registered/: the registry plugin and the fixtures tests share.

The plugin (ci.runner.pytest_plugin) is loaded by the root ``conftest.py``: it gives pytest
`--ci-job ID [--ci-shard I/N]` (run exactly one CI job) and a marker per suite
(`pytest -m kernels`); it changes nothing else for a plain `pytest` run. Nothing here
registers a test.
"""
from __future__ import annotations

import pytest

from impl.validation import check_mode


@pytest.fixture
def value_checks_off():
    """Check mode off for the test, even under DSPARK_CHECK=on: sync counts assume the default path;
    tests of check mode turn it on explicitly inside. Use with
    ``pytestmark = pytest.mark.usefixtures("value_checks_off")``."""
    with check_mode(False):
        yield


@pytest.fixture(params=["default", "torch"])
def kernel_backend(request, monkeypatch):
    """The test runs twice: on the default kernel backend, and with ``DSPARK_KERNEL_BACKEND=torch``
    (the eager fallback). The value is the parameter's name."""
    if request.param == "torch":
        monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    return request.param
