"""API Gateway HTTP API (payload format 2.0) events in and out."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes | None
    """None when the body could not be decoded (bad base64)."""
    body_length_hint: int = 0
    """Length of the body as it arrived, before decoding (for the size cap)."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def request_from_event(event: Mapping[str, Any]) -> HttpRequest:
    http = (event.get("requestContext") or {}).get("http") or {}
    raw = event.get("body") or ""
    # HTTP API lower-cases header names; repeated headers arrive comma-joined,
    # which is also how multiple signature entries are separated.
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    body: bytes | None
    if event.get("isBase64Encoded"):
        try:
            body = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            body = None
    else:
        body = raw.encode("utf-8", "surrogatepass")
    return HttpRequest(
        method=str(http.get("method", "")).upper(),
        path=str(http.get("path") or event.get("rawPath") or ""),
        headers=headers,
        body=body,
        body_length_hint=len(raw),
    )


def to_event_response(response: HttpResponse) -> dict[str, Any]:
    return {
        "statusCode": response.status,
        "headers": {"content-type": "application/json", **response.headers},
        "body": json.dumps(response.body, separators=(",", ":")),
    }
