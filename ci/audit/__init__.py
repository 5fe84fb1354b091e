"""The audit (``dspark-audit``, ``python -m ci.audit``): every registered suite runs.

``cli`` is the one command line; ``own`` audits this project's registry, ``foreign`` another
repository through an adapter (``ci.adapters``); ``rules/`` holds every rule, one module each (its
declaration and its checks for both audits; the list in ``rules/__init__.py`` is the registry: to add
a rule, add one module there and its entry in the list); ``findings`` is the finding model and
``keys`` a finding's baseline key; ``report``, ``json_report`` and ``sarif`` print findings;
``baseline`` compares a run with recorded debt; ``ops``, ``parity``, ``nox_session`` and ``skips``
read impl ops, pytest collection, the nox suite session and registered skips for the own audit's rules.

May import: ``ci.github``, ``ci.adapters``, ``ci.registry`` and the shared modules.
"""
