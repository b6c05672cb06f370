"""Signed deliveries to a receiver, exactly as Sume would send them.

``webhook.test`` proves the route and the secret without touching any job;
a terminal event for ``--job`` goes further and creates (or duplicates) a real
job, so its follow-up work runs: use a job id that means nothing to anyone.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from sume.contract import signature
from sume.contract.envelope import TEST_EVENT
from sume_cli import USAGE, OpsError

# Sume gives up on an attempt after 10 s; a slower answer is a failure too.
TIMEOUT_SECONDS = 10
MAX_SHOWN_BODY = 2000


@dataclass(frozen=True)
class Answer:
    label: str
    status: int
    body: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def test_ping() -> tuple[str, bytes]:
    body = {"event": TEST_EVENT, "request_id": f"req_ops_{uuid.uuid4().hex[:12]}"}
    return TEST_EVENT, json.dumps(body).encode()


def terminal_event(job_id: str, event: str, artifacts: Sequence[str]) -> tuple[str, bytes]:
    body: dict[str, object] = {"event": event, "job_id": job_id}
    if event == "job.completed":
        body.update(status="OK", payload={"artifacts": list(artifacts)})
    else:
        body.update(
            status="ERROR",
            error={"code": "OPS_TEST", "message": "sent by sume-webhooks send-test"},
        )
    return f"{event} {job_id}", json.dumps(body).encode()


def check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in {"https", "http"} or not parts.hostname:
        raise OpsError(f"webhook URL {url!r} is not an http(s) URL", USAGE)


def deliver(url: str, label: str, raw: bytes, secrets: Sequence[bytes], now: float) -> Answer:
    """POST ``raw`` signed with every secret (one header entry each, as Sume does)."""
    request = urllib.request.Request(  # noqa: S310 - check_url allows http(s) only
        url,
        data=raw,
        method="POST",
        headers={
            "content-type": "application/json",
            "user-agent": "sume-webhooks-ops",
            **signature.headers(raw, secrets, int(now)),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            return Answer(label, response.status, response.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as error:
        return Answer(label, error.code, error.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise OpsError(f"cannot reach {url}: {reason}") from None


def send(
    url: str,
    secrets: Sequence[bytes],
    job_id: str | None = None,
    event: str = "job.completed",
    artifacts: Sequence[str] = (),
) -> list[Answer]:
    check_url(url)
    deliveries = [test_ping()]
    if job_id:
        deliveries.append(terminal_event(job_id, event, artifacts))
    return [deliver(url, label, raw, secrets, time.time()) for label, raw in deliveries]
