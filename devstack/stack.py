"""The whole system on one laptop: moto, the stack's resources, and the three
handlers, unchanged, behind the same event shapes AWS would hand them.

``python -m devstack.stack`` (``make run``) serves the webhook route on
``http://127.0.0.1:$PORT/webhooks/sume`` until Ctrl-C. ``DevStack`` is the
same thing as an object with ``start()``/``stop()`` for tests, the demo and
the ops CLI; ports may be 0 (ephemeral).

The handlers read their configuration from ``os.environ`` as in Lambda, so
one process hosts one local stack at a time; ``stop()`` restores the
environment it changed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TextIO

import boto3
from botocore.exceptions import ClientError

from devstack.apigw import HttpApiServer, http_api_event
from devstack.eventsources import QueueTap, Schedule, SqsEventSource
from devstack.lambda_context import LambdaContext
from devstack.resources import (
    ANNOUNCEMENTS_PATTERN,
    create_resources,
    describe_stack,
    environment,
    subscribe_queue,
)
from devstack.switches import create_switches
from infra import spec
from infra.spec import ResourceNames
from sume.core import runtime
from sume.core.errors import ConfigurationError
from sume.core.names import (
    DETAIL_TYPES,
    MAX_DUE_SHARDS,
    REGISTRATION_DETAIL_TYPE,
    REGISTRATION_REFUSED_DETAIL_TYPE,
    WEBHOOK_PATH,
    Env,
)
from sume.core.settings import TableSettings, due_shards, integer
from sume.polling.settings import FanOutSettings, PollerSettings
from sume.receiving.settings import ReceiverSettings
from sume.store.compose import build_jobs
from sume.store.jobs import JobsTable, State
from sume.working.settings import WorkerSettings

HOST = spec.LOCAL_HOST
REGION = "us-east-1"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}

# Only here may artifact and status URLs be plain http on loopback; the
# deployed stack refuses both. The simulator's status server is this stack's
# Sume API, the one host the API token is sent to.
LOCAL_ONLY = spec.LOCAL_URLS

OUTCOME_OF_DETAIL_TYPE = {v: k for k, v in DETAIL_TYPES.items()}
# Every announcement. A queue the stack offered to readers would be shared by
# all of them, each taking messages from the others, so the banner gives this
# pattern instead: one rule and queue per reader, as on a deployed stage.
# How each handler reads its settings (and fails on a bad one).
HANDLER_SETTINGS: dict[str, Callable[[Mapping[str, str]], object]] = {
    "receiver": ReceiverSettings.from_env,
    "worker": WorkerSettings.from_env,
    "poller": lambda env: (PollerSettings.from_env(env), FanOutSettings.from_env(env)),
}
MAX_SHOWN_MESSAGE = 120
# Seconds between attempts in the banner's "Send one" line: with Sume's minute,
# a wrong secret would mean nine silent minutes before the simulator gives up.
SEND_ONE_SPACING = 5


@dataclass(frozen=True)
class DevStackSettings:
    port: int = 8080
    moto_port: int = 5000
    signing_secret: str | None = None
    """None: a fresh dev secret."""
    api_token: str | None = None
    """Bearer token for status_url polls, kept in moto's Secrets Manager. None: generated."""
    prefix: str | None = None
    """Resource name prefix. None: unique per stack, so stacks in one process never collide."""
    poll_every_seconds: float = 2.0
    retry_delay_seconds: int = 2
    """Seconds a message the worker reported failed stays invisible (AWS: the visibility
    timeout, 30 min)."""
    worker: bool = True
    poller: bool = True
    """False: no timer; call ``DevStack.poll()`` by hand."""
    lambda_env: dict[str, str] = field(default_factory=dict)
    """Extra or overriding Lambda environment (e.g. shorter timings for tests)."""
    region: str = REGION
    """The region the stack's clients and functions sign for (moto keeps regions apart)."""
    moto_endpoint: str | None = None
    """A moto server already running (another process's): the stack creates its
    resources there and starts none; ``moto_port`` is then unused."""
    jobs_table: str | None = None
    """The jobs table exists already, as a global table's replica does: it is used, not
    created. None: the stack creates its own."""


