"""``python -m ci.audit.rules``: the rule registry's command line (ci/audit/rules/__init__.py)."""
from ci.audit.rules import main

raise SystemExit(main())
