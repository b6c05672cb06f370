"""Plays Sume: signed webhook deliveries with Sume's retry rules, plus the
``status_url`` and artifact links Sume serves, on a loopback HTTP server.

What it follows from the contract: every attempt is signed afresh
(``sume-v1`` over ``"<timestamp>.<raw body>"``, one entry per active secret),
up to 10 attempts at a fixed spacing, a 10 s timeout, any non-2xx retried, a
2xx stops. A Redeliver sends the same terminal event again, later, with a new
timestamp and signature. ``webhook.test`` has no ``job_id``.

Faults it can inject: the first answer lost on its way back (so a delivery
that was processed is retried), concurrent twin deliveries, a job whose every
delivery fails to connect (only its ``status_url`` tells), slow answers from
its own server (status and artifacts), and artifact links that answer 503
before they work.

CLI::

    python -m devstack.simulator send URL [--secret S] [--event job.failed] ...
    python -m devstack.simulator scenario [URL] [--secret S] [--table NAME]

``send`` prints each attempt as it is answered, with when the next one goes.
Exit status: 0 delivered (a 2xx), 1 Sume gave up (every attempt refused or
unanswered), 2 usage, 130 stopped with Ctrl-C (nothing more is sent).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import secrets
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from devstack.loopback import LoopbackHTTPServer
from sume.contract import signature

MAX_ATTEMPTS = 10
TIMEOUT_SECONDS = 10.0
# The contract says "fixed spacing" without a figure; a minute is a plausible
# production value. Tests and the demo scale it down.
SPACING_SECONDS = 60.0
USER_AGENT = "Sume-Webhooks/1 (simulator)"
# The longest a wait sleeps at a stretch. Python acts on Ctrl-C between bytecodes:
# a SIGINT caught after the last such check but before a sleep's system call began
# (the process preempted in between, as on a busy machine) does not cut that sleep
# short, and its KeyboardInterrupt waits for the sleep's end. Naps bound that delay,
# whatever the spacing (a minute by default).
NAP_SECONDS = 0.2
ERRORS = {
    "job.failed": {"code": "RENDER_FAILED", "message": "the encoder exited with status 1"},
    "job.canceled": {"code": "CANCELED", "message": "canceled by the user"},
}


@dataclass
class SumeJob:
    job_id: str
    event: str
    artifacts: dict[str, bytes]
    status_url: str
    body: bytes
    """The terminal event, fixed once: every delivery and Redeliver sends these bytes."""
    finished: bool = True
    """Whether ``status_url`` reports the terminal state yet."""
    slow_seconds: float = 0.0
    """Delay before Sume's server answers this job's status and artifact requests."""
    flaky: int = 0
    """Each artifact link answers 503 this many times before it serves the file."""

    @property
    def outcome(self) -> str:
        return self.event.removeprefix("job.")

    def digests(self) -> dict[str, str]:
        return {name: hashlib.sha256(data).hexdigest() for name, data in self.artifacts.items()}


@dataclass(frozen=True)
class Attempt:
    number: int
    status: int | None
    """HTTP status of the answer; None when none came (refused, timeout)."""
    answer: dict[str, Any] | None
    error: str | None = None
    dropped: bool = False
    """The answer came but was lost on its way back to Sume (fault injection)."""

    @property
    def reached(self) -> bool:
        """The receiver got the request and answered it."""
        return self.status is not None

    @property
    def timed_out(self) -> bool:
        """Sent, but no answer in time: the receiver may or may not have handled it."""
        return self.error == "timeout"

    @property
    def acknowledged(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and not self.dropped


@dataclass
class Delivery:
    job_id: str | None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def delivered(self) -> bool:
        return any(a.acknowledged for a in self.attempts)

    @property
    def reached(self) -> int:
        return sum(a.reached for a in self.attempts)

    @property
    def timed_out(self) -> int:
        return sum(a.timed_out for a in self.attempts)

    def results(self) -> list[str]:
        """The receiver's ``result`` (or ``error``) of every answered attempt."""
        out = []
        for a in self.attempts:
            if a.answer is not None:
                out.append(str(a.answer.get("result") or a.answer.get("error")))
        return out


