"""Test setup shared by every tier: no AWS account, no network beyond loopback."""

from __future__ import annotations

import os

# Set before anything imports boto3 or Powertools. Fake credentials and a
# region, and none of the developer's real AWS settings leak in.
for _var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_var, None)
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_DEV": "false",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    }
)


import logging  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from devstack import moto_atomic, moto_limits  # noqa: E402

# DynamoDB applies each write atomically; moto does not under concurrency.
moto_atomic.install()
# AWS refuses over-size items, events and keys and odd message characters; moto does not.
moto_limits.install()
# moto's server logs every request through werkzeug.
logging.getLogger("werkzeug").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """moto's server on a loopback port, for paths that cross the network."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    yield f"http://127.0.0.1:{port}"
    server.stop()
