"""The whole system on one laptop: moto, the stack's resources, and the three
handlers, unchanged, behind the same event shapes AWS would hand them.

``python -m devstack`` (``make run``, devstack/cli.py) serves the webhook route on
``http://127.0.0.1:$PORT/webhooks/sume`` until Ctrl-C. ``DevStack`` is the
same thing as an object with ``start()``/``stop()`` for tests, the demo and
the ops CLI; ports may be 0 (ephemeral).

The handlers read their configuration from ``os.environ`` as in Lambda, so
one process hosts one local stack at a time; ``stop()`` restores the
environment it changed.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3

from devstack import dynamodb_local
from devstack.apigw import HttpApiServer, http_api_event
from devstack.banner import banner
from devstack.eventsources import QueueTap, Schedule, SqsEventSource
from devstack.journal import Entry, Journal, Observers
from devstack.lambda_context import LambdaContext
from devstack.logs import invoking, ship
from devstack.resources import (
    create_resources,
    describe_stack,
    environment,
    subscribe_queue,
)
from devstack.settings import (
    FAKE_CREDENTIALS,
    HOST,
    LOCAL_ONLY,
    DevStackSettings,
    PortTaken,
    check_settings,
    ensure_free,
)
from devstack.switches import create_switches
from infra import spec
from infra.spec import ResourceNames
from sume.core import runtime
from sume.core.names import (
    DUE_AT,
    MAX_DUE_SHARDS,
    WEBHOOK_PATH,
    Env,
)
from sume.core.observability import logger
from sume.core.settings import TableSettings, due_shards, integer
from sume.store.compose import build_jobs
from sume.store.jobs import JobsTable
from sume_cli.stackinfo import local_log_groups

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
        self._observers = Observers(self.journal, self.jobs, self.settings.retry_delay_seconds)
        self._moto: Any = None
        self._http: HttpApiServer | None = None
        self._loops: list[Any] = []
        self._schedule: Schedule | None = None
        self._saved_env: dict[str, str | None] = {}
        self._saved_log_level: int | None = None
        self._clients: dict[str, Any] = {}
        self._session: boto3.session.Session | None = None
        self._clients_lock = threading.Lock()
        # One poller container: a registration batch and a scheduled run never overlap.
        self._poller_lock = threading.Lock()
        self.endpoint_url = ""
        self.dynamodb_endpoint_url = ""
        """DynamoDB Local's, when the tables live there; else DynamoDB is moto's."""
        self._dynamodb: Any = None
        self.url = ""
        self.port = 0
        self.moto_port = 0
        self.names: ResourceNames | None = None
        self.worker_mapping: str | None = None
        """The worker's event source mapping (``devstack.switches``), as the stack's."""
        self.journal_queue_url = ""
        self._unship: Callable[[], None] | None = None

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

    def _start_engines(self) -> None:
        """moto (embedded, or another process's), and DynamoDB Local when asked for."""
        if self.settings.moto_endpoint:
            # The process running that server makes it faithful (moto_atomic, moto_limits).
            self.endpoint_url = self.settings.moto_endpoint
        else:
            from devstack import moto_atomic, moto_limits, switches
            from devstack.loopback import moto_server

            moto_atomic.install()
            moto_limits.install()
            switches.install()
            # moto's werkzeug logs every AWS call; the journal says what matters.
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            ensure_free(self.settings.moto_port, "moto")
            self._moto = moto_server(self.settings.moto_port)
            self.moto_port = int(self._moto.get_host_and_port()[1])
            self.endpoint_url = f"http://{HOST}:{self.moto_port}"
        if self.settings.dynamodb == dynamodb_local.ENGINE:
            self._dynamodb = dynamodb_local.DynamoDBLocal().start()
            self.dynamodb_endpoint_url = self._dynamodb.endpoint_url

    def _start(self) -> None:
        ensure_free(self.settings.port, "webhook")
        self._start_engines()
        self._apply_env(self.client_environment())

        self.names = create_resources(
            self.session(),
            prefix=self.prefix,
            endpoint_url=self.endpoint_url,
            signing_secret=self.signing_secret,
            api_token=self.api_token,
            jobs_table=self.settings.jobs_table,
            leases_table=self.settings.leases_table,
            dynamodb_endpoint_url=self.dynamodb_endpoint_url or None,
        )
        self.journal_queue_url = self._subscribe_journal()
        # What `sume-webhooks pause` turns; the loops below obey it.
        turned = create_switches(self.client, self.names, self.prefix)
        self.worker_mapping = turned.worker
        self._apply_env(self.lambda_environment())
        check_settings(os.environ)
        runtime.reset()
        self._set_log_level()

        receiver = importlib.import_module("receiver")
        if self.settings.ship_logs:
            self._ship_logs()
        try:
            self._http = HttpApiServer(
                (HOST, self.settings.port),
                self._contained(receiver.handler),
                f"{self.prefix}-receiver",
                spec.RECEIVER_TIMEOUT,
                self._observers.on_delivery,
            )
        except OSError:
            # Taken since ensure_free looked (moto took a while to start).
            raise PortTaken(self.settings.port, "webhook") from None
        self.port = self._http.port
        self.url = f"http://{HOST}:{self.port}{WEBHOOK_PATH}"
        describe_stack(
            self.client("sqs"),
            self.names.queue_url,
            self.url,
            due_shards(os.environ),
            integer(os.environ, Env.DUE_SHARDS_PREVIOUS, 0, 0, MAX_DUE_SHARDS),
        )
        sqs = self.client("sqs")
        self._loops.append(QueueTap(sqs, self.journal_queue_url, self._observers.on_announcement))
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
                    observer=self._observers.on_batch,
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
                observer=self._observers.on_registrations,
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
            due=self._anything_due,
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

    def halt(self) -> None:
        """Every loop (worker, poller, queue readers) stops taking work at once, as in a
        region's outage; what one holds it finishes, and the API still answers."""
        for loop in self._loops:
            loop.halt()

    def stop(self) -> None:
        global _running  # noqa: PLW0603
        # All halted at once, then the work under way awaited (not the long polls:
        # Loop.stop); moto goes after it.
        self.halt()
        for loop in reversed(self._loops):
            loop.stop()
        self._loops.clear()
        if self._http:
            self._http.stop()
            self._http = None
        if self._unship:
            self._unship()
            self._unship = None
        if self._moto:
            self._moto.stop()
            self._moto = None
        if self._dynamodb:
            self._dynamodb.stop()
            self._dynamodb = None
        self._clients.clear()
        self._session = None
        self._restore_env()
        if self._saved_log_level is not None:
            logger.setLevel(self._saved_log_level)
            self._saved_log_level = None
        runtime.reset()
        with _running_lock:
            if _running is self:
                _running = None

    # Environment

    def client_environment(self) -> dict[str, str]:
        """What any AWS client (boto3, the ops CLI) needs to talk to this stack's moto."""
        tables = {"AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb_endpoint_url}
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            # botocore and the SDKs read it: DynamoDB's calls go there, the rest to moto.
            **(tables if self.dynamodb_endpoint_url else {}),
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
        if self.worker_mapping:
            # The poller's sweep holds owed work while the worker is paused.
            env[Env.WORKER_EVENT_SOURCE_MAPPING] = self.worker_mapping
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

    def _set_log_level(self) -> None:
        """The functions' logger at the level their environment now names.

        In Lambda the environment is there before the first import; here the
        functions' logger was made when ``sume.core.observability`` was first
        imported (by this module, or by whatever imported it first), reading
        POWERTOOLS_LOG_LEVEL before the stack set it.
        """
        if self._saved_log_level is None:
            self._saved_log_level = logger.log_level
        logger.setLevel(os.environ["POWERTOOLS_LOG_LEVEL"])

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
                endpoint = self.endpoint_url
                if service == "dynamodb" and self.dynamodb_endpoint_url:
                    endpoint = self.dynamodb_endpoint_url
                self._clients[service] = session.client(service, endpoint_url=endpoint)
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

    def _anything_due(self) -> bool:
        """Whether a round would find work: an item of the due-work index whose time has
        come (a poll, a sweep, a lease's end). A scan of the sparse index, paged."""
        assert self.names is not None
        request: dict[str, Any] = {
            "TableName": self.names.table,
            "IndexName": self.jobs().due_index,
            "FilterExpression": f"{DUE_AT} <= :now",
            "ExpressionAttributeValues": {":now": {"N": str(int(time.time()))}},
            "Select": "COUNT",
        }
        while True:
            page = self.client("dynamodb").scan(**request)
            if page["Count"]:
                return True
            if "LastEvaluatedKey" not in page:
                return False
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

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
        return self._observers.announced()

    @property
    def announcements(self) -> list[dict[str, Any]]:
        """Every announcement seen on the bus, in the order it came."""
        return self._observers.seen()

    # Wrappers around the handlers

    def _contained(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        from sume.core.observability import metrics

        def invoke(event: dict[str, Any], context: Any) -> Any:
            try:
                with invoking(context.log_group_name):
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
                self._observers.on_poll(run)
            return result

        return invoke

    def _one_at_a_time(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        def invoke(event: dict[str, Any], context: Any) -> Any:
            with self._poller_lock:
                return handler(event, context)

        return invoke

    def _ship_logs(self) -> None:
        """The functions log to their log groups on moto, as Lambda ships their lines."""
        from sume.core.observability import logger

        assert self.names is not None
        self._unship = ship(
            self.client("logs"),
            local_log_groups(self.prefix),
            logging.getLogger(logger.name),
            os.environ.get("POWERTOOLS_LOG_LEVEL") or "ERROR",
        )

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
        """The banner: where everything is, and what to send first (devstack/banner.py)."""
        return banner(self)
