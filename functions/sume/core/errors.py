"""The error taxonomy: every error the domain raises on purpose is of one of three kinds.

Handlers map errors to answers by kind, never by listing classes:

- ``RetryableError``: a later attempt may succeed (an answer 5xx, an SQS retry);
- ``PermanentError``: retrying cannot help (a precise 4xx, a processing error, a refusal);
- ``ConfigurationError``: the function is deployed wrong; fail loudly, never degrade.

AWS's own failures (botocore's ``ClientError`` and ``BotoCoreError``) are
retryable too: ``RETRYABLE`` is the kind as a handler catches it. Among them is
MRSC's ``ReplicatedWriteConflictException`` (a write racing one from another
region, not applied): never a failed condition, which only
``ConditionalCheckFailedException`` is (docs/regions.md).
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError


class SumeError(Exception):
    """Base of every error the domain raises on purpose."""


class RetryableError(SumeError):
    """A later attempt may succeed."""


class PermanentError(SumeError):
    """Sent again, it fails again."""


class ConfigurationError(SumeError, RuntimeError):
    """The function is deployed wrong; it must fail loudly, never degrade."""


AWS_FAILURES: tuple[type[Exception], ...] = (ClientError, BotoCoreError)
"""AWS could not serve a call."""

RETRYABLE: tuple[type[Exception], ...] = (RetryableError, *AWS_FAILURES)
"""What a later attempt may fix: ours, and AWS failing to serve a call."""
