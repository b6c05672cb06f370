"""The per-job cost's paths on moto: each runs to its ending, and what is priced was counted.

No price or timing is asserted here; those live in ``make bench``.
"""

import time
from collections import Counter
from typing import Any

import pytest

from bench import jobcost, jobpaths
from bench.report import Targets

ENDINGS = {
    "registered, never found: lost": "lost",
}


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
        return jobpaths.measure(shards=2)


def test_every_path_runs_to_its_ending(measured):
    runs, _ = measured
    assert [r.label for r in runs] == list(jobpaths.PATHS)
    for run in runs:
        assert run.ending == ENDINGS.get(run.label, "processed"), run.label


def test_every_job_with_work_reaches_the_worker_through_its_event_source(measured):
    runs, _ = measured
    for run in runs:
        functions = run.requests()
        if run.label.startswith("a duplicate"):
            assert functions == Counter({"receiver": 1})
            continue
        if run.label == "registered, never found: lost":
            # The poller's run that gives it up announces it: nothing queued.
            assert functions["worker"] == 0 and run.calls()["sqs.SendMessage"] == 0
            continue
        assert functions["worker"] == 1, run.label
        assert run.esm_requests.count("sqs.ReceiveMessage") >= 1


def test_a_round_the_job_is_due_in_costs_it_only_its_poll(measured):
    runs, empty = measured
    assert empty.requests()["poller"] >= 2  # the tick and its runs
    # Each shard claimed, queried, counted by the gauge and released.
    calls = empty.calls()
    assert (calls["dynamodb.PutItem"], calls["dynamodb.UpdateItem"]) == (2, 2), calls
    assert calls["dynamodb.Query"] == 4, calls
    found = jobcost.price(
        runs[jobpaths.PATHS.index("registered, found by a status poll (2 artifacts)")]
    )
    assert found.ours.requests == Counter({"worker": 1}), found.ours.requests
    assert found.ours.calls["dynamodb.Query"] == 0, found.ours.calls
    assert found.ours.calls["sqs.SendMessage"] == 1, found.ours.calls


def test_a_webhook_and_a_lost_job_make_no_call_beyond_the_floor_s(measured):
    runs, _ = measured
    for label in ("webhook, 0 artifacts", "webhook, 2 artifacts", "registered, never found: lost"):
        priced = jobcost.price(runs[jobpaths.PATHS.index(label)])
        assert jobcost.beyond(priced) == Counter(), label


def test_the_large_event_is_kept_in_s3_and_read_from_there(measured):
    runs, _ = measured
    large = runs[jobpaths.PATHS.index("large event, 300 KiB (body in S3, 2 artifacts)")]
    calls = large.calls()
    assert calls["s3.PutObject"] == 3 and calls["s3.GetObject"] == 1


def test_the_section_renders_every_path_and_its_target(measured, capsys):
    runs, empty = measured
    targets = Targets([])
    jobcost.render_section(runs, empty, targets)
    out = capsys.readouterr().out
    for label in jobpaths.PATHS:
        assert label in out
    assert [t for t, _, _ in targets.rows] == ["every job path within 1.15x of its floor"]