def pause(seconds: float) -> None:
    """Sleep ``seconds``, in naps, so that Ctrl-C stops the wait within ``NAP_SECONDS``."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, NAP_SECONDS))


def post(url: str, raw: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_class(parts.netloc, timeout=timeout)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request("POST", target or "/", body=raw, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class _SumeHandler(BaseHTTPRequestHandler):
    server: LoopbackHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the caller reports what matters."""

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        sume: Sume = self.server.owner
        path = self.path.partition("?")[0]
        sume.hits[path] += 1
        kind, _, rest = path.strip("/").partition("/")
        job_id, _, name = (unquote(part) for part in rest.partition("/"))
        job = sume.jobs.get(job_id)
        if job is None:
            self._send(404, b'{"error":"not_found"}')
            return
        if job.slow_seconds:
            time.sleep(job.slow_seconds)
        if kind == "status":
            if sume.api_token and self.headers.get("authorization") != f"Bearer {sume.api_token}":
                self._send(401, b'{"error":"unauthorized"}')
            elif job.finished:
                self._send(200, job.body)
            else:
                self._send(200, json.dumps({"job_id": job.job_id, "state": "running"}).encode())
        elif kind == "artifacts" and name in job.artifacts:
            if sume.hits[path] <= job.flaky:
                self._send(503, b'{"error":"try_again"}')
            else:
                self._send(200, job.artifacts[name], "application/octet-stream")
        else:
            self._send(404, b'{"error":"not_found"}')