@dataclass(frozen=True)
class Entry:
    at: float
    kind: str
    """received, duplicate, conflict, test, ignored, rejected, error, retry, dlq, sweeper,
    poll, processed, recovered, processing_error, registered, refused"""
    job_id: str | None
    detail: str


class Journal:
    """What flowed through the stack, one entry per job event, in order."""

    def __init__(self, echo: Callable[[Entry], None] | None = None) -> None:
        self._entries: list[Entry] = []
        self._lock = threading.Lock()
        self._echo = echo

    def add(self, kind: str, job_id: str | None, detail: str = "") -> None:
        entry = Entry(time.time(), kind, job_id, detail)
        with self._lock:
            self._entries.append(entry)
        if self._echo:
            self._echo(entry)

    def entries(self, kind: str | None = None) -> list[Entry]:
        with self._lock:
            return [e for e in self._entries if kind is None or e.kind == kind]

    def count(self, kind: str) -> int:
        return len(self.entries(kind))


def _announced_again(detail: Mapping[str, Any]) -> str:
    """How the journal says an announcement is not the job's first (nothing if it is)."""
    sequence = detail.get("sequence")
    if not isinstance(sequence, int) or sequence <= 1:
        return ""
    lost = f", after lost at {detail['lost_at']}" if detail.get("lost_at") else ""
    return f" (announcement #{sequence}{lost})"


def printer(stream: TextIO = sys.stdout) -> Callable[[Entry], None]:
    """One line per entry; whole lines, even when threads print at once."""
    lock = threading.Lock()

    def echo(entry: Entry) -> None:
        clock = time.strftime("%H:%M:%S", time.localtime(entry.at))
        line = f"{clock} {entry.kind:<10} {entry.job_id or '-':<24} {entry.detail}\n"
        with lock:
            stream.write(line)
            stream.flush()

    return echo


class PortTaken(OSError):
    """One of the stack's ports is in use; ``role`` says which (webhook or moto)."""

    def __init__(self, port: int, role: str) -> None:
        super().__init__(f"{role} port {port} is already in use")
        self.port = port
        self.role = role


def ensure_free(port: int, role: str) -> None:
    """Raise ``PortTaken`` when ``port`` is taken on loopback.

    ThreadedMotoServer binds inside its thread and, when that fails, its
    start() waits forever for a ready signal that never comes.
    """
    if port == 0:
        return
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            raise PortTaken(port, role) from None


def check_settings(env: Mapping[str, str]) -> None:
    """Read each handler's settings as the handler will, so a bad value stops the start.

    Otherwise the first invocation fails instead: a traceback per retry of
    every job until the DLQ.
    """
    for name, read in HANDLER_SETTINGS.items():
        try:
            read(env)
        except ConfigurationError as exc:
            raise ConfigurationError(f"the {name}'s settings: {exc}") from None


_running: DevStack | None = None
_running_lock = threading.Lock()


