"""Archived announcements replayed to one subscriber's rule (EventBridge archive and replay).

The bus's archive keeps every announcement the stack sent (``source`` =
``sume.webhooks``) for its retention. A replay sends the archived events of a time
window to the bus again, ``Destination.FilterArns`` naming the one rule that
should get them: the same ``detail`` (``job_id``, ``sequence``, everything), a new
event ``id`` and a ``replay-name`` field, so a subscriber that dedupes on
(``job_id``, ``sequence``) takes each once and can tell a replayed copy apart.
Nothing is redone: no artifact copied again, no new sequence (that is
``sume-webhooks replay``, the operator's).

EventBridge replays by time, not by content: a replay narrowed to some jobs
(``--job``) covers the minutes around each one's announcement, and the other
announcements of those minutes come along.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from sume.store.job import Job
from sume_cli import USAGE, OpsError
from sume_cli.times import iso

DAY = 86400
# Around a job's latest ending: its announcement is sent right after, or again by
# the sweeper after a crash (minutes later); EventBridge replays in 1-minute steps.
BEFORE_ENDING = 60
AFTER_ENDING = 600
# EventBridge: an event may reach its archive some time after the bus, "we recommend
# delaying replay of archived events by 10 minutes"; a window ending later is said so.
ARCHIVE_DELAY = 600
# How often a running replay is asked for its progress.
POLL_SECONDS = 2.0
FINAL_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED"})
_NAME_UNSAFE = re.compile(r"[^.\-_A-Za-z0-9]")
MAX_REPLAY_NAME = 64


@dataclass(frozen=True)
class Target:
    """Where a replay goes: the bus, the archive it reads, and the one rule."""

    bus: str
    bus_arn: str
    archive: str
    archive_arn: str
    rule: str
    rule_arn: str
    archive_since: int
    """The oldest moment the archive still holds (now - its retention; 0: kept for ever)."""
    retention_days: int


@dataclass(frozen=True)
class Plan:
    target: Target
    windows: tuple[tuple[int, int], ...]
    """Half-open ``[start, end)`` epoch seconds, merged, one replay each."""
    jobs: tuple[dict[str, Any], ...] = ()
    """With ``--job``: each job's id, sequence and the time of its latest ending."""


def recent(chosen: Plan, now: float) -> bool:
    """The window reaches into the last minutes, which may not be archived yet."""
    return chosen.windows[-1][1] > now - ARCHIVE_DELAY


@dataclass
class Outcome:
    replays: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r["state"] == "COMPLETED" for r in self.replays)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def find_target(events: Any, bus: str, archive: str, rule: str, now: float) -> Target:
    """The bus, its archive and ``rule``, or one line saying which is missing."""
    if not archive:
        raise OpsError(
            "this deployment has no archive of its announcements (deployed before it "
            "existed: deploy the stack again)"
        )
    try:
        found = events.describe_archive(ArchiveName=archive)
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            raise OpsError(f"no archive {archive} (deploy the stack again)") from None
        raise
    try:
        described = events.describe_rule(Name=rule, EventBusName=bus)
    except ClientError as exc:
        if _code(exc) != "ResourceNotFoundException":
            raise
        rules = [
            r["Name"]
            for r in events.list_rules(EventBusName=bus).get("Rules", [])
            if not r.get("ManagedBy")
        ]
        raise OpsError(
            f"--rule {rule}: no such rule on the bus {bus} (its rules: "
            f"{', '.join(sorted(rules)) or 'none'})",
            USAGE,
        ) from None
    if described.get("ManagedBy"):
        raise OpsError(f"--rule {rule}: a rule managed by AWS, not a subscriber's", USAGE)
    if described.get("State") != "ENABLED":
        raise OpsError(
            f"--rule {rule} is {str(described.get('State', 'disabled')).lower()}: a replay "
            f"to it would deliver nothing; enable it first "
            f"(aws events enable-rule --name {rule} --event-bus-name {bus})"
        )
    # 0 is EventBridge's "kept for ever".
    retention = int(found.get("RetentionDays") or 0)
    return Target(
        bus=bus,
        bus_arn=str(found["EventSourceArn"]),
        archive=archive,
        archive_arn=str(found["ArchiveArn"]),
        rule=rule,
        rule_arn=str(described["Arn"]),
        archive_since=int(now - retention * DAY) if retention else 0,
        retention_days=retention,
    )


