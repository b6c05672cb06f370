"""The handlers and the domain against moto: in-process (``aws``) or its server (``moto_server``).

Each test that takes ``aws`` gets a moto of its own: a fresh ``mock_aws`` with the
stack's resources made anew, so every table, queue, bucket and secret starts empty
and a test that counts a whole queue (jobs, DLQs, an announcements capture), scans
the table or deletes a resource sees only its own doing, whatever ran before it.
That costs a few milliseconds (about 40 ms of moto calls with the clients kept
below); what made a moto test cost 0.5-0.9 s was botocore parsing its service
models for every new session, which ``tests/conftest.py`` now does once. Sharing
the resources per module would save those 40 ms and cost every test its clean
slate, so they are not shared.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devstack import dynamodb_local, moto_atomic, moto_limits
from devstack.resources import create_resources, environment
from devstack.settings import DevStackSettings
from devstack.stack import DevStack
from infra.spec import ResourceNames
from sume.core import runtime
from tests.builders import SECRET
from tests.httpserver import LoopbackServer, StatusServer

# DynamoDB applies each write atomically; moto does not under concurrency.
moto_atomic.install()
# AWS refuses over-size items, events and keys and odd message characters; moto does not.
moto_limits.install()
# moto's server logs every request through werkzeug.
logging.getLogger("werkzeug").setLevel(logging.WARNING)


class _SetupSession:
    """The clients that create each test's resources, made once per process.

    moto's stubber is one of botocore's built-in handlers, so a client answers
    from whichever ``mock_aws`` is active when it is called; the handlers and the
    tests still make their own clients, as they would in a fresh container.
    """

    def __init__(self) -> None:
        self._session = boto3.session.Session()
        self._clients: dict[str, Any] = {}

    def client(self, service: str, endpoint_url: str | None = None) -> Any:
        key = f"{service} {endpoint_url}"
        if key not in self._clients:
            self._clients[key] = self._session.client(service, endpoint_url=endpoint_url)
        return self._clients[key]


_SETUP = _SetupSession()
# The conformance tier's: made while AWS_ENDPOINT_URL_DYNAMODB names DynamoDB Local.
_LOCAL_SETUP = _SetupSession()


def served_resources(endpoint: str, **kw: Any) -> ResourceNames:
    """The stack's resources on the moto server at ``endpoint``, made by the setup clients
    (a client costs more to build than the few calls each test's setup makes with it)."""
    return create_resources(_SETUP, endpoint_url=endpoint, **kw)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """moto's server on a loopback port, for paths that cross the network."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The test process's heap left out of garbage collection, so a bench's
    ``gc.collect()`` before each measured batch walks only what the bench made (0.3 s a
    call on the whole heap); nothing is timed in tests. What collection built is frozen
    already (tests/conftest.py); this freezes what earlier tests left, for the session."""
    gc.freeze()
    yield


# The conformance tier: test modules that mark themselves with ``CONFORMANCE`` run
# each test that uses ``aws`` or ``remote_aws`` twice, the jobs and leases tables on
# moto and on Amazon's DynamoDB Local (one per test worker, started when first
# needed); moto still serves SQS, S3, EventBridge and Secrets Manager. Where the two
# disagree, DynamoDB Local is taken as AWS (docs/dev/development.md lists each).
CONFORMANCE = pytest.mark.conformance
ENGINES = ("moto", dynamodb_local.ENGINE)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    uses_aws = {"aws", "remote_aws"} & set(metafunc.fixturenames)
    if uses_aws and metafunc.definition.get_closest_marker("conformance"):
        metafunc.parametrize("engine", ENGINES, indirect=True)


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> str:
    """Where the tables live: moto unless the test is parametrized by engine."""
    return str(getattr(request, "param", "moto"))


class _Engine:
    """The worker's DynamoDB Local, started on first use and stopped with the session."""

    def __init__(self) -> None:
        self._local: dynamodb_local.DynamoDBLocal | None = None

    def endpoint(self) -> str:
        if self._local is None:
            self._local = dynamodb_local.DynamoDBLocal().start()
        return self._local.endpoint_url

    def stop(self) -> None:
        if self._local is not None:
            self._local.stop()
            self._local = None


@pytest.fixture(scope="session")
def _dynamodb_local() -> Iterator[_Engine]:
    engine = _Engine()
    yield engine
    engine.stop()


@contextlib.contextmanager
def tables_on(
    engine: str, local: _Engine, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str | None, _SetupSession]]:
    """The prefix and setup clients for ``engine``; on DynamoDB Local every client made
    meanwhile sends DynamoDB's calls there (``AWS_ENDPOINT_URL_DYNAMODB``, which botocore
    reads when a client is made), and the test's tables go with the test."""
    if engine == "moto":
        yield None, _SETUP
        return
    endpoint = local.endpoint()
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    # Its data outlives the test, unlike moto's: each test's tables are its own.
    prefix = f"t{uuid.uuid4().hex[:10]}"
    try:
        yield prefix, _LOCAL_SETUP
    finally:
        ddb = _LOCAL_SETUP.client("dynamodb", endpoint)
        for table in ddb.list_tables()["TableNames"]:
            if table.startswith(f"{prefix}-"):
                ddb.delete_table(TableName=table)


