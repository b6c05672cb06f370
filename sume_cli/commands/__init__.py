"""The commands, one module per family; each is ``(Ops, argparse.Namespace) -> exit code``.

``sume_cli.main`` builds the parser that names them and calls the one chosen.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from sume_cli.context import Ops

PROG = "sume-webhooks"
# Job ids a hint names before it says "and N more".
MAX_LISTED_JOBS = 10
Command = Callable[[Ops, argparse.Namespace], int]


def deployment_option(ops: Ops) -> str:
    if ops.endpoint_url:
        return f"--endpoint-url {ops.endpoint_url}"
    return f"--stage {ops.stage}"
