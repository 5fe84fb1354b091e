"""Tests, each filed into suites by ``ci.registration.register``; helpers live beside them."""
