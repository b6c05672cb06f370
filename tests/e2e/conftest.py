from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from devstack.settings import DevStackSettings
from devstack.stack import DevStack
from sume.core.names import Env

# Seconds, not minutes: the job whose webhook never arrives is polled after
# one second, a job Sume never finishes is lost after three, and a failed
# message is visible again after one.
E2E_TIMINGS = {
    "POLL_INITIAL_SECONDS": "1",
    "POLL_MAX_INTERVAL_SECONDS": "2",
    "MAX_POLL_AGE_SECONDS": "3",
    "REDELIVER_GRACE_SECONDS": "2",
    "SWEEP_AFTER_SECONDS": "10",
}

E2E_STACK = {
    **E2E_TIMINGS,
    # A job whose work keeps failing gives up after two attempts, a retry delay
    # apart, not MAX_RECEIVES' five (an outage is waited out whole,
    # test_replay_window.py); one retry still succeeds (the scenario's flaky link).
    Env.MAX_ATTEMPTS: "2",
    # The poller's round, every 0.5 s, is one run per shard of the due-work index:
    # 16 runs kept an idle stack half a core busy, and no test here needs more than two.
    Env.DUE_SHARDS: "2",
}


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


@contextmanager
def local_stack() -> Iterator[DevStack]:
    """The local stack on ephemeral loopback ports, as `make run` starts it."""
    before = environment()
    local = DevStack(
        DevStackSettings(
            port=0,
            moto_port=0,
            # A round costs about 0.1 CPU-s through moto's server, waited on or not: every
            # 0.3 s an idle stack burned 0.4 CPU-s a second (the e2e tier 56 -> 47 s of CPU).
            poll_every_seconds=0.5,
            retry_delay_seconds=1,
            lambda_env=E2E_STACK,
        )
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()
    # The handlers read os.environ; the stack must leave it as it found it.
    assert environment() == before


@pytest.fixture(scope="package")
def stack() -> Iterator[DevStack]:
    """The package's local stack, shared by its tests."""
    with local_stack() as local:
        yield local
