"""Clients shared by many threads (the poller's polls, the worker's part uploads) keep a
connection per thread instead of opening and discarding them with a warning."""

import logging
import threading

import pytest

from sume import aws


@pytest.mark.parametrize("patient", [False, True])
def test_a_client_serves_the_poller_s_threads_from_its_pool(
    moto_server, monkeypatch, caplog, patient
):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    aws.reset()
    client = aws.client("dynamodb", patient)
    threads = 32
    start = threading.Barrier(threads)

    def call() -> None:
        start.wait()
        for _ in range(3):
            client.list_tables()

    workers = [threading.Thread(target=call) for _ in range(threads)]
    with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
    aws.reset()
    assert [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()] == []
