"""The retry policy: how the attempt budget, the jobs queue and its DLQ fit together."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How the attempt budget, the jobs queue and its DLQ fit together (docs/worker.md)."""

    max_attempts: int
    """Failed attempts of one round of work before the worker gives up."""
    max_receives: int
    """Receives of one message before SQS moves it to the DLQ (its ``maxReceiveCount``)."""
    retry_seconds: int
    """When SQS hands a failed message back: the jobs queue's visibility timeout."""
    dlq_retention_seconds: int
    """How long the DLQ keeps a message; a parked job is due again after it."""