@pytest.fixture
def aws(
    monkeypatch: pytest.MonkeyPatch, engine: str, _dynamodb_local: _Engine
) -> Iterator[ResourceNames]:
    """In-process moto of the test's own, with the stack's resources and the Lambda
    environment set (the tables on DynamoDB Local when ``engine`` says so)."""
    with mock_aws(), tables_on(engine, _dynamodb_local, monkeypatch) as (prefix, setup):
        names = create_resources(setup, **({"prefix": prefix} if prefix else {}))
        lambda_environment(monkeypatch, names)
        yield names
    runtime.reset()


@pytest.fixture
def remote_aws(
    moto_server: str, monkeypatch: pytest.MonkeyPatch, engine: str, _dynamodb_local: _Engine
) -> Iterator[ResourceNames]:
    """The stack's resources, under a fresh prefix, on the shared moto server; the
    handlers' clients go there over HTTP (DynamoDB's to DynamoDB Local when ``engine``
    says so)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    with tables_on(engine, _dynamodb_local, monkeypatch) as (prefix, _):
        names = create_resources(
            boto3.session.Session(), prefix=prefix or f"remote-{uuid.uuid4().hex[:6]}"
        )
        lambda_environment(monkeypatch, names)
        yield names
    runtime.reset()


def lambda_environment(monkeypatch: pytest.MonkeyPatch, names: ResourceNames) -> None:
    """The functions' environment for ``names``, and a fresh container."""
    for key, value in environment(names).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", SECRET)
    runtime.reset()


# The local stack's signing secret in the CLI's tests.
LOCAL_SECRET = "whsec_cli_local"

# Fewer shards than the default 16 keep each poller run's queries cheap on moto;
# every component reads the same setting, as in a deployment.
SHARDS = 4


@pytest.fixture
def sume(aws: ResourceNames, monkeypatch: pytest.MonkeyPatch) -> Iterator[StatusServer]:
    """Sume's status endpoint on loopback (local mode), with the stack on ``SHARDS`` shards."""
    monkeypatch.setenv("ALLOW_HTTP_URLS", "true")
    monkeypatch.setenv("ALLOW_PRIVATE_HOSTS", "true")
    monkeypatch.setenv("DUE_SHARDS", str(SHARDS))
    with StatusServer() as server:
        yield server


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """A loopback HTTP server playing Sume's artifact and status links."""
    with LoopbackServer() as s:
        yield s


@pytest.fixture
def local_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback server is http on 127.0.0.1: allowed only in local mode."""
    monkeypatch.setenv("ALLOW_HTTP_URLS", "true")
    monkeypatch.setenv("ALLOW_PRIVATE_HOSTS", "true")


class Logs:
    """What the functions log, exactly as Lambda would print it (Powertools JSON)."""

    def __init__(self, stream: io.StringIO) -> None:
        self._stream = stream

    @property
    def text(self) -> str:
        return self._stream.getvalue()

    def lines(self, level: str | None = None) -> list[dict[str, Any]]:
        parsed = [json.loads(line) for line in self.text.splitlines()]
        return [p for p in parsed if level is None or p["level"] == level]


@pytest.fixture
def logs() -> Iterator[Logs]:
    from sume.core.observability import logger

    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield Logs(stream)
    handler.setStream(previous)


@pytest.fixture
def local_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[DevStack]:
    """The local stack on ephemeral ports, its poller left to the test: what the CLI's
    commands are run against with ``--endpoint-url``. The test's own: a module's
    shared one stops first (one local stack runs per process)."""
    stop_shared_stacks()
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    with DevStack(local_stack_settings()) as running:
        yield running


class SharedStack:
    """A module's local stack, started when a test first asks for it: a stack costs a
    second to start and one to stop (its loops' long polls). For tests that hand it
    back as they found it; one that needs a stack of its own stops it."""

    def __init__(self) -> None:
        self._stack: DevStack | None = None

    def get(self) -> DevStack:
        if self._stack is None:
            self._stack = DevStack(local_stack_settings()).start()
        return self._stack

    def close(self) -> None:
        if self._stack is not None:
            self._stack.stop()
            self._stack = None


_SHARED_STACKS: list[SharedStack] = []


def stop_shared_stacks() -> None:
    for shared in _SHARED_STACKS:
        shared.close()


@pytest.fixture(scope="module")
def shared_stack() -> Iterator[SharedStack]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
        shared = SharedStack()
        _SHARED_STACKS.append(shared)
        try:
            yield shared
        finally:
            _SHARED_STACKS.remove(shared)
            shared.close()


def local_stack_settings() -> DevStackSettings:
    """The CLI tests' local stack: ephemeral ports, the poller's schedule left to the test."""
    return DevStackSettings(port=0, moto_port=0, signing_secret=LOCAL_SECRET, poller=False)
