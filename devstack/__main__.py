"""``make run``: the local stack."""

from __future__ import annotations

from devstack.cli import exit_now, main

exit_now(main())
