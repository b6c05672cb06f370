"""Time as the domain is handed it: a wall clock, and what is left of an invocation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Clock = Callable[[], float]
"""Unix time in seconds (``time.time`` in Lambda; a test's or the bench's own)."""

TimeLeft = Callable[[], float]
"""Seconds left in the Lambda invocation."""


def time_left(context: Any) -> TimeLeft:
    """What is left of the invocation, from its Lambda context."""
    return lambda: context.get_remaining_time_in_millis() / 1000
