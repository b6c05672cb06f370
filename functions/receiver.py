"""Lambda handler for Sume webhook deliveries (API Gateway HTTP API, payload 2.0),
and for the health route Route 53 asks in a multi-region deployment."""

from __future__ import annotations

import os
from typing import Any

from sume.core import runtime
from sume.core.errors import RETRYABLE, ConfigurationError
from sume.core.names import HEALTH_PATH, HEALTH_REGION, Happened, Metric
from sume.core.observability import count, logger, metrics, tracer
from sume.receiving import compose
from sume.receiving.http import (
    HttpRequest,
    HttpResponse,
    request_from_event,
    to_event_response,
)
from sume.receiving.webhook import Receipt, Rejected

# Deployed with SnapStart (infra/functions/receiver.py): what this import left
# is shared by every container restored from the snapshot. It builds no client
# and reads no secret or clock (all on first use); only ``random`` needs redrawing.
runtime.after_restore(runtime.reseed)

# The job events a delivery's answer makes (`sume-webhooks tail` follows them).
HAPPENED = {
    "new": Happened.RECEIVED,
    "duplicate": Happened.DUPLICATE,
    "conflict": Happened.CONFLICT,
}


def accepted(receipt: Receipt) -> HttpResponse:
    count(Metric.VERIFIED_DELIVERIES)
    count(Metric.signature_secret(receipt.secret_position))
    count(
        {
            "new": Metric.NEW_JOBS,
            "duplicate": Metric.DUPLICATES,
            "conflict": Metric.CONFLICTS,
            "test": Metric.TEST_PINGS,
            "ignored": Metric.UNKNOWN_EVENTS,
        }[receipt.result]
    )
    if receipt.enqueued and receipt.result != "new":
        count(Metric.REENQUEUED)
    if receipt.job_id:
        logger.set_correlation_id(receipt.job_id)
    logger.info(
        "delivery accepted",
        # None (a test ping, an unknown event) leaves the key out: no job event.
        job_event=HAPPENED.get(receipt.result),
        result=receipt.result,
        job_id=receipt.job_id,
        sume_event=receipt.event,
        enqueued=receipt.enqueued,
        stored_state=receipt.state,
        secret_position=receipt.secret_position,
    )
    body: dict[str, Any] = {"result": receipt.result}
    if receipt.job_id:
        body["job_id"] = receipt.job_id
    return HttpResponse(200, body)


def rejected(error: Rejected) -> HttpResponse:
    count(Metric.REJECTIONS)
    if error.status == 401:
        count(Metric.SIGNATURE_REJECTIONS)
    count(Metric.rejected(error.reason))
    logger.warning(
        "delivery rejected",
        job_event=Happened.REJECTED,
        status=error.status,
        reason=error.reason,
    )
    headers = {"allow": "POST"} if error.status == 405 else {}
    return HttpResponse(error.status, {"error": error.reason}, headers)


def health(request: HttpRequest) -> HttpResponse:
    """200 when this region's table answers, 503 when not; never why (it is unauthenticated)."""
    if request.method != "GET":
        return HttpResponse(405, {"error": "method_not_allowed"}, {"allow": "GET"})
    no_store = {"cache-control": "no-store"}
    try:
        compose.health_probe().check()
    except RETRYABLE:
        count(Metric.HEALTH_CHECK_FAILURES)
        logger.exception("health check failed: the jobs table did not answer")
        return HttpResponse(503, {"status": "unavailable"}, no_store)
    except ConfigurationError as error:
        count(Metric.CONFIGURATION_ERRORS)
        logger.error("receiver misconfigured", reason=str(error))
        return HttpResponse(500, {"error": "configuration_error"}, no_store)
    # A 0 for each healthy answer: the metric has data while Route 53 asks, and
    # no invocation ends with nothing to publish (Powertools warns on each).
    count(Metric.HEALTH_CHECK_FAILURES, 0)
    # Which region answered: the poller's Serving gauge asks the failover domain.
    region = os.environ.get("AWS_REGION", "")
    return HttpResponse(200, {"status": "ok", HEALTH_REGION: region}, no_store)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = request_from_event(event)
    if request.path == HEALTH_PATH:
        return to_event_response(health(request))
    count(Metric.DELIVERIES)
    try:
        response = accepted(compose.receiver_service().receive(request))
    except Rejected as error:
        response = rejected(error)
    except RETRYABLE:
        # Nothing was acknowledged: Sume retries a 5xx, and anything already
        # written says its work is owed.
        count(Metric.STORAGE_ERRORS)
        logger.exception("storage unavailable")
        response = HttpResponse(503, {"error": "storage_unavailable"}, {"retry-after": "10"})
    except ConfigurationError as error:
        # Deployed wrong (e.g. a signing secret that is a JSON object): a 401
        # would make Sume give up, a 5xx keeps it retrying while ops fix it.
        # The message names the setting, never its value.
        count(Metric.CONFIGURATION_ERRORS)
        logger.error("receiver misconfigured", reason=str(error))
        response = HttpResponse(500, {"error": "configuration_error"})
    return to_event_response(response)
