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


def parse_since(text: str, now: float) -> int:
    """``30m``, ``2h``, ``7d`` ago, or an ISO 8601 date/time (UTC unless it says otherwise)."""
    value = text.strip()
    if match := _DURATION.match(value):
        return int(now) - int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise OpsError(
            f"--since {text!r}: use a duration like 30m, 2h, 7d or an ISO time like "
            "2026-11-29T08:00:00Z",
            USAGE,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())
