"""The audit (``dspark-audit``, ``python -m ci.audit``): every registered suite runs.

``cli`` is the one command line; ``own`` audits this project's registry, ``foreign`` another
repository through an adapter (``ci.adapters``); ``rules`` declares every rule; ``findings`` is the
finding model; ``report``, ``json_report`` and ``sarif`` print it; ``baseline`` compares a run
with recorded debt; ``ops``, ``parity``, ``nox_session`` and ``skips`` are the checks of the own
audit that read impl ops, pytest collection, the nox suite session and registered skips.

May import: ``ci.github``, ``ci.adapters``, ``ci.registry`` and the shared modules.
"""
