"""Which deployment a command talks to, and its clients, built on first use.

Nothing is discovered or connected until a command needs it, so ``send-test``
with an explicit URL and secret works without any AWS access at all.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

from infra import spec
from sume.core.errors import ConfigurationError
from sume.core.names import MAX_DUE_SHARDS, Env
from sume.core.runtime import Clock
from sume.core.settings import due_index, due_shards, integer, sweep_after_seconds
from sume.net.policy import HTTPS_ONLY, UrlPolicy
from sume.polling.compose import build_registry
from sume.polling.registry import Registry
from sume.polling.settings import PollerSettings, RegistrySettings
from sume.store.compose import TableRef, build_jobs
from sume.store.jobs import JobsTable
from sume_cli import USAGE, OpsError
from sume_cli.invocation import Invocation
from sume_cli.stackinfo import LOCAL_PREFIX, Stack, discover_local, discover_stage

# An operator waits on these calls; a few retries ride out throttling.
CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 4})

# moto accepts any credentials; an operator pointing at the local stack should
# not need to invent some.
LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
LOCAL_REGION = "us-east-1"
LOCAL_ENDPOINT_HINT = "the moto endpoint `make run` prints (default http://127.0.0.1:5000)"

# The deployed poller is found among the stack's functions by its handler.
POLLER_HANDLER = "poller.handler"


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


def checked_endpoint(url: str) -> str:
    """The endpoint URL, or a one-line error naming the likely mistake."""
    if not re.match(r"^https?://", url, re.IGNORECASE):
        if "://" in url:
            raise OpsError(f"endpoint {url!r}: the scheme must be http or https", USAGE)
        raise OpsError(f"endpoint {url!r} has no scheme: did you mean http://{url}?", USAGE)
    parts = urlsplit(url)
    if not parts.hostname:
        raise OpsError(f"endpoint {url!r} names no host", USAGE)
    if parts.path not in ("", "/"):
        raise OpsError(
            f"endpoint {url!r} has a path, like the webhook URL: the ops CLI wants "
            f"{LOCAL_ENDPOINT_HINT}",
            USAGE,
        )
    return url


def not_an_aws_api(exc: ClientError, endpoint_url: str | None) -> OpsError | None:
    """An answer with no AWS error code: the endpoint is some other HTTP server."""
    error = exc.response.get("Error", {})
    if not str(error.get("Code", "")).isdigit():
        return None
    where = endpoint_url or "AWS_ENDPOINT_URL"
    answered = f"{exc.operation_name} got HTTP {error.get('Code')} {error.get('Message', '')}"
    headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    if "apigw-requestid" in headers:
        return OpsError(
            f"{where} is the webhook endpoint ({answered} from API Gateway), not moto: "
            f"use {LOCAL_ENDPOINT_HINT}, not the webhook port",
            USAGE,
        )
    return OpsError(f"{where} is not an AWS API ({answered}): use {LOCAL_ENDPOINT_HINT}", USAGE)


@dataclass(frozen=True)
class FirstPoll:
    seconds: int
    source: str
    """Where the figure comes from, for people."""
    url_policy: UrlPolicy = HTTPS_ONLY
    """The same poller's status URL policy: a status_url it would refuse is refused."""


def local_first_poll(table: str, env: Mapping[str, str] = os.environ) -> FirstPoll:
    """The local stack's short first-poll delay (``make run`` reads the same variable)."""
    name = Env.POLL_INITIAL_SECONDS
    value = {**spec.LOCAL_URLS, **env, name: env.get(name) or spec.LOCAL_TIMINGS[name]}
    settings = RegistrySettings.from_env(value, table_name=table)
    return FirstPoll(
        settings.poll_initial_seconds,
        f"the local stack's {name}",
        settings.status_urls,
    )


@dataclass(frozen=True)
class SweepAfter:
    """How long after a replay its work is owed to the sweeper, should its send fail."""

    seconds: int
    source: str


