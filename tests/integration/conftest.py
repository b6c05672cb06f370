from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from devtools.resources import create_resources, environment
from infra.spec import ResourceNames
from tests.builders import SECRET
from tests.conftest import reset_handler_caches


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[ResourceNames]:
    """In-process moto with the stack's resources and the Lambda environment set."""
    with mock_aws():
        names = create_resources(boto3.session.Session())
        for key, value in environment(names).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", SECRET)
        reset_handler_caches()
        yield names
    reset_handler_caches()
