"""The local HTTP API answers like API Gateway in front of the receiver."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
from http.server import HTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from devstack.apigw import HttpApiServer
from devstack.simulator import Sume
from devstack.stack import DevStack
from sume.contract.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from tests.builders import job_body, raw_of, signed_headers


def request(
    stack: DevStack, method: str, path: str, body: bytes, headers: list[tuple[str, str]]
) -> tuple[int, dict]:
    connection = http.client.HTTPConnection(urlsplit(stack.url).netloc, timeout=10)
    try:
        connection.putrequest(method, path)
        for name, value in [*headers, ("content-length", str(len(body)))]:
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_only_the_stacks_routes_reach_the_receiver(stack: DevStack) -> None:
    raw = raw_of(job_body())
    headers = list(signed_headers(raw, [stack.signing_secret]).items())
    assert request(stack, "GET", "/webhooks/sume", b"", []) == (404, {"message": "Not Found"})
    assert request(stack, "POST", "/webhooks/other", raw, headers) == (
        404,
        {"message": "Not Found"},
    )


def test_the_health_route_answers_as_in_aws(stack: DevStack) -> None:
    # The uptime check an operator tries locally before pointing a monitor at a stage.
    assert request(stack, "GET", "/health", b"", []) == (
        200,
        {"status": "ok", "region": stack.settings.region},
    )
    # API Gateway routes GET /health only; the receiver never sees another method.
    assert request(stack, "POST", "/health", b"", []) == (404, {"message": "Not Found"})


def test_a_body_that_is_not_utf8_arrives_byte_for_byte(stack: DevStack) -> None:
    # Passed base64-encoded, as API Gateway does: the signature still verifies
    # over the exact bytes, and only then is the body found not to be JSON.
    raw = b'{"event":"job.completed","job_id":"\xff\xfe"}'
    headers = list(signed_headers(raw, [stack.signing_secret]).items())
    assert request(stack, "POST", "/webhooks/sume", raw, headers) == (
        400,
        {"error": "body_not_json"},
    )


def test_repeated_signature_headers_are_joined_like_http_api(stack: DevStack) -> None:
    body = job_body(event="job.failed")
    raw = raw_of(body)
    timestamp = signed_headers(raw, [stack.signing_secret])[TIMESTAMP_HEADER]
    headers = [
        ("content-type", "application/json"),
        (TIMESTAMP_HEADER, timestamp),
        (SIGNATURE_HEADER, sign(b"retired-secret", timestamp, raw)),
        (SIGNATURE_HEADER, sign(stack.signing_secret.encode(), timestamp, raw)),
    ]
    status, answer = request(stack, "POST", "/webhooks/sume?via=test", raw, headers)
    assert (status, answer) == (200, {"result": "new", "job_id": body["job_id"]})


def test_a_delivery_without_signature_is_refused(stack: DevStack) -> None:
    raw = raw_of(job_body())
    status, answer = request(
        stack, "POST", "/webhooks/sume", raw, [("content-type", "application/json")]
    )
    assert (status, answer) == (401, {"error": "missing_timestamp"})
    assert stack.journal.entries("rejected")[-1].detail == "401 missing_timestamp"


def reset_by_client(server: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start a request, reset the connection (RST), wait until the server is done with it."""
    done = threading.Event()
    shutdown_request = server.shutdown_request

    def finished(request: Any) -> None:
        # Called last for every connection, after handle_error.
        shutdown_request(request)
        done.set()

    monkeypatch.setattr(server, "shutdown_request", finished)
    with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as client:
        client.sendall(b"POST /webhooks/sume HTTP/1.1\r\nhost: x\r\n")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    done.wait()


@pytest.mark.parametrize("server", ["api", "sume"])
def test_a_client_that_resets_its_connection_leaves_no_traceback(
    server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make demo` printed ConnectionResetError tracebacks from these servers."""
    if server == "api":
        api = HttpApiServer(("127.0.0.1", 0), lambda event, context: {}, "receiver", 5)
        api.start()
        try:
            reset_by_client(api, monkeypatch)
        finally:
            api.stop()
    else:
        with Sume("http://127.0.0.1:9/webhooks/sume", ["s"]) as sume:
            reset_by_client(sume._server, monkeypatch)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "ConnectionResetError" not in err
