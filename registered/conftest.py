"""Fixtures shared by the registered tests (collected by pytest; nothing here registers a test)."""
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
