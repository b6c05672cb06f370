"""``python -m devstack.simulator``."""

from __future__ import annotations

from devstack.simulator.cli import main

raise SystemExit(main())
