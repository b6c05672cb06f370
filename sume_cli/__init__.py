"""``sume-webhooks``, the operator's CLI: commands, each a small function over injected clients.

It ships (the console script ``sume-webhooks``) and imports only the domain
package and infra's plain modules (``infra.spec``, ``infra.capacity``), never the
CDK or the dev tools. ``sume_cli.main`` parses arguments and maps ``OpsError``
to a one-line message and an exit code (and reads ``sys.argv[0]``: how the
operator started it, ``sume_cli.invocation``); nothing here prints tracebacks.
"""

from __future__ import annotations

# Exit codes, documented in docs/cli.md.
OK = 0
FAILED = 1
USAGE = 2
CHECK_FAILED = 3


class OpsError(Exception):
    """An expected failure: a one-line message for stderr and an exit code."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code