class Sume:
    """A faithful stand-in for Sume, talking to one webhook URL."""

    def __init__(
        self,
        webhook_url: str,
        signing_secrets: Sequence[str],
        *,
        attempts: int = MAX_ATTEMPTS,
        spacing_seconds: float = SPACING_SECONDS,
        timeout_seconds: float = TIMEOUT_SECONDS,
        api_token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        on_attempt: Callable[[Attempt, float | None], None] | None = None,
    ) -> None:
        """``on_attempt`` hears of each attempt as soon as it is answered, with the
        seconds until the next one (None: the delivery is over)."""
        if not signing_secrets or not all(signing_secrets):
            raise ValueError("Sume signs every delivery: give at least one non-empty secret")
        self.webhook_url = webhook_url
        self.secrets = list(signing_secrets)
        self.attempts = attempts
        self.spacing = spacing_seconds
        self.timeout = timeout_seconds
        self.api_token = api_token
        self.on_attempt = on_attempt
        self.jobs: dict[str, SumeJob] = {}
        self.hits: Counter[str] = Counter()
        self._server = LoopbackHTTPServer(_SumeHandler, self, host=host, port=port)
        # Bound and never listening: connecting to it is refused at once,
        # which is how a delivery that cannot reach the receiver fails.
        self._black_hole = socket.socket()
        self._black_hole.bind((host, 0))

    @property
    def base_url(self) -> str:
        return self._server.url()

    def __enter__(self) -> Sume:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Sume:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()
        self._black_hole.close()

    # Jobs

    def new_job(
        self,
        event: str = "job.completed",
        artifacts: int | dict[str, bytes] = 0,
        *,
        job_id: str | None = None,
        artifact_bytes: int = 4096,
        slow_seconds: float = 0.0,
        flaky: int = 0,
        finished: bool = True,
        extra_bytes: int = 0,
    ) -> SumeJob:
        """A job Sume ran, with its terminal event built once; ``extra_bytes`` adds a
        field of that many bytes Sume's contract does not name (a large event)."""
        job_id = job_id or f"job_{uuid.uuid4().hex[:16]}"
        if isinstance(artifacts, int):
            artifacts = {
                f"render-{i}.mp4": secrets.token_bytes(artifact_bytes) for i in range(artifacts)
            }
        status_url = f"{self.base_url}/status/{quote(job_id, safe='')}"
        body: dict[str, Any] = {
            "event": event,
            "job_id": job_id,
            "status": "OK" if event == "job.completed" else "ERROR",
        }
        if event == "job.completed":
            urls = [
                f"{self.base_url}/artifacts/{quote(job_id, safe='')}/{quote(name)}"
                for name in artifacts
            ]
            # Both shapes Sume may use: a plain URL, or an object with a url.
            body["payload"] = {
                "artifacts": [
                    url if i % 2 == 0 else {"url": url, "name": name}
                    for i, (url, name) in enumerate(zip(urls, artifacts, strict=True))
                ]
            }
        else:
            body["error"] = ERRORS.get(event, {"code": "ERROR", "message": event})
        # Fields this receiver does not know must be kept, not dropped.
        body["created_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body["sume_region"] = "eu-west"
        if extra_bytes:
            body["render_log"] = "x" * extra_bytes
        raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
        job = SumeJob(
            job_id, event, dict(artifacts), status_url, raw, finished, slow_seconds, flaky
        )
        self.jobs[job_id] = job
        return job

    # Deliveries

    def headers(self, raw: bytes, signing_secrets: Sequence[str] | None = None) -> dict[str, str]:
        # One entry per active secret, separated by ", " (the contract allows spaces).
        secrets_ = signing_secrets or self.secrets
        signed = signature.headers(raw, secrets_, int(time.time()), separator=", ")
        return {"content-type": "application/json", "user-agent": USER_AGENT, **signed}

    def _attempt(
        self, number: int, url: str, raw: bytes, secrets_: Sequence[str] | None, drop: bool
    ) -> Attempt:
        try:
            status, data = post(url, raw, self.headers(raw, secrets_), self.timeout)
        except TimeoutError:
            return Attempt(number, None, None, "timeout")
        except OSError as exc:
            return Attempt(number, None, None, type(exc).__name__)
        try:
            answer = json.loads(data) if data else {}
        except ValueError:
            answer = {"error": data[:80].decode("utf-8", "replace")}
        return Attempt(number, status, answer if isinstance(answer, dict) else {}, dropped=drop)

    def send(
        self,
        raw: bytes,
        job_id: str | None = None,
        *,
        drop_first_response: bool = False,
        unreachable: bool = False,
        signing_secrets: Sequence[str] | None = None,
        attempts: int | None = None,
        url: str | Callable[[], str] | None = None,
    ) -> Delivery:
        """Deliver ``raw`` with Sume's retry rules until a 2xx or the last attempt.

        ``url`` replaces the webhook URL for this delivery; a callable is asked
        before every attempt, as Sume resolves the host afresh (a DNS failover
        record may point elsewhere by the next retry).
        """
        target = url or self.webhook_url
        if unreachable:
            target = "http://{}:{}/webhooks/sume".format(*self._black_hole.getsockname()[:2])
        delivery = Delivery(job_id)
        last = attempts or self.attempts
        for number in range(1, last + 1):
            if number > 1:
                pause(self.spacing)
            drop = drop_first_response and number == 1
            where = target() if callable(target) else target
            attempt = self._attempt(number, where, raw, signing_secrets, drop)
            delivery.attempts.append(attempt)
            over = attempt.acknowledged or number == last
            if self.on_attempt:
                self.on_attempt(attempt, None if over else self.spacing)
            if over:
                break
        return delivery

    def deliver(self, job: SumeJob, **faults: Any) -> Delivery:
        return self.send(job.body, job.job_id, **faults)

    def redeliver(self, job: SumeJob) -> Delivery:
        """Sume's Redeliver button: the same event, a fresh timestamp and signature."""
        return self.send(job.body, job.job_id)

    def deliver_concurrently(self, job: SumeJob, copies: int) -> list[Delivery]:
        """Twin deliveries of one job released at the same instant."""
        barrier = threading.Barrier(copies)

        def one() -> Delivery:
            barrier.wait()
            return self.deliver(job)

        with ThreadPoolExecutor(copies) as pool:
            return list(pool.map(lambda _: one(), range(copies)))

    def ping(self) -> Delivery:
        """The dashboard's "send test event": no job_id, a request_id."""
        body = {"event": "webhook.test", "request_id": f"req_{uuid.uuid4().hex[:12]}"}
        return self.send(json.dumps(body, separators=(",", ":")).encode())
