"""What a handler needs around it to run as in Lambda: a context, and somewhere to log."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def silenced() -> Iterator[None]:
    """Send fd 1 to /dev/null: the JSON logs and metrics are still formatted and
    written (that work is part of what is measured), just not shown."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
