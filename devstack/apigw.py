"""Plays API Gateway (HTTP API, payload format 2.0) in front of a Lambda handler.

Only the stack's routes (``POST /webhooks/sume``, ``GET /health``) reach the
handler; anything else gets API Gateway's own 404, as it would in AWS, so local
and cloud answer alike.
"""

from __future__ import annotations

import base64
import json
import traceback
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

from devstack.lambda_context import LambdaContext
from devstack.loopback import LoopbackHTTPServer
from sume.core.names import HEALTH_PATH, WEBHOOK_PATH

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
Observer = Callable[[dict[str, Any], dict[str, Any]], None]

# API Gateway's payload limit; larger requests never reach the function.
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
# The stack's route keys (infra/api.py), as "METHOD path".
ROUTES = frozenset({f"POST {WEBHOOK_PATH}", f"GET {HEALTH_PATH}"})


def headers_of(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Lower-cased names, repeated headers comma-joined, as HTTP API does."""
    headers: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    return headers


def http_api_event(
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """The event API Gateway builds for one request.

    The body is passed as text when it is valid UTF-8 and base64 otherwise,
    so the receiver sees exactly the bytes that were sent.
    """
    path, _, query = target.partition("?")
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode("ascii"), True
    now = datetime.now(UTC)
    route = f"{method} {path}"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route,
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": headers.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": route,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": encoded,
    }
    if body:
        event["body"] = text
    return event


class HttpApiServer(LoopbackHTTPServer):
    """A loopback HTTP server whose one route calls ``handler`` with HTTP API events."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
        function_name: str,
        timeout_seconds: float,
        observer: Observer | None = None,
    ) -> None:
        super().__init__(_RequestHandler, host=address[0], port=address[1])
        self.lambda_handler = handler
        self.function_name = function_name
        self.timeout_seconds = timeout_seconds
        self.observer = observer


class _RequestHandler(BaseHTTPRequestHandler):
    server: HttpApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """The local stack prints its own line per delivery."""

    def _read_body(self) -> bytes | None:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
                if sum(map(len, chunks)) > MAX_PAYLOAD_BYTES:
                    return None
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_PAYLOAD_BYTES:
            return None
        return self.rfile.read(length) if length else b""

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.send_header("apigw-requestid", uuid.uuid4().hex[:16])
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _gateway_error(self, status: int, message: str) -> None:
        body = json.dumps({"message": message}).encode()
        self._answer(status, {"content-type": "application/json"}, body)

    def _dispatch(self) -> None:
        body = self._read_body()
        if body is None:
            self.close_connection = True
            self._gateway_error(413, "Request Entity Too Large")
            return
        path = self.path.partition("?")[0]
        if f"{self.command} {path}" not in ROUTES:
            self._gateway_error(404, "Not Found")
            return
        event = http_api_event(
            self.command,
            self.path,
            headers_of(list(self.headers.items())),
            body,
            self.client_address[0],
        )
        context = LambdaContext(self.server.function_name, self.server.timeout_seconds)
        try:
            response = self.server.lambda_handler(event, context)
        except Exception:  # an unhandled error is API Gateway's 500
            traceback.print_exc()
            response = {"statusCode": 500, "body": json.dumps({"message": "Internal Server Error"})}
        if self.server.observer:
            self.server.observer(event, response)
        raw = response.get("body") or ""
        payload = base64.b64decode(raw) if response.get("isBase64Encoded") else raw.encode()
        headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        # The caller may have given up first (Sume's timeout): the server
        # drops that connection quietly, and Sume's retry will come.
        self._answer(int(response.get("statusCode", 200)), headers, payload)

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch
