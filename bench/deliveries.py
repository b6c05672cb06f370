"""Signed Sume deliveries as API Gateway events, built outside any timed region."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from devstack.apigw import http_api_event
from sume.contract import signature
from sume.core.names import WEBHOOK_PATH

SECRET = "whsec_bench_secret"  # noqa: S105 - signs the bench's own deliveries, offline
ARTIFACT_URL = "https://cdn.sume.example/jobs/{job_id}/renders/{n}/output-1080p.mp4?sig={sig}"


def new_job_id() -> str:
    return f"job_{uuid.uuid4().hex[:20]}"


def job_body(job_id: str, event: str = "job.completed", pad_bytes: int = 0) -> bytes:
    """A terminal event shaped like Sume's: two artifacts, a little metadata.

    ``pad_bytes`` grows it (an event too large for an item goes to S3).
    """
    data: dict[str, Any] = {
        "event": event,
        "job_id": job_id,
        "status": "OK" if event == "job.completed" else "ERROR",
        "created_at": "2026-11-29T00:00:00Z",
        "finished_at": "2026-11-29T00:03:12Z",
    }
    if event == "job.completed":
        data["payload"] = {
            "artifacts": [
                ARTIFACT_URL.format(job_id=job_id, n=n, sig=uuid.uuid4().hex) for n in (1, 2)
            ],
            "duration_seconds": 192.4,
        }
    else:
        data["error"] = {"code": "RENDER_FAILED", "message": "encoder exited with status 1"}
    if pad_bytes:
        data["metadata"] = {"notes": "x" * pad_bytes}
    return json.dumps(data, separators=(",", ":")).encode()


def test_ping_body() -> bytes:
    return json.dumps({"event": "webhook.test", "request_id": uuid.uuid4().hex}).encode()


@dataclass(frozen=True)
class Signing:
    secret: str = SECRET
    skew_seconds: int = 0
    forge: bool = False


def delivery(body: bytes, signing: Signing = Signing(), method: str = "POST") -> dict[str, Any]:
    """The API Gateway event for one delivery of ``body``."""
    timestamp = int(time.time()) - signing.skew_seconds
    secret = ("not-" + signing.secret) if signing.forge else signing.secret
    headers = {
        "content-type": "application/json",
        "user-agent": "Sume-Webhooks/1.0",
        **signature.headers(body, [secret], timestamp),
    }
    return http_api_event(method, WEBHOOK_PATH, headers, body)


def forged(body: bytes) -> dict[str, Any]:
    return delivery(body, Signing(forge=True))


def stale(body: bytes) -> dict[str, Any]:
    return delivery(body, Signing(skew_seconds=3600))


def oversize(max_body_bytes: int) -> dict[str, Any]:
    return delivery(job_body(new_job_id(), pad_bytes=max_body_bytes + 1))
