"""``python -m ci.audit``: the same program as ``dspark-audit``."""
from ci.audit.cli import main

raise SystemExit(main())