def _epoch(value: Any) -> float:
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)


def plan(
    target: Target,
    since: int,
    until: int,
    jobs: Iterable[Job] = (),
) -> Plan:
    """The replays for ``[since, until)``, or for the minutes of each job's ending in it."""
    if since >= until:
        raise OpsError(f"--since {iso(since)} is not before --until {iso(until)}", USAGE)
    if since < target.archive_since:
        raise OpsError(
            f"--since {iso(since)} is outside the archive {target.archive}'s retention "
            f"({target.retention_days} days: it holds announcements since "
            f"{iso(target.archive_since)})",
            USAGE,
        )
    listed = list(jobs)
    if not listed:
        return Plan(target, ((since, until),))
    spans, chosen = [], []
    for job in listed:
        ended = job.lost_at if job.processed_at is None else job.processed_at
        if ended is None or not since <= ended < until:
            raise OpsError(
                f"--job {job.job_id}: "
                + (
                    "not announced yet (no ending on its item)"
                    if ended is None
                    else f"its latest ending ({iso(ended)}) is outside the window"
                ),
                USAGE,
            )
        spans.append((max(since, ended - BEFORE_ENDING), min(until, ended + AFTER_ENDING)))
        chosen.append({"job_id": job.job_id, "sequence": job.sequence, "ended_at": iso(ended)})
    return Plan(target, tuple(_merged(spans)), tuple(chosen))


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def replay_name(rule: str, now: float, index: int) -> str:
    """Unique per run and window, within EventBridge's 64 characters and alphabet."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    suffix = f"-{stamp}-{index}"
    return _NAME_UNSAFE.sub("-", rule)[: MAX_REPLAY_NAME - len(suffix)] + suffix


def run(
    events: Any,
    chosen: Plan,
    now: float,
    progress: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Start each replay, follow it to its end, and say where it stands meanwhile.

    Interrupted (Ctrl-C), the replay under way is cancelled, so nothing goes on
    replaying behind the operator's back, and the interruption goes on up.
    """
    outcome = Outcome()
    for index, (start, end) in enumerate(chosen.windows, 1):
        name = replay_name(chosen.target.rule, now, index)
        events.start_replay(
            ReplayName=name,
            Description=f"announcements to rule {chosen.target.rule}"[:512],
            EventSourceArn=chosen.target.archive_arn,
            EventStartTime=start,
            EventEndTime=end,
            Destination={"Arn": chosen.target.bus_arn, "FilterArns": [chosen.target.rule_arn]},
        )
        try:
            described = _follow(events, name, start, end, progress, sleep)
        except KeyboardInterrupt:
            events.cancel_replay(ReplayName=name)
            progress(f"replay {name} cancelled")
            raise
        outcome.replays.append(
            {
                "replay_name": name,
                "since": iso(start),
                "until": iso(end),
                "state": described["State"],
                "reason": described.get("StateReason"),
            }
        )
    return outcome


def _follow(
    events: Any,
    name: str,
    start: int,
    end: int,
    progress: Callable[[str], None],
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    while True:
        described: dict[str, Any] = events.describe_replay(ReplayName=name)
        state = str(described["State"])
        last = described.get("EventLastReplayedTime")
        done = 100 if state == "COMPLETED" else 0
        if last is not None and state != "COMPLETED":
            done = max(0, min(99, int(100 * (_epoch(last) - start) / max(1, end - start))))
        progress(f"replay {name}: {state.lower()}, {done}% of its window")
        if state in FINAL_STATES:
            return described
        sleep(POLL_SECONDS)
