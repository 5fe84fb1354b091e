"""pytest configuration for registered/: the registry plugin (ci.pytest_plugin).

It gives pytest `--ci-job ID [--ci-shard I/N]` (run exactly one CI job) and a marker per
suite (`pytest -m kernels`). It changes nothing for a plain `pytest` run beyond the markers.
"""
pytest_plugins = ["ci.pytest_plugin"]
