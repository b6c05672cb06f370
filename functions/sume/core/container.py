"""What a Lambda container builds once, on first use, and forgets all together.

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
