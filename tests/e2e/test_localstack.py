"""The local stack as an object: what it tells, what it refuses."""

from __future__ import annotations

import socket

import pytest

from devtools.localstack import LocalStack, ensure_free


def test_a_taken_port_is_an_error_not_a_hang() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            ensure_free(taken.getsockname()[1])
    ensure_free(0)


def test_a_second_stack_in_one_process_is_refused(stack: LocalStack) -> None:
    with pytest.raises(RuntimeError, match="already running"):
        LocalStack().start()
    assert stack.url.startswith("http://127.0.0.1:")


def test_the_banner_names_everything_needed_to_look_inside(stack: LocalStack) -> None:
    assert stack.names is not None
    banner = "\n".join(stack.describe())
    for value in (
        stack.url,
        stack.signing_secret,
        stack.endpoint_url,
        stack.names.table,
        stack.names.queue_url,
        stack.names.dlq_url,
        stack.names.artifacts_bucket,
        stack.names.payloads_bucket,
        stack.names.event_bus,
        stack.names.registrations_dlq_url,
        str(stack.names.signing_secret_arn),
        "ALLOW_HTTP_URLS=true ALLOW_PRIVATE_HOSTS=true",
    ):
        assert value in banner
