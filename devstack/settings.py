"""The local stack's settings, its loopback addresses, and the check that each
handler can read the environment the stack gives it, before anything starts."""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from infra import spec
from sume.core.errors import ConfigurationError
from sume.polling.settings import FanOutSettings, PollerSettings
from sume.receiving.settings import ReceiverSettings
from sume.working.settings import WorkerSettings

HOST = spec.LOCAL_HOST
REGION = "us-east-1"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}

# Only here may artifact and status URLs be plain http on loopback; the
# deployed stack refuses both. The simulator's status server is this stack's
# Sume API, the one host the API token is sent to.
LOCAL_ONLY = spec.LOCAL_URLS

# How each handler reads its settings (and fails on a bad one).
HANDLER_SETTINGS: dict[str, Callable[[Mapping[str, str]], object]] = {
    "receiver": ReceiverSettings.from_env,
    "worker": WorkerSettings.from_env,
    "poller": lambda env: (PollerSettings.from_env(env), FanOutSettings.from_env(env)),
}


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
    ship_logs: bool = True
    """The functions' job events, warnings and errors go to moto's CloudWatch Logs, as
    Lambda ships them (``devstack.logs``). False: the console only (the bench's bursts, where
    the shipping would compete with what is measured)."""
    lambda_env: dict[str, str] = field(default_factory=dict)
    """Extra or overriding Lambda environment (e.g. shorter timings for tests)."""
    region: str = REGION
    """The region the stack's clients and functions sign for (moto keeps regions apart)."""
    dynamodb: str = "moto"
    """Where the tables live: ``moto`` (embedded with the rest), or ``dynamodb-local``,
    Amazon's DynamoDB Local started beside it (``make run DYNAMODB=local``)."""
    moto_endpoint: str | None = None
    """A moto server already running (another process's): the stack creates its
    resources there and starts none; ``moto_port`` is then unused."""
    jobs_table: str | None = None
    """The jobs table exists already, as a global table's replica does: it is used, not
    created. None: the stack creates its own."""
    leases_table: str | None = None
    """The shard leases table exists already (two regions share one), as ``jobs_table``."""


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
