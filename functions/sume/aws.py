"""boto3 clients, created once per container on first use, never at import."""

from __future__ import annotations

import functools
from typing import Any

import boto3
from botocore.config import Config

# Short timeouts and few retries: the receiver must answer well inside
# Sume's 10 s, and a 5xx is cheaper than a timeout (Sume retries either way).
FAST = Config(
    connect_timeout=2,
    read_timeout=3,
    retries={"max_attempts": 3, "mode": "standard"},
)
PATIENT = Config(
    connect_timeout=5,
    read_timeout=30,
    retries={"max_attempts": 5, "mode": "standard"},
)


@functools.cache
def client(service: str, patient: bool = False) -> Any:
    """One client per service per container; honours AWS_ENDPOINT_URL (moto, local)."""
    return boto3.session.Session().client(service, config=PATIENT if patient else FAST)
