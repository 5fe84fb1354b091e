"""The one place ``ci.runner.pytest_plugin`` touches pytest's private JUnit writer (``_pytest.junitxml``).

pytest has no public API to reach the ``LogXML`` of ``--junitxml``: its stash key and its
list of test-case reporters are private. Everything the plugin needs goes through these
three functions; when pytest changes shape they return None / do nothing (the run goes on
without the extra properties), never raise.
"""
from __future__ import annotations


def junit_writer(config):
    """The ``--junitxml`` writer of this session, or None (no --junitxml, or pytest changed shape)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:
        return None
    return config.stash.get(xml_key, None)


def add_suite_property(xml, name: str, value: str) -> None:
    if xml is not None:
        xml.add_global_property(name, value)


def drop_testcases(xml, has_property: str) -> None:
    """Remove every test case carrying the property ``has_property`` (a rerun's failed attempts)."""
    reporters = getattr(xml, "node_reporters_ordered", None)
    if reporters is None:
        return

    def marked(reporter) -> bool:
        try:
            element = reporter.to_xml()          # a finalized reporter holds its finished element
        except (AttributeError, TypeError):      # a reporter of another shape: keep it
            return False
        return element.find(f"properties/property[@name='{has_property}']") is not None

    reporters[:] = [r for r in reporters if not marked(r)]
