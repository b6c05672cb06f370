"""The Lambda runtime as the domain sees it: what a container builds once (and forgets all
together), what a container restored from a snapshot must draw afresh, the wall clock, and
what is left of an invocation.

Each handler's service and every boto3 client is built on first use and kept
for the container's life. ``reset()`` forgets all of them, as a fresh
container would: tests and the local stack call it when they swap the
environment or start moto.
"""

from __future__ import annotations

import functools
import random
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


def after_restore(hook: Callable[[], object]) -> bool:
    """Run ``hook`` in each container Lambda SnapStart restores; False where none ever is.

    ``snapshot_restore_py`` is part of Lambda's Python runtimes (3.12+), not
    a dependency: tests, the local stack and the bench run without it.
    """
    try:
        from snapshot_restore_py import (  # type: ignore[import-not-found,unused-ignore]
            register_after_restore,
        )
    except ImportError:
        return False
    register_after_restore(hook)
    return True


def reseed() -> None:
    """Draw ``random``'s state afresh from the OS.

    Containers restored from one snapshot would otherwise share it: botocore's
    retry jitter draws from it, so their retries would back off in step. Ids
    need nothing (``uuid.uuid4`` reads ``os.urandom`` on each call).
    """
    random.seed()


Clock = Callable[[], float]
"""Unix time in seconds (``time.time`` in Lambda; a test's or the bench's own)."""

TimeLeft = Callable[[], float]
"""Seconds left in the Lambda invocation."""


def time_left(context: Any) -> TimeLeft:
    """What is left of the invocation, from its Lambda context."""
    return lambda: context.get_remaining_time_in_millis() / 1000
