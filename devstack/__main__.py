"""``make run``: the local stack."""

from __future__ import annotations

import sys

from devstack.cli import main

sys.exit(main())
