"""The Lambda runtime as the domain sees it: what a container builds once (and forgets all
together), the wall clock, and what is left of an invocation.

Each handler's service and every boto3 client is built on first use and kept
for the container's life. ``reset()`` forgets all of them, as a fresh
container would: tests and the local stack call it when they swap the
environment or start moto.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_cached: list[Any] = []


def per_container(fn: F) -> F:
    """``fn``'s result kept per arguments until ``reset()``."""
    cached = functools.cache(fn)
    _cached.append(cached)
    return cached  # type: ignore[return-value]


def reset() -> None:
    """Forget every service and client built so far."""
    for cached in _cached:
        cached.cache_clear()


Clock = Callable[[], float]
"""Unix time in seconds (``time.time`` in Lambda; a test's or the bench's own)."""

TimeLeft = Callable[[], float]
"""Seconds left in the Lambda invocation."""


def time_left(context: Any) -> TimeLeft:
    """What is left of the invocation, from its Lambda context."""
    return lambda: context.get_remaining_time_in_millis() / 1000
