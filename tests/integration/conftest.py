from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devstack.resources import create_resources, environment
from infra.spec import ResourceNames
from sume.core import runtime
from tests.builders import SECRET
from tests.httpserver import LoopbackServer


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[ResourceNames]:
    """In-process moto with the stack's resources and the Lambda environment set."""
    with mock_aws():
        names = create_resources(boto3.session.Session())
        for key, value in environment(names).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", SECRET)
        runtime.reset()
        yield names
    runtime.reset()


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
