"""Which deployment a command talks to, and its clients, built on first use.

Nothing is discovered or connected until a command needs it, so ``send-test``
with an explicit URL and secret works without any AWS access at all.
"""

from __future__ import annotations

import functools
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config

from devtools.ops import USAGE, OpsError
from devtools.stackinfo import LOCAL_PREFIX, Stack, discover_local, discover_stage
from sume.jobs import JobsTable
from sume.schema import DUE_SHARDS

# An operator waits on these calls; a few retries ride out throttling.
CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 4})

# moto accepts any credentials; an operator pointing at the local stack should
# not need to invent some.
LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
LOCAL_REGION = "us-east-1"


@functools.cache
def _model_loader() -> Any:
    return botocore.loaders.create_loader()


def new_session(**kw: Any) -> boto3.session.Session:
    """A fresh session that shares parsed service models with every other one.

    Parsing a service's JSON model costs more than its API call; the demo and
    the tests run many commands in one process, each with its own session.
    """
    core = botocore.session.get_session()
    core.register_component("data_loader", _model_loader())
    return boto3.session.Session(botocore_session=core, **kw)


class Ops:
    def __init__(
        self,
        stage: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        prefix: str = LOCAL_PREFIX,
        shards: int = DUE_SHARDS,
    ) -> None:
        self.stage = stage
        self.endpoint_url = endpoint_url
        self.region = region
        self.prefix = prefix
        self.shards = shards

    @functools.cached_property
    def session(self) -> Any:
        session = new_session(region_name=self.region)
        if self.endpoint_url:
            kw: dict[str, Any] = {"region_name": session.region_name or LOCAL_REGION}
            if session.get_credentials() is None:
                kw.update(LOCAL_CREDENTIALS)
            return new_session(**kw)
        if not session.region_name:
            raise OpsError("no AWS region: pass --region or set AWS_REGION")
        return session

    def require_deployment(self) -> None:
        if not (self.stage or self.endpoint_url):
            raise OpsError(
                "which deployment? pass --stage STAGE (deployed) "
                "or --endpoint-url URL (local stack)",
                USAGE,
            )

    @functools.cache  # noqa: B019 - one Ops per CLI run; the cache dies with it
    def client(self, service: str) -> Any:
        self.require_deployment()
        kw = {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}
        return self.session.client(service, config=CLIENT_CONFIG, **kw)

    @functools.cached_property
    def stack(self) -> Stack:
        if self.endpoint_url:
            clients = {s: self.client(s) for s in ("dynamodb", "sqs", "secretsmanager")}
            return discover_local(clients, self.endpoint_url, self.prefix)
        self.require_deployment()
        assert self.stage is not None
        return discover_stage(self.client("cloudformation"), self.stage)

    @functools.cached_property
    def jobs(self) -> JobsTable:
        table = self.stack.names.table
        return JobsTable(self.client("dynamodb"), table, self.shards)
