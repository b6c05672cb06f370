"""Receiving one Sume delivery: size, signature, envelope, intake.

Checks run cheapest first and every refusal happens before any AWS call
(the signing secret is cached per container). ``receive`` either returns a
``Receipt`` or raises ``Rejected``; the handler turns both into responses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sume.contract import envelope
from sume.contract.signature import SignatureError, SignedHeaders
from sume.core.errors import PermanentError
from sume.core.names import WEBHOOK_PATH
from sume.core.secrets import SigningSecrets
from sume.receiving.http import HttpRequest
from sume.store.intake import JobIntake
from sume.store.job import Source


class Rejected(PermanentError):
    """A request refused with a 4xx and a short machine-readable reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Receipt:
    result: str
    """new | duplicate | conflict | test | ignored"""
    secret_position: int
    job_id: str | None = None
    event: str | None = None
    enqueued: bool = False
    state: str | None = None


class WebhookReceiver:
    def __init__(
        self,
        intake: Callable[[], JobIntake],
        secrets: SigningSecrets,
        tolerance_seconds: int,
        max_body_bytes: int,
        clock: Callable[[], float],
    ) -> None:
        # The intake is built on first use: a rejected request never creates
        # an AWS client, let alone calls one.
        self._intake = intake
        self._secrets = secrets
        self._tolerance = tolerance_seconds
        self._max_body = max_body_bytes
        self._clock = clock

    def receive(self, request: HttpRequest) -> Receipt:
        if not request.path.endswith(WEBHOOK_PATH):
            raise Rejected(404, "not_found")
        if request.method != "POST":
            raise Rejected(405, "method_not_allowed")
        # The hint is checked first so an oversized base64 body is refused on
        # its length alone.
        if request.body_length_hint > 2 * self._max_body + 4:
            raise Rejected(413, "body_too_large")
        if request.body is None:
            raise Rejected(400, "invalid_base64")
        if len(request.body) > self._max_body:
            raise Rejected(413, "body_too_large")

        now = self._clock()
        try:
            # The headers are read before any secret is fetched, so a garbled
            # request never reaches Secrets Manager even on a cold container.
            signed = SignedHeaders.read(request.headers, now, self._tolerance)
            position = signed.secret_position(request.body, self._secrets.current())
        except SignatureError as exc:
            raise Rejected(401, exc.reason) from None

        try:
            delivery = envelope.parse(request.body)
        except envelope.MalformedEvent as exc:
            raise Rejected(400, exc.reason) from None

        if isinstance(delivery, envelope.Ping):
            return Receipt("test", position)
        if isinstance(delivery, envelope.UnknownEvent):
            return Receipt("ignored", position, event=delivery.event)

        intake = self._intake().accept(delivery, Source.WEBHOOK, int(now))
        return Receipt(
            intake.outcome.value,
            position,
            job_id=delivery.job_id,
            event=delivery.event,
            enqueued=intake.enqueued,
            state=intake.state,
        )
