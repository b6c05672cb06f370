"""Builders for signed Sume deliveries, the Lambda events that carry them and the contexts
the handlers are invoked with.

``LambdaContext`` is the local stack's on a clock of the test's own: an invocation's time
runs only when the test spends it, never because the machine is slow.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from devstack import lambda_context
from sume.contract import signature
from sume.core.names import REGISTRATION_DETAIL_TYPE, WEBHOOK_PATH

SECRET = "whsec_test_secret"


class InvocationClock:
    """Seconds into an invocation, moved only by the test (``spend``), as a budget of the
    work it stands for: a handler's time runs out where the test says, on any machine."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


class LambdaContext(lambda_context.LambdaContext):
    """The local stack's context, its deadline on an ``InvocationClock``: the whole
    ``timeout_seconds`` is left until the test spends some (``clock.spend``)."""

    def __init__(
        self,
        function_name: str = "sume-function",
        timeout_seconds: float = 60,
        memory_mb: int = 256,
    ) -> None:
        self.clock = InvocationClock()
        super().__init__(function_name, timeout_seconds, memory_mb, clock=self.clock)

    def leave(self, seconds: float) -> None:
        """Spend the invocation's time down to ``seconds`` left."""
        self.clock.spend(self.get_remaining_time_in_millis() / 1000 - seconds)


def job_body(
    job_id: str | None = None,
    event: str = "job.completed",
    artifacts: Sequence[Any] = (),
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "event": event,
        "job_id": job_id or f"job_{uuid.uuid4().hex[:12]}",
        "status": "OK" if event == "job.completed" else "ERROR",
    }
    if event == "job.completed":
        body["payload"] = {"artifacts": list(artifacts)}
    else:
        body["error"] = {"code": "RENDER_FAILED", "message": "boom"}
    body.update(extra)
    return body


def signed_headers(
    raw: bytes,
    secrets: Iterable[str] = (SECRET,),
    timestamp: int | None = None,
) -> dict[str, str]:
    ts = int(time.time()) if timestamp is None else timestamp
    return {"content-type": "application/json", **signature.headers(raw, secrets, ts)}


def verify(
    raw_body: bytes,
    headers: dict[str, str],
    secrets: Sequence[bytes],
    now: float,
    tolerance_seconds: int = signature.TOLERANCE_SECONDS,
) -> int:
    """The position of the secret that signed ``raw_body``, in the receiver's two steps:
    the headers alone first (a stale delivery reads no secret), then the MAC."""
    read = signature.SignedHeaders.read(headers, now, tolerance_seconds)
    return read.secret_position(raw_body, secrets)


def raw_of(body: dict[str, Any] | str | bytes) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def apigw_event(
    raw: bytes,
    headers: dict[str, str],
    method: str = "POST",
    path: str = WEBHOOK_PATH,
    base64_encoded: bool = False,
) -> dict[str, Any]:
    """An API Gateway HTTP API payload 2.0 event, as the receiver gets it."""
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {k.lower(): v for k, v in headers.items()},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.example.invalid",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "sume",
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": f"{method} {path}",
            "stage": "$default",
            "time": "29/Nov/2026:00:00:00 +0000",
            "timeEpoch": int(time.time() * 1000),
        },
        "body": base64.b64encode(raw).decode() if base64_encoded else raw.decode("utf-8"),
        "isBase64Encoded": base64_encoded,
    }


def delivery_event(body: dict[str, Any] | str | bytes, **kw: Any) -> dict[str, Any]:
    """A correctly signed delivery of ``body`` as an API Gateway event."""
    raw = raw_of(body)
    return apigw_event(raw, signed_headers(raw), **kw)


def sqs_event(job_ids: Iterable[str], receive_count: int = 1) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"msg-{i}-{uuid.uuid4().hex[:8]}",
                "receiptHandle": uuid.uuid4().hex,
                "body": job_id,
                "attributes": {
                    "ApproximateReceiveCount": str(receive_count),
                    "SentTimestamp": str(int(time.time() * 1000)),
                    "SenderId": "AIDA",
                    "ApproximateFirstReceiveTimestamp": str(int(time.time() * 1000)),
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:sume-jobs",
                "awsRegion": "us-east-1",
            }
            for i, job_id in enumerate(job_ids)
        ]
    }


def registration_entry(
    bus_name: str, detail: Any, detail_type: str = REGISTRATION_DETAIL_TYPE
) -> dict[str, Any]:
    """A PutEvents entry registering a job, as an application puts it on the bus."""
    return {
        "EventBusName": bus_name,
        "Source": "com.example.orders",
        "DetailType": detail_type,
        "Detail": json.dumps(detail),
    }


def scheduled_event() -> dict[str, Any]:
    return {
        "version": "0",
        "id": uuid.uuid4().hex,
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-11-29T00:00:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/sume-poller"],
        "detail": {},
    }


__all__ = [
    "SECRET",
    "InvocationClock",
    "LambdaContext",
    "apigw_event",
    "delivery_event",
    "job_body",
    "raw_of",
    "registration_entry",
    "scheduled_event",
    "signed_headers",
    "sqs_event",
]
