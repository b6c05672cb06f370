"""What processing one message of the jobs queue came to: the worker's result."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Action(enum.StrEnum):
    PROCESSED = "processed"
    LOST_ANNOUNCED = "lost_announced"
    """A job the poller gave up was announced lost."""
    PROCESSING_ERROR = "processing_error"
    SKIPPED = "skipped"
    LEFT_TO_SWEEPER = "left_to_sweeper"
    """The message's last receive, and the job is still owed and in budget: the
    message is acknowledged, and the sweeper queues the job at its due time."""


@dataclass(frozen=True)
class JobResult:
    job_id: str
    action: Action
    reason: str
    """Skipped: absent | finished | not_received | claim_lost. Left to the
    sweeper: why this attempt did not end the job (the failure's code). Otherwise
    the outcome (processed) or the processing error's code."""
    outcome: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    artifacts_copied: int = 0
    bytes_copied: int = 0
    attempts: int = 0
    details_dropped: bool = False
    """DynamoDB refused the full finish: the item holds the state and codes only."""
    replay: bool = False
    """The work was an operator's replay (``sume-webhooks replay``)."""
    sequence: int | None = None
    """The number of the announcement it sent (processed or processing error)."""