class DevStack:
    """moto + the stack's resources + the three handlers behind their event sources."""

    def __init__(
        self, settings: DevStackSettings | None = None, echo: Callable[[Entry], None] | None = None
    ):
        self.settings = settings or DevStackSettings()
        self.signing_secret = self.settings.signing_secret or f"whsec_dev_{secrets.token_hex(16)}"
        self.api_token = self.settings.api_token or f"sume_dev_{secrets.token_hex(12)}"
        self.prefix = self.settings.prefix or f"sume-{secrets.token_hex(3)}"
        self.journal = Journal(echo)
        self.announcements: list[dict[str, Any]] = []
        self._announced = threading.Lock()
        self._moto: Any = None
        self._http: HttpApiServer | None = None
        self._loops: list[Any] = []
        self._schedule: Schedule | None = None
        self._saved_env: dict[str, str | None] = {}
        self._clients: dict[str, Any] = {}
        self._session: boto3.session.Session | None = None
        self._clients_lock = threading.Lock()
        # One poller container: a registration batch and a scheduled run never overlap.
        self._poller_lock = threading.Lock()
        self.endpoint_url = ""
        self.url = ""
        self.port = 0
        self.moto_port = 0
        self.names: ResourceNames | None = None
        self.journal_queue_url = ""

    # Lifecycle

    def __enter__(self) -> DevStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> DevStack:
        global _running  # noqa: PLW0603 - the handlers read one process-wide environment
        with _running_lock:
            if _running is not None:
                raise RuntimeError("a local stack is already running in this process")
            _running = self
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        ensure_free(self.settings.port, "webhook")
        if self.settings.moto_endpoint:
            # The process running that server makes it faithful (moto_atomic, moto_limits).
            self.endpoint_url = self.settings.moto_endpoint
        else:
            from moto.server import ThreadedMotoServer

            from devstack import moto_atomic, moto_limits, switches

            moto_atomic.install()
            moto_limits.install()
            switches.install()
            # moto's werkzeug logs every AWS call; the journal says what matters.
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            ensure_free(self.settings.moto_port, "moto")
            self._moto = ThreadedMotoServer(
                ip_address=HOST, port=self.settings.moto_port, verbose=False
            )
            self._moto.start()
            self.moto_port = int(self._moto.get_host_and_port()[1])
            self.endpoint_url = f"http://{HOST}:{self.moto_port}"
        self._apply_env(self.client_environment())

        self.names = create_resources(
            self.session(),
            prefix=self.prefix,
            endpoint_url=self.endpoint_url,
            signing_secret=self.signing_secret,
            api_token=self.api_token,
            jobs_table=self.settings.jobs_table,
        )
        self.journal_queue_url = self._subscribe_journal()
        # What `sume-webhooks pause` turns; the loops below obey it.
        turned = create_switches(self.client, self.names, self.prefix)
        self._apply_env(self.lambda_environment())
        check_settings(os.environ)
        runtime.reset()

        receiver = importlib.import_module("receiver")
        try:
            self._http = HttpApiServer(
                (HOST, self.settings.port),
                self._contained(receiver.handler),
                f"{self.prefix}-receiver",
                spec.RECEIVER_TIMEOUT,
                self._on_delivery,
            )
        except OSError:
            # Taken since ensure_free looked (moto took a while to start).
            raise PortTaken(self.settings.port, "webhook") from None
        self.port = self._http.port
        self.url = f"http://{HOST}:{self.port}{WEBHOOK_PATH}"
        describe_stack(
            self.client("dynamodb"),
            self.names.table,
            self.url,
            due_shards(os.environ),
            integer(os.environ, Env.DUE_SHARDS_PREVIOUS, 0, 0, MAX_DUE_SHARDS),
        )
        sqs = self.client("sqs")
        self._loops.append(QueueTap(sqs, self.journal_queue_url, self._on_announcement))
        if self.settings.worker:
            worker = importlib.import_module("worker")
            self._loops.append(
                SqsEventSource(
                    sqs,
                    self.names.queue_url,
                    self._contained(worker.handler),
                    f"{self.prefix}-worker",
                    spec.WORKER_TIMEOUT,
                    self.settings.retry_delay_seconds,
                    observer=self._on_batch,
                    enabled=turned.mapping(turned.worker),
                )
            )
        poller = importlib.import_module("poller")
        poller_handler = self._one_at_a_time(self._contained(poller.handler))
        # Registration events: the rule on the bus fills this queue, as in AWS.
        self._loops.append(
            SqsEventSource(
                sqs,
                self.names.registrations_queue_url,
                poller_handler,
                f"{self.prefix}-poller",
                spec.POLLER_TIMEOUT,
                self.settings.retry_delay_seconds,
                observer=self._on_registrations,
                enabled=turned.mapping(turned.registrations),
            )
        )
        shards_queue_url = self.names.shards_queue_url
        # A round as in AWS: the tick puts its assignments on the shards queue,
        # whose event source hands them to the poller one at a time.
        self._loops.append(
            SqsEventSource(
                sqs,
                shards_queue_url,
                self._runs_observed(poller_handler),
                f"{self.prefix}-poller",
                spec.POLLER_TIMEOUT,
                self.settings.retry_delay_seconds,
                batch_size=1,
                enabled=turned.mapping(turned.shards),
            )
        )
        self._schedule = Schedule(
            poller_handler,
            self.settings.poll_every_seconds,
            f"{self.prefix}-poller",
            spec.POLLER_TIMEOUT,
            region=self.settings.region,
            busy=lambda: self._waiting(shards_queue_url) > 0,
            enabled=turned.rule,
        )
        if self.settings.poller:
            self._loops.append(self._schedule)
        self._warm(receiver.handler)
        self._http.start()
        for loop in self._loops:
            loop.start()

    def _warm(self, receiver_handler: Callable[..., Any]) -> None:
        """Do the cold start once, before the first delivery.

        Here the three functions share one process and, on a busy laptop, a
        burst of first deliveries all building clients at once can outlast
        Sume's 10 s timeout. A signed ``webhook.test`` reads the settings and
        the signing secret; it is not journaled (nobody sent it).
        """
        from sume.contract import signature
        from sume.core import aws

        # The clients the handlers make on first use (receiver and poller: fast
        # ones; worker: patient ones).
        for service in ("dynamodb", "sqs", "s3", "secretsmanager"):
            aws.client(service)
        for service in ("dynamodb", "s3", "events"):
            aws.client(service, patient=True)
        raw = json.dumps({"event": "webhook.test", "request_id": "local-stack-warm-up"}).encode()
        headers = signature.headers(raw, [self.signing_secret], int(time.time()))
        event = http_api_event("POST", WEBHOOK_PATH, headers, raw)
        self._contained(receiver_handler)(event, LambdaContext("warm-up", spec.RECEIVER_TIMEOUT))

    def stop_receiver(self) -> None:
        """Take the webhook route down, as a region's outage would: connections are
        refused from now on, while the worker and the poller carry on."""
        if self._http:
            self._http.stop()
            self._http = None

    def stop(self) -> None:
        global _running  # noqa: PLW0603
        for loop in reversed(self._loops):
            loop.stop()
        self._loops.clear()
        if self._http:
            self._http.stop()
            self._http = None
        if self._moto:
            self._moto.stop()
            self._moto = None
        self._clients.clear()
        self._session = None
        self._restore_env()
        runtime.reset()
        with _running_lock:
            if _running is self:
                _running = None

    # Environment

    def client_environment(self) -> dict[str, str]:
        """What any AWS client (boto3, the ops CLI) needs to talk to this stack's moto."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            **FAKE_CREDENTIALS,
            "AWS_DEFAULT_REGION": self.settings.region,
            "AWS_REGION": self.settings.region,
        }

    def lambda_environment(self) -> dict[str, str]:
        """The functions' environment: the stack's, plus local-only settings."""
        assert self.names is not None
        env = {
            **environment(self.names),
            **LOCAL_ONLY,
            **{k: os.environ.get(k, v) for k, v in spec.LOCAL_TIMINGS.items()},
            # The local queue hands a failed message back after this, not SQS's 30 min.
            Env.QUEUE_RETRY_SECONDS: str(self.settings.retry_delay_seconds),
            "POWERTOOLS_TRACE_DISABLED": "true",
            # EMF metrics would print a JSON blob per invocation; AWS reads them, we don't.
            "POWERTOOLS_METRICS_DISABLED": "true",
            # The journal tells the story; the functions' own JSON logs are
            # there for errors, or all of them with POWERTOOLS_LOG_LEVEL=INFO.
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "ERROR"),
        }
        env.update(self.settings.lambda_env)
        return env

    def _apply_env(self, values: dict[str, str]) -> None:
        # The secret must come from Secrets Manager, as in AWS; a profile or a
        # session token from the developer's shell must not reach moto (or AWS).
        for key in (
            Env.SUME_COM_WEBHOOK_SIGNING_SECRET,
            Env.SUME_API_TOKEN,
            "AWS_PROFILE",
            "AWS_SESSION_TOKEN",
            "AWS_SECURITY_TOKEN",
        ):
            self._save(key)
            os.environ.pop(key, None)
        for key, value in values.items():
            self._save(key)
            os.environ[key] = value

    def _save(self, key: str) -> None:
        if key not in self._saved_env:
            self._saved_env[key] = os.environ.get(key)

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    # AWS access for callers (tests, demo, ops CLI)

    def session(self) -> boto3.session.Session:
        """One session for every client made here: each new one re-reads botocore's
        endpoint data, about half a second of CPU."""
        with self._clients_lock:
            if self._session is None:
                self._session = boto3.session.Session(
                    aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                    aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                    region_name=self.settings.region,
                )
            return self._session

    def client(self, service: str) -> Any:
        """A client on this stack's moto (cached: clients are thread-safe, and slow to make)."""
        session = self.session()
        with self._clients_lock:
            if service not in self._clients:
                self._clients[service] = session.client(service, endpoint_url=self.endpoint_url)
            return self._clients[service]

    def jobs(self) -> JobsTable:
        """The jobs table as the functions see it: read a job, or move it along by hand."""
        table = TableSettings.table_from(self.lambda_environment())
        return build_jobs(table, self.client("dynamodb"))

    def poll(self) -> Any:
        """Start a poller round now (also while its timer runs): the tick's answer; the
        shards queue's event source runs the round's assignments soon after."""
        assert self._schedule is not None
        return self._schedule.run_once()

    def expect(self, job_id: str, status_url: str, metadata: dict[str, Any] | None = None) -> None:
        """Register a submitted job for status polling, as an application would."""
        from sume.polling import registry

        assert self.names is not None
        registry.expect(
            job_id,
            status_url,
            metadata,
            table_name=self.names.table,
            dynamodb=self.client("dynamodb"),
        )

    def _waiting(self, queue_url: str) -> int:
        """Messages no consumer has taken yet (in-flight and retried ones aside)."""
        attributes = self.client("sqs").get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    def queue_depth(self, queue_url: str) -> int:
        attributes = self.client("sqs").get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def dlq_messages(self) -> list[str]:
        """Job ids in the DLQ (peeked: they become visible again at once)."""
        assert self.names is not None
        sqs = self.client("sqs")
        bodies = []
        for message in sqs.receive_message(
            QueueUrl=self.names.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0
        ).get("Messages", []):
            bodies.append(message["Body"])
        return bodies

    def announced(self) -> Counter[str]:
        """Announcements seen on the bus, per job id."""
        with self._announced:
            return Counter(str(a.get("detail", {}).get("job_id")) for a in self.announcements)

    # Observers: one journal line per job event, handlers untouched

    def _contained(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        from sume.core.observability import metrics

        def invoke(event: dict[str, Any], context: Any) -> Any:
            try:
                return handler(event, context)
            finally:
                # With metrics disabled Powertools never flushes; clear what
                # one invocation added so nothing accumulates across them.
                metrics.clear_metrics()

        return invoke

    def _runs_observed(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        def invoke(event: dict[str, Any], context: Any) -> Any:
            result = handler(event, context)
            for run in result.get("runs", []):
                self._on_poll(run)
            return result

        return invoke

    def _one_at_a_time(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        def invoke(event: dict[str, Any], context: Any) -> Any:
            with self._poller_lock:
                return handler(event, context)

        return invoke

    def _on_delivery(self, event: dict[str, Any], response: dict[str, Any]) -> None:
        status = int(response.get("statusCode", 0))
        try:
            answer = json.loads(response.get("body") or "{}")
        except ValueError:
            answer = {}
        result = answer.get("result")
        job_id = answer.get("job_id")
        if status >= 500:
            self.journal.add("error", job_id, f"{status} {answer.get('error') or answer}")
        elif status >= 400:
            self.journal.add("rejected", job_id, f"{status} {answer.get('error', '')}")
        elif result == "new":
            self.journal.add("received", job_id, "stored, work queued")
        elif result in ("duplicate", "conflict"):
            self.journal.add(result, job_id, "delivery counted, nothing else changed")
        elif result == "test":
            self.journal.add("test", None, "webhook.test acknowledged")
        else:
            self.journal.add(str(result), job_id, "acknowledged")

    def _on_batch(
        self, messages: list[dict[str, Any]], failed: set[str], error: BaseException | None
    ) -> None:
        for message in messages:
            receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
            last = receives >= spec.MAX_RECEIVES
            if message["MessageId"] not in failed:
                if last and self._still_owed(message["Body"]):
                    why = self._failure_code(message["Body"])
                    detail = f"{why}; receive {receives}: acknowledged, left to the sweeper"
                    self.journal.add("sweeper", message["Body"], detail)
                continue
            why = type(error).__name__ if error else self._failure_code(message["Body"])
            if last:
                self.journal.add("dlq", message["Body"], f"{why}; receive {receives}: to the DLQ")
            else:
                self.journal.add(
                    "retry",
                    message["Body"],
                    f"{why}; retried in {self.settings.retry_delay_seconds}s",
                )

    def _still_owed(self, job_id: str) -> bool:
        job = self.jobs().get(job_id, consistent=False)
        return job is not None and job.state in (State.RECEIVED, State.PROCESSING)

    def _failure_code(self, job_id: str) -> str:
        """Why the worker reported a job failed, as its item tells."""
        job = self.jobs().get(job_id, consistent=False)
        if job is None:
            return "no such job"
        if job.state == State.PROCESSING and (job.lease_until or 0) >= time.time():
            # Not claimed, so nothing was noted: another worker holds the lease.
            return "JobBusy"
        last_error = job.last_error
        return str(last_error.get("code")) if last_error is not None else "reported failed"

    def _on_registrations(
        self, messages: list[dict[str, Any]], failed: set[str], error: BaseException | None
    ) -> None:
        for message in messages:
            job_id = _registered_job_id(message["Body"])
            if message["MessageId"] in failed:
                self.journal.add("retry", job_id, "registration failed; SQS retries it")
                continue
            try:
                job = self.jobs().get(job_id, consistent=False) if job_id else None
            except ClientError:  # an id DynamoDB refuses as a key, which expect refused too
                job = None
            state = job.state if job else None
            if state is None:
                self.journal.add("refused", job_id, "registration event: in the registrations DLQ")
            else:
                self.journal.add("registered", job_id, f"by event; the job is {state}")

    def _on_poll(self, result: Any) -> None:
        if isinstance(result, dict) and any(
            isinstance(v, int) and not isinstance(v, bool) and v for v in result.values()
        ):
            detail = " ".join(
                f"{k}={v}"
                for k, v in result.items()
                if isinstance(v, int) and not isinstance(v, bool) and v
            )
            self.journal.add("poll", None, detail)

    def _on_announcement(self, event: dict[str, Any]) -> None:
        detail = event.get("detail") or {}
        job_id = detail.get("job_id")
        if event.get("detail-type") == REGISTRATION_REFUSED_DETAIL_TYPE:
            # Not a job's announcement: journaled, not counted among them.
            message = str(detail.get("message", ""))[:MAX_SHOWN_MESSAGE]
            self.journal.add(
                "announced", job_id, f"registration refused, {detail.get('reason')}: {message}"
            )
            return
        outcome = OUTCOME_OF_DETAIL_TYPE.get(event.get("detail-type", ""), "?")
        artifacts = detail.get("artifacts") or []
        words = outcome + (f", {len(artifacts)} artifact(s) stored" if artifacts else "")
        # A job announced again is a new announcement, and says which one.
        again = _announced_again(detail)
        problem = detail.get("processing_error")
        if outcome == "lost":
            error = detail.get("last_poll_error")
            last = f", last poll error {error}" if error else ""
            self.journal.add(
                "lost", job_id, f"announced: no answer after {detail.get('polls')} poll(s){last}"
            )
        elif detail.get("replay") is True:
            self.journal.add("replayed", job_id, words + again)
        elif outcome == "processing_error" and isinstance(problem, dict):
            message = str(problem.get("message", ""))[:MAX_SHOWN_MESSAGE]
            self.journal.add("processing_error", job_id, f"{problem.get('code')}: {message}{again}")
        elif self._source_of(job_id) == "poll":
            self.journal.add("recovered", job_id, f"by status_url poll: {words}{again}")
        else:
            self.journal.add("processed", job_id, words + again)
        # Counted after the journal line, so whoever sees the count sees the line.
        with self._announced:
            self.announcements.append(event)

    def _source_of(self, job_id: str | None) -> str | None:
        job = self.jobs().get(job_id, consistent=False) if job_id and self.names else None
        return job.source if job else None

    def _subscribe_journal(self) -> str:
        """The journal's own rule and queue on the bus, as any consumer of the
        announcements has: whoever else read this queue would take lines from it."""
        assert self.names is not None
        return subscribe_queue(
            self.client("sqs"),
            self.client("events"),
            f"{self.prefix}-journal",
            self.names.event_bus,
        )

    # Console

    def describe(self) -> Iterator[str]:
        assert self.names is not None
        n = self.names
        env = self.lambda_environment()
        yield "Sume webhooks: local stack on moto (no AWS account involved)"
        yield f"  webhook URL       {self.url}"
        secret_origin = (
            "from SUME_COM_WEBHOOK_SIGNING_SECRET"
            if self.settings.signing_secret
            else ("generated dev secret")
        )
        yield f"  signing secret    {self.signing_secret}   ({secret_origin})"
        yield f"  Sume API token    {self.api_token}   (bearer for status_url polls)"
        yield f"  moto endpoint     {self.endpoint_url}"
        yield f"  jobs table        {n.table}   (GSI due-work)"
        yield f"  jobs queue        {n.queue_url}"
        yield f"  jobs DLQ          {n.dlq_url}   (after {spec.MAX_RECEIVES} receives)"
        yield f"  artifacts bucket  {n.artifacts_bucket}"
        yield f"  payloads bucket   {n.payloads_bucket}"
        yield f"  event bus         {n.event_bus}"
        yield (
            f"  registrations     put '{REGISTRATION_DETAIL_TYPE}' on the bus; "
            f"refused ones wait in {n.registrations_dlq_url}"
        )
        yield f"  signing secret    {n.signing_secret_arn}"
        yield f"  API token secret  {n.api_token_secret_arn}"
        yield (
            "  announcements     make your own rule on the bus, pattern "
            f"{json.dumps(ANNOUNCEMENTS_PATTERN)}, and queue "
            "(docs/integrating.md#on-the-local-stack)"
        )
        # Both region variables: boto3 and the AWS CLI read AWS_DEFAULT_REGION, the
        # SDK for JavaScript only AWS_REGION.
        yield "  any AWS SDK/CLI:  " + " ".join(
            f"{k}={v}" for k, v in self.client_environment().items()
        )
        yield (
            "LOCAL ONLY: "
            + " ".join(f"{k}={v}" for k, v in LOCAL_ONLY.items())
            + " (http and loopback artifact/status URLs, the API token to loopback only;"
            + " the deployed stack refuses loopback)"
        )
        yield (
            "Short timings: "
            + " ".join(f"{k}={env[k]}" for k in spec.LOCAL_TIMINGS)
            + f"; poller every {self.settings.poll_every_seconds:g}s"
            + f"; a failed message is retried after {self.settings.retry_delay_seconds}s"
        )
        yield (
            "Send one:  .venv/bin/python -m devstack.simulator send "
            f"{self.url} --secret {self.signing_secret} --spacing {SEND_ONE_SPACING}"
        )


def start_problem(exc: OSError | ConfigurationError, port_variables: Mapping[str, str]) -> str:
    """Why the stack could not start, in one line naming what to change."""
    if isinstance(exc, PortTaken):
        return f"cannot start: {exc}: set {port_variables[exc.role]} to a free one"
    return f"cannot start: {exc}"


def _registered_job_id(body: str) -> str | None:
    """The job id a registration event names, for the journal (None if it names none)."""
    try:
        detail = json.loads(body).get("detail")
        job_id = detail.get("job_id")
    except (ValueError, AttributeError):
        return None
    return job_id if isinstance(job_id, str) and job_id else None


def _port(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name} must be a port number, got {raw!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.stack",
        description="The webhook receiver, worker and poller on an embedded moto server.",
    )
    parser.add_argument("--port", type=int, default=_port("PORT", 8080))
    parser.add_argument("--moto-port", type=int, default=_port("MOTO_PORT", 5000))
    parser.add_argument("--poll-every", type=float, default=2.0, help="poller interval (s)")
    args = parser.parse_args(argv)
    stack = DevStack(
        DevStackSettings(
            port=args.port,
            moto_port=args.moto_port,
            signing_secret=os.environ.get(Env.SUME_COM_WEBHOOK_SIGNING_SECRET) or None,
            prefix="sume-local",
            poll_every_seconds=args.poll_every,
        ),
        echo=printer(),
    )
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    try:
        stack.start()
    except (OSError, ConfigurationError) as exc:
        ports = {"webhook": "PORT (or --port)", "moto": "MOTO_PORT (or --moto-port)"}
        print(start_problem(exc, ports), file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, on_signal)
    for line in stack.describe():
        print(line)
    print("Ctrl-C stops. Job events as they flow:", flush=True)
    try:
        while not stopping.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    # A second Ctrl-C while the loops wind down would only leave a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("stopping...", flush=True)
    stack.stop()
    print("stopped.", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
