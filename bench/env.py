"""The bench's process environment: fake AWS, and Lambda-like settings per scenario."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sume.core.names import Env

REGION = "us-east-1"
ACCOUNT = "123456789012"

# None of the developer's real AWS settings may leak in: the bench must never
# reach AWS, and a stray profile would make it try.
FAKE_AWS: Mapping[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_DEV": "false",
    "POWERTOOLS_LOG_LEVEL": "INFO",
}
UNSET = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")

# Stand-in names for the stubbed runs (no resource is ever reached).
STUB_NAMES: Mapping[str, str] = {
    Env.JOBS_TABLE_NAME: "sume-bench-jobs",
    Env.JOBS_QUEUE_URL: f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/sume-bench-jobs",
    Env.PAYLOADS_BUCKET_NAME: "sume-bench-payloads",
    Env.SIGNING_SECRET_ARN: f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:sume-bench-AbCdEf",
}


LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def forbid_network() -> None:
    """Refuse any connection or name lookup beyond loopback in this process.

    A guard, not a feature: a client that escaped moto or the Stubber would
    otherwise try AWS with fake credentials.
    """
    import socket

    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def _check(host: object) -> None:
        if str(host) not in LOOPBACK:
            raise ConnectionRefusedError(f"the bench stays on loopback; refused {host}")

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _check(address[0])
        real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        _check(host.decode() if isinstance(host, bytes) else host)
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo


def use_fake_aws() -> None:
    """Call before anything creates a boto3 session."""
    for name in UNSET:
        os.environ.pop(name, None)
    os.environ.update(FAKE_AWS)


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set variables for the duration of a scenario, then restore the old ones."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
