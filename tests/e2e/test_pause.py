"""The incident playbook's pause on the local stack, over HTTP: a burst of Sume's
deliveries while the worker is paused is all answered and stored, nothing is worked
until ``resume``, then each job is worked once."""

from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from devstack.stack import DevStack
from sume.store.job import State
from sume_cli.main import main
from tests.builders import job_body, raw_of, signed_headers
from tests.httpserver import LoopbackServer

# More than one batch of the worker's (10): after resume it takes the burst in turns.
BURST = 12
# Seconds the paused stack is watched for work it must not do. A worker that
# ignored its switch would take the burst at its next step (a disabled one waits a
# second between looks) and claim at once; a poller that ignored its rule would poll
# the job at the first tick (every 0.5 s) after it is due, a second after it was
# registered. Two seconds see two of the worker's looks and two such ticks.
WATCH_SECONDS = 2


def ops(stack: DevStack, *argv: str) -> int:
    return main(["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix, *argv])


def ops_report(stack: DevStack, *argv: str) -> int:
    # These jobs are minutes old at most: a window of the last day reads the report
    # index of yesterday too.
    return ops(stack, "report", "--since", "30m", *argv)


def deliver(stack: DevStack, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    raw = raw_of(body)
    request = urllib.request.Request(
        stack.url, data=raw, headers=signed_headers(raw, [stack.signing_secret]), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read())


@pytest.fixture
def resume_worker(stack: DevStack) -> Iterator[Callable[[], int]]:
    """The worker paused; the test resumes it with the function this yields."""
    assert ops(stack, "pause", "worker", "--reason", "artifact origin down") == 0
    resumed: list[int] = []

    def resume() -> int:
        resumed.append(ops(stack, "resume", "worker"))
        return resumed[-1]

    try:
        yield resume
    finally:
        # Whatever the test did, the package's other tests need their worker.
        if resumed != [0]:
            assert resume() == 0


def states(stack: DevStack, job_ids: list[str]) -> dict[str, str | None]:
    jobs = stack.jobs()
    return {job_id: getattr(jobs.get(job_id), "state", None) for job_id in job_ids}


def settled_waiting(stack: DevStack) -> int:
    """The jobs queue's waiting messages once none is in flight or delayed: with the
    worker and the poller paused, nothing else takes from it or adds to it."""
    sqs = stack.client("sqs")
    names = stack.names
    assert names is not None
    while True:
        attributes = sqs.get_queue_attributes(
            QueueUrl=names.queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        if (
            attributes["ApproximateNumberOfMessagesNotVisible"]
            == "0"
            == attributes["ApproximateNumberOfMessagesDelayed"]
        ):
            return int(attributes["ApproximateNumberOfMessages"])
        time.sleep(0.2)  # a batch in flight at the pause ends first; pytest's timeout bounds it


@pytest.fixture
def resume_poller(stack: DevStack) -> Iterator[Callable[[], int]]:
    """The poller paused too, resumed by the test: its sweep would queue the paused jobs
    again once they are SWEEP_AFTER_SECONDS old, as often as a slow machine makes the
    burst outlast that."""
    assert ops(stack, "pause", "poller", "--reason", "the burst is counted") == 0
    resumed: list[int] = []

    def resume() -> int:
        resumed.append(ops(stack, "resume", "poller"))
        return resumed[-1]

    try:
        yield resume
    finally:
        if resumed != [0]:
            assert resume() == 0


def test_a_burst_while_the_worker_is_paused_is_stored_and_worked_once_after_resume(
    stack: DevStack,
    resume_worker: Callable[[], int],
    resume_poller: Callable[[], int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What the package's earlier tests left waiting counts too.
    before = settled_waiting(stack)
    job_ids = [f"job_pause_{uuid.uuid4().hex[:8]}_{n:02d}" for n in range(BURST)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda job_id: deliver(stack, job_body(job_id)), job_ids))
    # Nothing Sume sends is refused or lost while paused.
    assert answers == [(200, {"result": "new", "job_id": job_id}) for job_id in job_ids]
    assert set(states(stack, job_ids).values()) == {State.RECEIVED}

    time.sleep(WATCH_SECONDS)
    assert set(states(stack, job_ids).values()) == {State.RECEIVED}
    assert not any(stack.announced()[job_id] for job_id in job_ids)
    capsys.readouterr()
    assert ops_report(stack) == 0
    assert "paused: worker paused since " in capsys.readouterr().err

    waiting = settled_waiting(stack)
    assert waiting == before + BURST
    capsys.readouterr()
    assert resume_worker() == 0
    said = capsys.readouterr().out
    # Jobs, not messages (a job resent or swept has several); the queue's own count
    # beside it when the two differ.
    counted = re.search(r"; (\d+) job\(s\) waiting", said)
    assert counted is not None, said
    assert int(counted.group(1)) >= BURST
    if int(counted.group(1)) != waiting:
        assert f"({waiting} message(s) in {stack.prefix}-jobs)" in said
    assert resume_poller() == 0
    while set(states(stack, job_ids).values()) != {State.PROCESSED}:
        time.sleep(0.2)  # pytest's timeout bounds a hang
    while sum(stack.announced()[job_id] for job_id in job_ids) < BURST:
        time.sleep(0.2)
    jobs = stack.jobs()
    assert all(getattr(jobs.get(job_id), "attempts", None) == 1 for job_id in job_ids)
    assert {stack.announced()[job_id] for job_id in job_ids} == {1}
    # The check names no pause and none of these jobs (the package's other tests
    # leave problems of their own in the same stack's window).
    capsys.readouterr()
    ops_report(stack, "--check", "--output", "json")
    report = json.loads(capsys.readouterr().out)
    assert report["paused"] == []
    assert not any(problem.startswith("paused") for problem in report["problems"])
    problems = ("processing_error", "lost", "parked", "overdue")
    assert not set(job_ids) & {job for key in problems for job in report[key]["job_ids"]}


def test_a_paused_poller_polls_no_status_url_until_resumed(stack: DevStack) -> None:
    with LoopbackServer() as sume_api:
        sume_api.route("/status", status=503)  # any answer: only the asking counts
        assert ops(stack, "pause", "poller", "--reason", "Sume API down") == 0
        try:
            stack.expect(f"job_held_{uuid.uuid4().hex[:8]}", sume_api.url("/status"))
            # Due after a second (E2E_TIMINGS), watched for two.
            time.sleep(WATCH_SECONDS)
            assert sume_api.hits["/status"] == 0, stack.journal.entries()[-5:]
        finally:
            assert ops(stack, "resume", "poller") == 0
        while sume_api.hits["/status"] == 0:
            time.sleep(0.1)
