"""pytest configuration for registered/: the registry plugin and the fixtures tests share.

The plugin (ci.pytest_plugin) gives pytest `--ci-job ID [--ci-shard I/N]` (run exactly one
CI job) and a marker per suite (`pytest -m kernels`); it changes nothing else for a plain
`pytest` run. Nothing here registers a test.
"""
from __future__ import annotations

import pytest

from impl.validation import check_mode

pytest_plugins = ["ci.pytest_plugin"]


@pytest.fixture
def value_checks_off():
    """Check mode off for the test, even under DSPARK_CHECK=on: sync counts assume the default path;
    tests of check mode turn it on explicitly inside. Use with
    ``pytestmark = pytest.mark.usefixtures("value_checks_off")``."""
    with check_mode(False):
        yield
