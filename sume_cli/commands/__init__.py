"""The commands, one module per family; each is ``(Ops, argparse.Namespace) -> exit code``.

``sume_cli.main`` builds the parser that names them and calls the one chosen.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from sume_cli.context import Ops
from sume_cli.invocation import PROG

__all__ = ["MAX_LISTED_JOBS", "PROG", "Command"]
# Job ids a hint names before it says "and N more".
MAX_LISTED_JOBS = 10
Command = Callable[[Ops, argparse.Namespace], int]
