"""An origin outage on the local stack, put right by ``sume-webhooks replay --since``.

Sume's artifact links answer 503 for a while: the jobs finished in that time
give up (``too_many_attempts``, last error ``http_503``); the origin comes
back; a dry run names exactly those jobs, and the replay brings each to its
right end, announced once more, while every other job is left as it was.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

import pytest

from devstack.simulator import Sume, SumeJob
from devstack.stack import DevStack
from sume.store.job import State
from sume.store.jobs import JobsTable
from sume_cli.main import main
from sume_cli.times import iso

REASON = "origin outage"
DOWN = 10**6
"""A flaky count no test reaches: the link answers 503 until it is set to 0."""


def finished(table: JobsTable, jobs: Iterable[SumeJob]) -> None:
    """The worker announces before its finish write: wait for the finish too."""
    while any(getattr(table.get(job.job_id), "state", None) == State.PROCESSING for job in jobs):
        time.sleep(0.1)  # pytest's timeout bounds a hang


def unreplayed(table: JobsTable, jobs: Iterable[SumeJob]) -> bool:
    """Each job still the processing error it was, never asked to be replayed."""
    stored = [table.get(job.job_id) for job in jobs]
    return all(
        job is not None and (job.state, job.replays) == (State.PROCESSING_ERROR, None)
        for job in stored
    )


def announced(stack: DevStack, jobs: Iterable[SumeJob], times: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while any(stack.announced()[job.job_id] < times for job in jobs):
        assert time.monotonic() < deadline, "not every job was announced in time"
        time.sleep(0.05)


def cli(stack: DevStack, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    deployment = ["--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix]
    code = main([*deployment, "replay", *argv, "--output", "json"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.out, captured.err
    return code, json.loads(captured.out)


def test_a_window_of_jobs_that_met_an_outage_is_replayed_to_the_right_end_once(
    stack: DevStack, capsys: pytest.CaptureFixture[str]
) -> None:
    since = iso(time.time() - 1)
    assert since is not None
    window = ("--since", since, "--state", "processing_error", "--error-code", "http_503")
    with Sume(stack.url, [stack.signing_secret], spacing_seconds=0.05) as sume:
        outage = [sume.new_job(artifacts=1, flaky=DOWN) for _ in range(3)]
        fine = sume.new_job(artifacts=1)
        failed = sume.new_job(event="job.failed")
        gone = sume.new_job(artifacts=1)
        gone.artifacts.clear()  # its link answers 404: no replay puts that right
        for job in (*outage, fine, failed, gone):
            assert sume.deliver(job).delivered
        others = (fine, failed, gone)
        announced(stack, (*outage, *others), 1)
        table = stack.jobs()
        finished(table, outage)
        for job in outage:
            stored = table.get(job.job_id)
            assert stored is not None and stored.state == State.PROCESSING_ERROR
            assert stored.last_error is not None and stored.last_error["code"] == "http_503"

        # The origin is back.
        for job in outage:
            job.flaky = 0
        code, plan = cli(stack, capsys, *window, "--reason", REASON, "--dry-run")
        assert code == 0
        expected = sorted(job.job_id for job in outage)
        assert sorted(job["job_id"] for job in plan["jobs"]) == expected
        assert {tuple(job["why"]) for job in plan["jobs"]} == {
            ("state=processing_error", "error_code=http_503 (last_error)")
        }
        # The replay's writes are done when it returns, and a replay shows on the item
        # (it becomes owed again) before the worker could announce it.
        assert unreplayed(table, outage), "a dry run replayed"
        assert all(stack.announced()[job.job_id] == 1 for job in outage), "a dry run replayed"

        code, result = cli(stack, capsys, *window, "--reason", REASON, "--rate", "10")
        assert code == 0
        assert sorted(result["replayed"]) == expected
        announced(stack, outage, 2)
        finished(table, outage)
        for job in outage:
            stored = table.get(job.job_id)
            assert stored is not None
            assert (stored.state, stored.outcome, stored.artifact_count) == (
                State.PROCESSED,
                "completed",
                1,
            )
            assert (stored.replays, stored.replay_reason, stored.sequence) == (1, REASON, 2)

        # Run again, as a scheduler would: nothing matches, nothing is replayed.
        code, again = cli(stack, capsys, *window, "--reason", REASON)
        assert (code, again["replayed"], again["refused"]) == (0, [], {})
        # Each still processed by the one replay (a second would count 2, or owe it).
        for job in outage:
            stored = table.get(job.job_id)
            assert stored is not None
            assert (stored.state, stored.replays, stored.sequence) == (State.PROCESSED, 1, 2)
        assert {job.job_id: stack.announced()[job.job_id] for job in outage} == dict.fromkeys(
            expected, 2
        )
        assert all(stack.announced()[job.job_id] == 1 for job in others)
        untouched = table.get(gone.job_id)
        assert untouched is not None and untouched.replays is None
