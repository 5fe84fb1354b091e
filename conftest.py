"""Root conftest: loads the registry plugin for every pytest run from the repository root.

``pytest --ci-job ID`` must work as the README shows it, with no path on the command
line: pytest reads this file before it parses the options, so ``--ci-job`` is known.
"""
pytest_plugins = ["ci.runner.pytest_plugin"]
