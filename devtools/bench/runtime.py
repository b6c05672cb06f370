"""What a handler needs around it to run as in Lambda: a context, and somewhere to log."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class LambdaContext:
    function_name: str = "sume-bench-receiver"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:sume-bench-receiver"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    remaining_ms: int = 8000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


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
