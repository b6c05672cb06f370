"""The Sume simulator itself: signing, retries, timeouts, and the server it plays."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from devstack.simulator import Sume
from sume.signature import SCHEME, SIGNATURE_HEADER, TIMESTAMP_HEADER, verify


class Receiver(ThreadingHTTPServer):
    """A loopback receiver that records requests and answers from a script."""

    daemon_threads = True

    def __init__(self, answers: list[tuple[int, float]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers
        self.requests: list[tuple[dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/webhooks/sume"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["content-length"]))
        self.server.requests.append(({k.lower(): v for k, v in self.headers.items()}, raw))
        status, delay = self.server.answers.pop(0) if self.server.answers else (200, 0.0)
        time.sleep(delay)
        body = b'{"result":"new"}'
        try:
            self.send_response(status)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # Sume timed out first, which is the point of a slow answer


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    server = Receiver(list(request.param))
    # shutdown() waits out a poll: the default 0.5 s would be most of the test.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("receiver", [[(500, 0), (429, 0), (200, 0)]], indirect=True)
def test_every_attempt_is_signed_afresh_with_every_secret(receiver: Receiver) -> None:
    with Sume(receiver.url, ["new-secret", "old-secret"], spacing_seconds=0) as sume:
        job = sume.new_job("job.failed")
        delivery = sume.deliver(job)
    assert [a.status for a in delivery.attempts] == [500, 429, 200]
    assert delivery.delivered
    for headers, raw in receiver.requests:
        assert raw == job.body
        timestamp = int(headers[TIMESTAMP_HEADER])
        assert headers[SIGNATURE_HEADER].count(SCHEME) == 2
        for position, secret in enumerate([b"new-secret", b"old-secret"]):
            assert verify(raw, headers, [secret], now=timestamp) == 0, position


@pytest.mark.parametrize("receiver", [[(503, 0)] * 10], indirect=True)
def test_sume_gives_up_after_ten_attempts(receiver: Receiver) -> None:
    with Sume(receiver.url, ["s"], spacing_seconds=0) as sume:
        delivery = sume.deliver(sume.new_job())
    assert len(delivery.attempts) == 10
    assert not delivery.delivered
    assert len(receiver.requests) == 10


@pytest.mark.parametrize("receiver", [[(200, 6.0)]], indirect=True)
def test_an_answer_later_than_the_timeout_is_retried(receiver: Receiver) -> None:
    with Sume(receiver.url, ["s"], spacing_seconds=0, timeout_seconds=1.5) as sume:
        delivery = sume.deliver(sume.new_job())
    first, second = delivery.attempts
    assert first.timed_out and not first.reached
    assert second.acknowledged
    assert delivery.timed_out == 1


@pytest.mark.parametrize("receiver", [[]], indirect=True)
def test_a_dropped_first_answer_is_retried_though_it_was_a_2xx(receiver: Receiver) -> None:
    with Sume(receiver.url, ["s"], spacing_seconds=0) as sume:
        delivery = sume.deliver(sume.new_job(), drop_first_response=True)
    assert [(a.status, a.dropped) for a in delivery.attempts] == [(200, True), (200, False)]
    assert delivery.reached == 2


def test_an_unreachable_receiver_fails_every_attempt() -> None:
    with Sume("http://127.0.0.1:9/webhooks/sume", ["s"], spacing_seconds=0) as sume:
        delivery = sume.deliver(sume.new_job(), unreachable=True)
    assert len(delivery.attempts) == 10
    assert delivery.reached == 0
    assert all(a.error for a in delivery.attempts)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=10)
    try:
        connection.request("GET", parts.path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_status_url_and_artifacts_are_served_like_sume() -> None:
    with Sume("http://127.0.0.1:9/webhooks/sume", ["s"], api_token="tok") as sume:
        done = sume.new_job(artifacts=2)
        running = sume.new_job(finished=False)
        bearer = {"authorization": "Bearer tok"}

        assert get(done.status_url)[0] == 401
        assert get(done.status_url, bearer) == (200, done.body)
        status, body = get(running.status_url, bearer)
        assert (status, json.loads(body)["state"]) == (200, "running")

        envelope = json.loads(done.body)
        plain, described = envelope["payload"]["artifacts"]
        assert get(plain) == (200, done.artifacts["render-0.mp4"])
        assert get(described["url"]) == (200, done.artifacts["render-1.mp4"])
        assert get(f"{sume.base_url}/status/job_unknown", bearer)[0] == 404
    assert envelope["created_at"] and envelope["sume_region"] == "eu-west"
    assert sume.hits[urlsplit(plain).path] == 1
