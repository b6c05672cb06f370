"""boto3 clients, created once per container on first use, never at import."""

from __future__ import annotations

import threading
from typing import Any, Protocol

import boto3
from botocore.config import Config

from sume.core.runtime import per_container

# Threads share a client (the poller's polls, the worker's part uploads): a
# pool smaller than them would open, and discard with a warning, a connection
# per call over its size.
MAX_POOL_CONNECTIONS = 50

# Short timeouts and few retries: the receiver must answer well inside
# Sume's 10 s, and a 5xx is cheaper than a timeout (Sume retries either way).
FAST = Config(
    connect_timeout=2,
    read_timeout=3,
    retries={"max_attempts": 3, "mode": "standard"},
    # The hot path builds its requests from constants and verified input, and
    # DynamoDB validates them anyway; botocore's client-side pass over every
    # parameter was the largest CPU cost of a delivery after the HMAC (bench).
    parameter_validation=False,
    max_pool_connections=MAX_POOL_CONNECTIONS,
)
PATIENT = Config(
    connect_timeout=5,
    read_timeout=30,
    retries={"max_attempts": 5, "mode": "standard"},
    max_pool_connections=MAX_POOL_CONNECTIONS,
)
# The health route's: Route 53 counts a check failed unless the answer comes
# within 2 s of connecting, so one attempt, bounded well inside that. (botocore's
# ``max_attempts`` counts retries, so 1 there is two calls; ``total_max_attempts``
# counts the call itself.)
PROBE = Config(
    connect_timeout=0.5,
    read_timeout=0.5,
    retries={"total_max_attempts": 1, "mode": "standard"},
)


_lock = threading.Lock()


@per_container
def _session() -> boto3.session.Session:
    # One session per container: its second client reuses the endpoint and
    # model data the first one loaded, which a fresh session would load again.
    return boto3.session.Session()


@per_container
def client(service: str, patient: bool = False) -> Any:
    """One client per service per container; honours AWS_ENDPOINT_URL (moto, local)."""
    # A botocore session is not safe for concurrent client creation (the
    # poller and the local stack use threads); clients themselves are.
    with _lock:
        return _session().client(service, config=PATIENT if patient else FAST)


@per_container
def probe_client(service: str) -> Any:
    """A client that answers quickly or fails: for the health route only."""
    with _lock:
        return _session().client(service, config=PROBE)


@per_container
def regional_client(service: str, region: str) -> Any:
    """A client of another region (the receiver's copy of a large event, two regions)."""
    with _lock:
        return _session().client(service, region_name=region, config=FAST)


class Clients(Protocol):
    """A boto3 client per service; ``patient`` ones wait and retry longer."""

    def __call__(self, service: str, patient: bool = False) -> Any: ...
