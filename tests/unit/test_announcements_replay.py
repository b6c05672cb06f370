"""``announcements replay``'s plan and its following of a replay, without AWS."""

from __future__ import annotations

from typing import Any

import pytest

from sume.store.job import Job
from sume_cli import OpsError
from sume_cli.announcements import (
    AFTER_ENDING,
    BEFORE_ENDING,
    MAX_REPLAY_NAME,
    Plan,
    Target,
    plan,
    replay_name,
    run,
)

NOW = 1_800_000_000
DAY = 86400
TARGET = Target(
    bus="bus",
    bus_arn="arn:aws:events:us-east-1:123456789012:event-bus/bus",
    archive="archive",
    archive_arn="arn:aws:events:us-east-1:123456789012:archive/archive",
    rule="down",
    rule_arn="arn:aws:events:us-east-1:123456789012:rule/bus/down",
    archive_since=NOW - 35 * DAY,
    retention_days=35,
)


def test_a_window_is_one_replay_half_open() -> None:
    assert plan(TARGET, NOW - 3600, NOW).windows == ((NOW - 3600, NOW),)


def test_a_window_older_than_the_retention_is_refused_with_what_the_archive_holds() -> None:
    with pytest.raises(OpsError, match="outside the archive archive's retention") as caught:
        plan(TARGET, NOW - 36 * DAY, NOW)
    assert "35 days" in str(caught.value)
    assert caught.value.exit_code == 2


def test_an_empty_window_is_refused() -> None:
    with pytest.raises(OpsError, match="is not before --until"):
        plan(TARGET, NOW, NOW)


def ended(job_id: str, at: int, lost: bool = False) -> Job:
    if lost:
        return Job(job_id=job_id, sequence=1, lost_at=at)
    return Job(job_id=job_id, sequence=2, processed_at=at)


def test_jobs_narrow_the_replay_to_the_minutes_around_each_ending_merged() -> None:
    since, until = NOW - 7200, NOW
    chosen = plan(
        TARGET,
        since,
        until,
        [ended("job_a", NOW - 5000), ended("job_b", NOW - 4990), ended("job_c", NOW - 60, True)],
    )
    assert chosen.windows == (
        (NOW - 5000 - BEFORE_ENDING, NOW - 4990 + AFTER_ENDING),
        (NOW - 60 - BEFORE_ENDING, until),
    )
    assert [j["job_id"] for j in chosen.jobs] == ["job_a", "job_b", "job_c"]
    assert chosen.jobs[0]["sequence"] == 2


@pytest.mark.parametrize(
    ("job", "why"),
    [
        (Job(job_id="job_x", sequence=1), "not announced yet"),
        (ended("job_y", NOW - 9000), "outside the window"),
    ],
)
def test_a_job_without_an_ending_in_the_window_is_refused(job: Job, why: str) -> None:
    with pytest.raises(OpsError, match=why):
        plan(TARGET, NOW - 3600, NOW, [job])


def test_replay_names_fit_eventbridge() -> None:
    name = replay_name("r" * 80 + "/odd rule", NOW, 3)
    assert len(name) <= MAX_REPLAY_NAME
    assert name.endswith("-3")
    assert set(name) <= set("-._0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class Replays:
    """EventBridge's replay calls, answering the states given, in turn."""

    def __init__(self, states: list[str], interrupt_at: int | None = None) -> None:
        self.states = states
        self.interrupt_at = interrupt_at
        self.started: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.asked = 0

    def start_replay(self, **kw: Any) -> dict[str, Any]:
        self.started.append(kw)
        return {"State": "STARTING"}

    def describe_replay(self, ReplayName: str) -> dict[str, Any]:
        self.asked += 1
        if self.interrupt_at == self.asked:
            raise KeyboardInterrupt
        state = self.states.pop(0)
        answer: dict[str, Any] = {"State": state, "EventLastReplayedTime": NOW - 1800}
        if state == "FAILED":
            answer["StateReason"] = "the rule's target refused"
        return answer

    def cancel_replay(self, ReplayName: str) -> None:
        self.cancelled.append(ReplayName)


def test_a_replay_is_followed_to_its_end_with_progress_and_only_its_rule() -> None:
    events = Replays(["STARTING", "RUNNING", "COMPLETED"])
    lines: list[str] = []
    sleeps: list[float] = []
    outcome = run(events, Plan(TARGET, ((NOW - 3600, NOW),)), NOW, lines.append, sleeps.append)
    (started,) = events.started
    assert started["Destination"] == {"Arn": TARGET.bus_arn, "FilterArns": [TARGET.rule_arn]}
    assert (started["EventStartTime"], started["EventEndTime"]) == (NOW - 3600, NOW)
    assert started["EventSourceArn"] == TARGET.archive_arn
    assert outcome.ok
    assert [r["state"] for r in outcome.replays] == ["COMPLETED"]
    assert lines[1].endswith("running, 50% of its window")
    assert lines[-1].endswith("completed, 100% of its window")
    assert len(sleeps) == 2


def test_a_failed_replay_is_not_ok_and_says_why() -> None:
    outcome = run(Replays(["FAILED"]), Plan(TARGET, ((NOW - 60, NOW),)), NOW, print, print)
    assert not outcome.ok
    assert outcome.replays[0]["reason"] == "the rule's target refused"


def test_an_interrupted_replay_is_cancelled() -> None:
    events = Replays(["RUNNING"] * 3, interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        run(events, Plan(TARGET, ((NOW - 60, NOW),)), NOW, print, lambda _: None)
    assert events.cancelled == [events.started[0]["ReplayName"]]


def test_a_window_reaching_into_the_archives_delay_is_said_so() -> None:
    from sume_cli.announcements import ARCHIVE_DELAY, recent

    assert recent(plan(TARGET, NOW - 3600, NOW), NOW)
    assert not recent(plan(TARGET, NOW - 3600, NOW - ARCHIVE_DELAY), NOW)
