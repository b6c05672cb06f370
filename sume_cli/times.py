"""Epoch seconds (as stored on the item) to ISO 8601 UTC and back."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sume_cli import USAGE, OpsError

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def iso(epoch: float | int | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds_of(text: str) -> int | None:
    """``30m``, ``2h``, ``7d`` in seconds; None when ``text`` is no such duration."""
    match = _DURATION.match(text.strip())
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)] if match else None


def parse_duration(text: str, option: str) -> int:
    """A duration option's seconds, or a usage error naming ``option``."""
    seconds = seconds_of(text)
    if seconds is None:
        raise OpsError(f"{option} {text!r}: use a duration like 90s, 30m, 2h or 7d", USAGE)
    return seconds


def parse_since(text: str, now: float, option: str = "--since") -> int:
    """``30m``, ``2h``, ``7d`` ago, or an ISO 8601 date/time (UTC unless it says otherwise);
    a usage error naming ``option`` when it is neither."""
    value = text.strip()
    if (seconds := seconds_of(value)) is not None:
        return int(now) - seconds
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise OpsError(
            f"{option} {text!r}: use a duration like 30m, 2h, 7d or an ISO time like "
            "2026-11-29T08:00:00Z",
            USAGE,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())
