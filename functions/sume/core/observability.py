"""The Powertools logger, metrics and tracer shared by the three handlers, and the two ways
they use them: ``count`` this, and a ``retried`` step whose failure is counted, logged, raised."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer

from sume.core.errors import RETRYABLE
from sume.core.names import METRICS_NAMESPACE, SERVICE_NAME

# Service and namespace are pinned here, not left to the environment: the
# stack's alarms select these exact metrics by namespace and service.
logger = Logger(service=SERVICE_NAME)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE_NAME)
# Only botocore is worth a subsegment here; patching every library the X-Ray
# SDK knows imports them all and was most of the receiver's cold-start excess.
tracer = Tracer(service=SERVICE_NAME, patch_modules=["botocore"])


def count(name: str, value: int = 1) -> None:
    """Add ``value`` to the count ``name`` (a ``Metric``) in this invocation's metrics."""
    metrics.add_metric(name=name, unit="Count", value=value)


@contextlib.contextmanager
def retried(
    name: str,
    message: str,
    errors: tuple[type[BaseException], ...] = RETRYABLE,
    **keys: Any,
) -> Iterator[None]:
    """A step whose failure (of ``errors``: retryable by default) is counted as ``name``,
    logged as ``message`` with ``keys`` and the traceback, and raised for the retry."""
    try:
        yield
    except errors:
        count(name)
        # The log line's location is the step's, not this helper's: two frames up
        # (contextlib's __exit__, then the function the step is in).
        logger.exception(message, stacklevel=4, **keys)
        raise
