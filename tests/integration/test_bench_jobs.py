"""The job paths on moto (sections 8 and 9): each runs to its ending, and what is priced
and what the indexes are charged was counted.

No price or timing is asserted here; those live in ``make bench``.
"""

import time
from collections import Counter
from typing import Any

import pytest

from bench import indexes, jobs, stack
from bench.harness import Context
from bench.stack import PATHS
from sume.core.names import DUE_INDEX, DUE_INDEX_BEFORE


@pytest.fixture(scope="module")
def measured():
    import poller

    handler = poller.handler
    ticks: list[float] = []

    def slow_first_tick(event: dict[str, Any], context: Any) -> Any:
        # The warm-up tick starts in the next second, as a slow cold start
        # does: its round is then a second later than when it was called, and
        # an empty round ticked in that second would have had every claim
        # refused and been priced as no round at all (CI, 2026-12-02).
        if "Records" not in event and not ticks:
            ticks.append(time.time())
            time.sleep(1.01 - time.time() % 1)
        return handler(event, context)

    # Every round claims and releases each due shard: two shards make a round of
    # two runs, as sixteen make one of sixteen, at an eighth of the lease calls.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(poller, "handler", slow_first_tick)
        return stack.paths.__wrapped__(shards=2)


def test_every_path_runs_to_its_ending(measured):
    runs, _ = measured
    assert [r.label for r in runs] == list(PATHS)
    assert [r.label for r in runs if not r.ended] == []
    for run in runs:
        state = "lost" if run.label == "registered, never found: lost" else "processed"
        assert run.ending.startswith(f"{state}"), run.label
        assert "out of due-work" in run.ending, run.label


def test_a_path_that_stops_before_its_end_is_said_so(measured):
    # A job still owed work (received, due) has not ended: section 8's target misses.
    with stack.account(shards=2) as s:
        s.deliver(b'{"event":"job.completed","job_id":"job_stuck","status":"OK"}')
        s.end("job_stuck")
    assert not s.run.ended and s.run.ending.startswith("received")


def test_a_completed_job_costs_the_due_index_3_units_and_as_it_was_more(measured):
    runs, _ = measured
    completed = next(r for r in runs if r.label == stack.COMPLETED).usage
    # The record puts the entry, the claim changes its state and lease (not its key),
    # the two progress writes change nothing it holds, the finish removes it.
    assert completed.index(DUE_INDEX)[1] == 3
    assert completed.index_writes[("worker", DUE_INDEX)] == 2
    # The same writes, priced on the index as it was (ALL): the progress writes count.
    assert completed.index(DUE_INDEX_BEFORE)[0] > completed.index(DUE_INDEX)[0]


def test_every_job_with_work_reaches_the_worker_through_its_event_source(measured):
    runs, _ = measured
    for run in runs:
        functions, calls = run.usage.requests, run.usage.calls
        if run.label.startswith("a duplicate"):
            assert functions == Counter({"receiver": 1})
            continue
        if run.label == "registered, never found: lost":
            # The poller's run that gives it up announces it: nothing queued.
            assert functions["worker"] == 0 and calls["sqs.SendMessage"] == 0
            continue
        assert functions["worker"] == 1, run.label
        # No function receives from a queue itself: these are the event source's.
        assert calls["sqs.ReceiveMessage"] >= 1 and calls["sqs.DeleteMessageBatch"] >= 1


def test_a_round_the_job_is_due_in_costs_it_only_its_poll(measured):
    runs, empty = measured
    assert empty.usage.requests["poller"] >= 2  # the tick and its runs
    # Each shard claimed, queried, counted by the gauge and released.
    calls = empty.usage.calls
    assert (calls["dynamodb.PutItem"], calls["dynamodb.UpdateItem"]) == (2, 2), calls
    assert calls["dynamodb.Query"] == 4, calls
    found = runs[PATHS.index("registered, found by a status poll (2 artifacts)")].usage
    assert found.requests == Counter({"worker": 1}), found.requests
    assert found.calls["dynamodb.Query"] == 0, found.calls
    assert found.calls["sqs.SendMessage"] == 1, found.calls


def test_a_webhook_and_a_lost_job_make_no_call_beyond_the_floor_s(measured):
    runs, _ = measured
    for label in ("webhook, 0 artifacts", "webhook, 2 artifacts", "registered, never found: lost"):
        assert jobs.beyond(runs[PATHS.index(label)]) == Counter(), label


def test_the_large_event_is_kept_in_s3_and_read_from_there(measured):
    runs, _ = measured
    large = runs[PATHS.index("large event, 300 KiB (body in S3, 2 artifacts)")]
    calls = large.usage.calls
    assert calls["s3.PutObject"] == 3 and calls["s3.GetObject"] == 1


def test_the_sections_judge_every_path_but_the_withdrawn_duplicate(measured, monkeypatch, capsys):
    monkeypatch.setattr(stack, "paths", lambda: measured)
    monkeypatch.setattr(indexes, "paths", lambda: measured)
    ctx = Context()
    jobs.section(ctx)
    indexes.section(ctx)
    out = capsys.readouterr().out
    for label in PATHS:
        assert label in out
    (jobs_target, measured_text, met) = ctx.targets.rows[0]
    assert "the duplicate's withdrawn" in jobs_target
    assert (
        "a duplicate delivery (after processed)" in measured_text and "not judged" in measured_text
    )
    assert met is True
    assert (
        "every job path runs to its ending (finished, or lost and announced; nothing due)",
        f"{len(PATHS)} of {len(PATHS)}",
        True,
    ) in ctx.targets.rows


def test_the_meter_s_own_reads_are_not_billed_as_the_handler_s_cpu(monkeypatch):
    # One clock for both CPU timers, moved only by the meter's reads of an item before
    # and after each write: a handler's CPU is its own, not the bench's bookkeeping.
    clock = [0.0]
    monkeypatch.setattr(stack.time, "process_time", lambda: clock[0])
    monkeypatch.setattr(stack.time, "thread_time", lambda: clock[0])
    read = stack.Stack._image

    def slow_read(self: stack.Stack, table: str, params: dict[str, Any]) -> Any:
        clock[0] += 1.0
        return read(self, table, params)

    monkeypatch.setattr(stack.Stack, "_image", slow_read)
    with stack.account(shards=2) as s:
        s.deliver(b'{"event":"job.completed","job_id":"job_cpu","status":"OK"}')
    assert clock[0] >= 2  # the receiver's write, read before and after
    assert s.run.usage.cpu_us["receiver"] == 0
