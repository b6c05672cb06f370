"""The poller's ``Serving`` gauge (sume/polling/serving.py): each tick asks the failover
domain's ``GET /health`` which region answers, and the silence alarms page only where
Sume's deliveries go."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import receiver
from devstack.apigw import HttpApiServer
from sume.core import runtime
from sume.core.names import HEALTH_PATH, Env
from tests.httpserver import LoopbackServer
from tests.rounds import poller_round

HERE, OTHER = "us-east-1", "us-east-2"


def served(capsys: pytest.CaptureFixture[str]) -> list[float]:
    """The Serving gauge of the round just run (the tick's)."""
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    return [value for metrics in emitted if "Serving" in metrics for value in metrics["Serving"]]


@pytest.fixture(autouse=True)
def one_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gauge is the tick's own: one shard, so a round is one run, not 16 that
    poll nothing."""
    monkeypatch.setenv(Env.DUE_SHARDS, "1")


@pytest.fixture
def domain() -> Iterator[LoopbackServer]:
    """The failover domain, played by whichever region's API it resolves to."""
    with LoopbackServer() as server:
        yield server


def behind(monkeypatch: pytest.MonkeyPatch, url: str, primary: str) -> None:
    monkeypatch.setenv(Env.FAILOVER_HEALTH_URL, url)
    monkeypatch.setenv(Env.FAILOVER_PRIMARY_REGION, primary)
    runtime.reset()


def health(region: str) -> bytes:
    return json.dumps({"status": "ok", "region": region}).encode()


def test_the_region_whose_receiver_answers_the_domain_serves(aws, monkeypatch, capsys) -> None:
    # This region's own receiver behind the domain, as after a failover to it.
    with HttpApiServer(("127.0.0.1", 0), receiver.handler, "receiver", 10) as api:
        behind(monkeypatch, f"http://127.0.0.1:{api.port}{HEALTH_PATH}", primary=OTHER)
        poller_round()
    assert served(capsys) == [1.0]


@pytest.mark.parametrize(("answered_by", "serving"), [(HERE, 1.0), (OTHER, 0.0)])
def test_the_answer_says_which_region_serves(
    aws, domain, monkeypatch, capsys, answered_by: str, serving: float
) -> None:
    behind(monkeypatch, domain.route(HEALTH_PATH, body=health(answered_by)), primary=HERE)
    poller_round()
    assert served(capsys) == [serving]


@pytest.mark.parametrize(
    "answer",
    [
        {"status": 503, "body": b'{"status":"unavailable"}'},
        {"status": 200, "body": b"not json"},
        {"status": 200, "body": b'{"status":"ok"}'},
        {"status": 200, "body": health(OTHER) + b" " * 2048},
    ],
)
@pytest.mark.parametrize(("primary", "serving"), [(HERE, 1.0), (OTHER, 0.0)])
def test_without_a_usable_answer_the_primary_serves_as_route53_answers_with_it(
    aws, domain, monkeypatch, capsys, answer: dict[str, Any], primary: str, serving: float
) -> None:
    behind(monkeypatch, domain.route(HEALTH_PATH, **answer), primary=primary)
    poller_round()
    assert served(capsys) == [serving]


def test_an_unreachable_domain_is_no_answer(aws, monkeypatch, capsys) -> None:
    with LoopbackServer() as gone:
        url = gone.url(HEALTH_PATH)
    behind(monkeypatch, url, primary=OTHER)
    poller_round()
    assert served(capsys) == [0.0]


def test_a_single_region_stage_has_no_gauge(aws, capsys) -> None:
    poller_round()
    assert served(capsys) == []
