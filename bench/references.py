"""The two receivers ours is measured against, built here and nowhere else.

``floor``: the least a correct receiver must do per delivery: one HMAC check, one conditional
write keyed on ``job_id``, one ``SendMessage``, plain boto3 clients, no observability.

``powertools``: what users would pick instead: our handler, observability and verification
with the conditional write replaced by Powertools' idempotency utility (``idempotent_function``
+ ``DynamoDBPersistenceLayer``), so the difference measured is the idempotency design alone.
Without a job item the message carries the whole event. Per new delivery it writes the
INPROGRESS record (``PutItem``), sends, then marks it COMPLETED (``UpdateItem``).
"""

from __future__ import annotations

import base64
import hmac
import json
import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from sume.contract import signature
from sume.contract.envelope import JobEvent
from sume.core.names import Metric
from sume.core.secrets import SigningSecrets
from sume.receiving.webhook import Rejected, WebhookReceiver
from sume.store.intake import Intake, JobIntake, Outcome
from sume.store.job import Source

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

# Sume may redeliver days later; a record that expired sooner would let a
# redelivery start the work again, so the window matches the jobs' retention.
IDEMPOTENCY_SECONDS = 35 * 24 * 3600


def _answer(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json"},
        "body": json.dumps(body, separators=(",", ":")),
    }


def floor_handler(ddb: Any, sqs: Any, table: str, queue_url: str, secret: bytes) -> Handler:
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raw = event.get("body") or ""
        body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
        headers = event.get("headers") or {}
        timestamp = headers.get(signature.TIMESTAMP_HEADER, "")
        tolerance = signature.TOLERANCE_SECONDS
        if not (timestamp.isdigit() and abs(time.time() - int(timestamp)) <= tolerance):
            return _answer(401, {"error": "invalid_timestamp"})
        expected = signature.sign(secret, timestamp, body).encode()
        entries = headers.get(signature.SIGNATURE_HEADER, "").split(",")
        if not any(hmac.compare_digest(e.strip().encode(), expected) for e in entries):
            return _answer(401, {"error": "signature_mismatch"})
        job_id = json.loads(body).get("job_id")
        if not job_id:
            return _answer(200, {"result": "test"})
        try:
            ddb.put_item(
                TableName=table,
                Item={"job_id": {"S": job_id}, "body": {"S": body.decode()}},
                ConditionExpression="attribute_not_exists(job_id)",
            )
        except ddb.exceptions.ConditionalCheckFailedException:
            return _answer(200, {"result": "duplicate", "job_id": job_id})
        sqs.send_message(QueueUrl=queue_url, MessageBody=job_id)
        return _answer(200, {"result": "new", "job_id": job_id})

    return handler


def powertools_handler(
    ddb: Any, sqs: Any, idempotency_table: str, queue_url: str, secrets: SigningSecrets
) -> Handler:
    from aws_lambda_powertools.utilities import idempotency

    import receiver
    from sume.core.observability import count, logger, metrics, tracer

    config = idempotency.IdempotencyConfig(
        event_key_jmespath="job_id",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=IDEMPOTENCY_SECONDS,
    )
    persistence = idempotency.DynamoDBPersistenceLayer(idempotency_table, boto3_client=ddb)

    @idempotency.idempotent_function(
        data_keyword_argument="event", persistence_store=persistence, config=config
    )
    def enqueue(event: dict[str, Any], raw: str, token: str) -> dict[str, Any]:
        sqs.send_message(QueueUrl=queue_url, MessageBody=raw)
        return {"job_id": event["job_id"], "token": token}

    def accept(event: JobEvent, source: Source, now: int) -> Intake:
        # A duplicate gets the first delivery's answer, token and all: that tells the two apart.
        token = uuid.uuid4().hex
        new = enqueue(event=event.data, raw=event.raw, token=token)["token"] == token
        return Intake(Outcome.NEW if new else Outcome.DUPLICATE, enqueued=new)

    intake = cast(JobIntake, SimpleNamespace(accept=accept))  # only ``accept`` is called
    tolerance = signature.TOLERANCE_SECONDS
    webhook = WebhookReceiver(lambda: intake, secrets, tolerance, 1024 * 1024, time.time)

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)
        count(Metric.DELIVERIES)
        try:
            response = receiver.accepted(webhook.receive(receiver.request_from_event(event)))
        except Rejected as error:
            response = receiver.rejected(error)
        return receiver.to_event_response(response)

    return handler