def local_sweep_after(env: Mapping[str, str] = os.environ) -> SweepAfter:
    """The local stack's short sweep delay (``make run`` reads the same variable)."""
    name = Env.SWEEP_AFTER_SECONDS
    seconds = sweep_after_seconds({name: env.get(name) or spec.LOCAL_TIMINGS[name]})
    return SweepAfter(seconds, f"the local stack's {name}")


@dataclass(frozen=True)
class DeployedPoller:
    function_name: str
    env: Mapping[str, str]


def deployed_poller(cloudformation: Any, lambda_: Any, stack_name: str) -> DeployedPoller:
    """The environment of the stack's deployed poller.

    Lists the stack's functions and reads the configuration of the one whose
    handler is the poller's, trying those whose logical id says Poller first.
    """
    functions = [
        r
        for page in cloudformation.get_paginator("list_stack_resources").paginate(
            StackName=stack_name
        )
        for r in page["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::Lambda::Function"
    ]
    functions.sort(key=lambda r: "Poller" not in r["LogicalResourceId"])
    for function in functions:
        config = lambda_.get_function_configuration(FunctionName=function["PhysicalResourceId"])
        if config.get("Handler") == POLLER_HANDLER:
            env = (config.get("Environment") or {}).get("Variables") or {}
            return DeployedPoller(config["FunctionName"], env)
    raise OpsError(f"stack {stack_name} has no function with handler {POLLER_HANDLER}")


def deployed_first_poll(poller: DeployedPoller) -> FirstPoll:
    """``POLL_INITIAL_SECONDS`` of the stack's deployed poller (its default when unset)."""
    settings = PollerSettings.from_env(poller.env)
    return FirstPoll(
        settings.policy.initial_seconds,
        f"{Env.POLL_INITIAL_SECONDS} of {poller.function_name}",
        settings.url_policy,
    )


class Ops:
    def __init__(
        self,
        stage: str | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        prefix: str = LOCAL_PREFIX,
        shards: int | None = None,
        profile: str | None = None,
        invocation: Invocation | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.stage = stage
        self.endpoint_url = checked_endpoint(endpoint_url) if endpoint_url else None
        self.region = region
        self.prefix = prefix
        self._shards = shards
        self.profile = profile
        # What "now" is for the commands' windows and records (a test's own in the tests).
        self.clock = clock
        self.invocation = invocation or Invocation()
        """How the operator started the CLI: what each command it prints begins with."""

    def now(self) -> int:
        return int(self.clock())

    def argv(self, *words: str) -> list[str]:
        """A command to print, as argv: ``Invocation.argv`` for this deployment."""
        return self.invocation.argv(*words)

    def line(self, *words: str) -> str:
        """A command to print, as one line to paste."""
        return self.invocation.line(*words)

    @functools.cached_property
    def session(self) -> Any:
        session = new_session(region_name=self.region, profile_name=self.profile)
        if self.endpoint_url:
            credentials = session.get_credentials()
            if session.region_name and credentials is not None:
                return session  # a session costs about 10 ms: no second one to say the same
            kw: dict[str, Any] = {"region_name": session.region_name or LOCAL_REGION}
            if credentials is None:
                kw.update(LOCAL_CREDENTIALS)
            else:
                kw["profile_name"] = self.profile
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
        # A local stack may keep a service elsewhere (its tables on DynamoDB Local:
        # make run DYNAMODB=local), named as botocore names it, AWS_ENDPOINT_URL_<SERVICE>.
        elsewhere = os.environ.get(f"AWS_ENDPOINT_URL_{service.upper()}", "").strip()
        if self.endpoint_url and elsewhere:
            kw["endpoint_url"] = checked_endpoint(elsewhere)
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
    def poller(self) -> DeployedPoller | str:
        """The deployed stage's poller, or why it could not be read."""
        assert self.stage is not None
        try:
            return deployed_poller(
                self.client("cloudformation"), self.client("lambda"), spec.stack_name(self.stage)
            )
        except (ClientError, OpsError) as exc:
            return str(exc.response["Error"].get("Code") if isinstance(exc, ClientError) else exc)

    @functools.cached_property
    def other_regions(self) -> tuple[str, ...] | str:
        """The stage's other region when it runs in two (its poller's ``PEER_REGION``);
        why that could not be read; none for the local stack."""
        if self.endpoint_url:
            return ()
        poller = self.poller
        if not isinstance(poller, DeployedPoller):
            return poller
        peer = poller.env.get(Env.PEER_REGION)
        return (peer,) if peer else ()

    def in_region(self, region: str) -> Ops:
        """The same deployment in ``region`` (a two-region stage's other region)."""
        return Ops(
            self.stage,
            self.endpoint_url,
            region,
            self.prefix,
            self._shards,
            self.profile,
            self.invocation,
            self.clock,
        )

    @functools.cached_property
    def shards(self) -> int:
        """Shards of the due-work index: ``--shards``, else the count the stack runs with.

        Writing a job under another count would put it in a shard no poller reads.
        A stack that does not say (a poller that cannot be read, an older local
        stack) gets ``DUE_SHARDS`` of this environment, else the default.
        """
        if self._shards is not None:
            return self._shards
        if self.endpoint_url:
            said = self.stack.due_shards
        else:
            poller = self.poller
            said = due_shards(poller.env) if isinstance(poller, DeployedPoller) else None
        return said if said is not None else due_shards(os.environ)

    @functools.cached_property
    def read_shards(self) -> int:
        """Shards a reader of the due-work index reads: as the poller, while a lowered
        count drains (``DUE_SHARDS_PREVIOUS``), the old ones too."""
        if self._shards is not None:
            return self._shards
        if self.endpoint_url:
            previous = self.stack.due_shards_previous
        else:
            poller = self.poller
            env = poller.env if isinstance(poller, DeployedPoller) else os.environ
            previous = integer(env, Env.DUE_SHARDS_PREVIOUS, 0, 0, MAX_DUE_SHARDS)
        return max(self.shards, previous or 0)

    def first_poll(self) -> FirstPoll:
        """How long after ``expect`` this deployment's poller first asks ``status_url``."""
        table = self.stack.names.table
        if self.endpoint_url:
            return local_first_poll(table)
        poller = self.poller
        reason: object = poller
        if isinstance(poller, DeployedPoller):
            try:
                return deployed_first_poll(poller)
            except ConfigurationError as exc:
                reason = exc
        assumed = RegistrySettings.from_env(table_name=table)
        return FirstPoll(
            assumed.poll_initial_seconds,
            f"assumed: the deployed poller's configuration could not be read ({reason})",
            assumed.status_urls,
        )

    def sweep_after(self) -> SweepAfter:
        """This deployment's ``SWEEP_AFTER_SECONDS``: its poller's (which sweeps), or the
        local stack's; the default when the poller cannot be read."""
        if self.endpoint_url:
            return local_sweep_after()
        poller = self.poller
        reason: object = poller
        if isinstance(poller, DeployedPoller):
            try:
                seconds = sweep_after_seconds(poller.env)
            except ConfigurationError as exc:
                reason = exc
            else:
                return SweepAfter(seconds, f"{Env.SWEEP_AFTER_SECONDS} of {poller.function_name}")
        return SweepAfter(
            sweep_after_seconds({}),
            f"assumed: the deployed poller's configuration could not be read ({reason})",
        )

    @functools.cached_property
    def jobs(self) -> JobsTable:
        table = TableRef(self.stack.names.table, self.shards, self.due_index)
        return build_jobs(table, self.client("dynamodb"))

    @functools.cached_property
    def due_index(self) -> str:
        """The due-work index the stack's poller reads (the one before, while it migrates)."""
        poller = None if self.endpoint_url else self.poller
        return due_index(poller.env if isinstance(poller, DeployedPoller) else os.environ)

    def clients(self, service: str, patient: bool = False) -> Any:
        """The CLI's clients as the domain's builders ask for them."""
        return self.client(service)

    def registry(self, first: FirstPoll) -> Registry:
        """Registering jobs as this deployment's poller has them: its first poll, its hosts."""
        settings = RegistrySettings(
            self.stack.names.table, self.shards, first.seconds, first.url_policy
        )
        return build_registry(settings, self.clients)
