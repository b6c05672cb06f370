"""The receiver's health route, which Route 53 asks in a multi-region deployment."""

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import boto3
import pytest

import receiver
from devstack.counting import CallCounter
from sume.core import runtime
from sume.core.names import HEALTH_PATH
from tests.builders import LambdaContext, apigw_event


def ask(method: str = "GET") -> tuple[int, dict[str, str], dict[str, object]]:
    response = receiver.handler(apigw_event(b"", {}, method, HEALTH_PATH), LambdaContext())
    return response["statusCode"], response["headers"], json.loads(response["body"])


def emitted(capsys) -> list[dict[str, object]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]


def test_a_reachable_table_answers_200_with_one_read(aws, capsys):
    with CallCounter().installed() as counter:
        runtime.reset()
        status, headers, body = ask()
    assert (status, body) == (200, {"status": "ok", "region": "us-east-1"})
    assert headers["cache-control"] == "no-store"
    assert counter.calls == ["dynamodb.GetItem"]
    # A healthy answer counts 0 failures: the metric has data while Route 53 asks.
    assert emitted(capsys)[-1]["HealthCheckFailures"] == [0.0]


def test_a_failing_table_answers_503_and_says_nothing_of_why(aws, logs):
    boto3.client("dynamodb").delete_table(TableName=aws.table)
    status, _, body = ask()
    assert (status, body) == (503, {"status": "unavailable"})
    # The operator's log has why; the answer does not.
    (logged,) = logs.lines("ERROR")
    assert logged["message"].startswith("health check failed")
    assert "ResourceNotFoundException" in logged["exception"]


def test_it_needs_no_signing_secret(aws, monkeypatch):
    # A region whose secret is broken still reaches its table: the webhook
    # then answers 500 configuration_error, and its own alarm says so.
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET")
    runtime.reset()
    with CallCounter().installed() as counter:
        runtime.reset()
        assert ask()[0] == 200
    assert not any(call.startswith("secretsmanager.") for call in counter.calls)


def test_only_get(aws):
    status, headers, body = ask("POST")
    assert (status, body) == (405, {"error": "method_not_allowed"})
    assert headers["allow"] == "GET"


@dataclass
class SilentEndpoint:
    """A TCP port that takes connections, counts them, and never answers."""

    url: str
    connections: list[socket.socket] = field(default_factory=list)


@pytest.fixture
def silent_endpoint() -> Iterator[SilentEndpoint]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        endpoint = SilentEndpoint(f"http://127.0.0.1:{listener.getsockname()[1]}")

        def take() -> None:
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    return
                endpoint.connections.append(connection)

        taker = threading.Thread(target=take, daemon=True)
        taker.start()
        yield endpoint
        listener.shutdown(socket.SHUT_RDWR)
        for connection in endpoint.connections:
            connection.close()
    taker.join()


def test_a_table_that_hangs_is_asked_once(monkeypatch, silent_endpoint):
    # Route 53 counts a check failed unless the answer comes within 2 s: one
    # attempt bounded by the probe's timeouts, never a retry on top.
    monkeypatch.setenv("JOBS_TABLE_NAME", "jobs")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", silent_endpoint.url)
    runtime.reset()
    status, _, body = ask()
    runtime.reset()
    assert (status, body) == (503, {"status": "unavailable"})
    assert len(silent_endpoint.connections) == 1


def test_it_reads_only_the_table_and_needs_nothing_else(aws, monkeypatch):
    monkeypatch.delenv("JOBS_QUEUE_URL")
    runtime.reset()
    assert ask()[:1] == (200,)
