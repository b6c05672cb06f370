"""One job's item as every reader gets it: ``Job``, its states and sources, and
``JobAttr``, the attribute names every expression spells.

``Job``'s fields are the one list of the item's attributes, which ``JobAttr``
names for expressions; ``sume.store.codec`` reads a stored item into one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any

from sume.contract.envelope import JobEvent
from sume.core.names import (
    DUE_AT,
    DUE_PROJECTED,
    DUE_SHARD,
    JOB_ID,
    REPORT_AT,
    REPORT_BUCKET,
    TTL_ATTRIBUTE,
)


class State(enum.StrEnum):
    AWAITING = "awaiting"
    RECEIVED = "received"
    PROCESSING = "processing"
    PROCESSED = "processed"
    PROCESSING_ERROR = "processing_error"
    LOST = "lost"


class Source(enum.StrEnum):
    WEBHOOK = "webhook"
    POLL = "poll"


@dataclass(frozen=True, slots=True)
class Job:
    """One job's item, typed: what the jobs table hands every reader.

    Built by ``JobsTable`` only, from the item as stored, the way Powertools'
    idempotency layer turns an item into a ``DataRecord``. Each field holds
    the attribute of the same name (``JobAttr``); None means the item does
    not have it. Times are Unix epoch seconds. An attribute this code does
    not know, or a value not of its field's type, stays in ``other`` under its
    name, so ``as_item()`` is always the item exactly as stored. The fields are
    the one list of the item's attributes: ``JobAttr`` is made from them, and
    docs/job-item.md (the operators' copy) is checked against them.
    """

    job_id: str
    """Sume's job id, the only idempotency key (the partition key)."""
    state: State | None = None
    """Where the job is in the state machine (see the module docstring)."""
    source: Source | None = None
    """How the terminal event arrived: by webhook (receiver) or by status poll (poller)."""
    event: str | None = None
    """The first terminal event's name: it wins forever (receiver, poller)."""
    status: str | None = None
    """The first terminal event's status, cut to its first 64 UTF-8 bytes (lone
    surrogates replaced by U+FFFD); the body keeps it whole."""
    body: str | None = None
    """The event exactly as received, kept inline up to 256 KiB."""
    body_ref: str | None = None
    """``s3://...`` of the event in the payloads bucket, when it is over 256 KiB."""
    first_seen: int | None = None
    """When the terminal event was first recorded (receiver, poller)."""
    intake_id: str | None = None
    """A random id of the write that recorded the terminal event: when botocore
    retries that write after it landed (the answer was lost), the retry finds its
    own id in the stored item and the job still counts as new (queued at once)."""
    received_at: int | None = None
    """When the work became owed: the first record, or an operator's replay."""
    last_delivery_at: int | None = None
    """The latest webhook delivery (receiver)."""
    delivery_ids: list[str] | None = None
    """The random ids of the writes that counted the latest ``RECENT_DELIVERIES``
    deliveries, newest first (blank until that many): botocore's resend of a count
    that had landed finds its own id, even under newer counts, and counts nothing
    (receiver)."""
    deliveries: int | None = None
    """Webhook deliveries counted (receiver); 0 when a poll found the event."""
    conflicts: int | None = None
    """Later deliveries that disagreed with the first terminal event (receiver)."""
    due_shard: int | None = None
    """Due-work index partition: present only while the item needs attention."""
    due_at: int | None = None
    """Due-work index sort key: the next status poll, the sweep deadline or the
    lease's end."""
    claim_id: str | None = None
    """The token of the worker holding the claim; every write of the work is
    conditional on it."""
    lease_until: int | None = None
    """When the worker's claim ends; another worker may take the job after it."""
    claimed_at: int | None = None
    """When the latest claim was taken (worker)."""
    attempts: int | None = None
    """The attempt budget spent on this round of work: claims since the work became
    owed, less those given back for want of time; 0 after a replay or a park (worker)."""
    last_error: dict[str, Any] | None = None
    """The latest failure a retry may fix, ``{code, message, url?}``: the claim was
    released, or the job parked (worker). A replay removes it."""
    last_error_at: int | None = None
    """When ``last_error`` was noted."""
    sweeps: int | None = None
    """How often the sweeper re-enqueued the owed work (poller)."""
    replay: bool | None = None
    """Set by ``sume-webhooks replay``: the worker copies every artifact again."""
    replays: int | None = None
    """How often an operator replayed the job (``sume-webhooks replay``)."""
    replayed_at: int | None = None
    """When the latest replay was requested."""
    replay_reason: str | None = None
    """Why, as the operator gave it (``--reason``), at most ``MAX_REPLAY_REASON_BYTES``."""
    replay_runs: list[str] | None = None
    """The window replays (``sume-webhooks replay --since``) that replayed the job, by run
    id (a string set): a run replays a job at most once, however often it is run."""
    replay_id: str | None = None
    """A random id of the write of the latest replay: botocore's resend of a replay that
    landed (its answer lost) finds its own id, and the replay is still queued (ops CLI)."""
    parked_at: int | None = None
    """When the worker parked the job on its message's last receive: the message is in
    the DLQ, and the sweeper leaves the job alone until the DLQ's retention is over."""
    parked_attempts: int | None = None
    """The attempts that parked it (``attempts`` starts afresh for the redrive)."""
    outcome: str | None = None
    """``completed``, ``failed`` or ``canceled``: what Sume said (worker)."""
    error: str | dict[str, Any] | None = None
    """Sume's ``error`` (failed and canceled jobs) as JSON text, cut at 16 KiB
    characters (a map on items finished before the text form)."""
    error_truncated: bool | None = None
    """``error`` was cut."""
    details_dropped: bool | None = None
    """DynamoDB refused the full finish: the item holds the state and codes only
    (the announcement has the rest)."""
    processing_error: dict[str, Any] | None = None
    """Why the work could not be done, ``{code, message, url?}``: retrying cannot fix it."""
    artifacts: list[Any] | None = None
    """Records of the artifacts stored in S3, as many as fit in the item."""
    artifact_count: int | None = None
    """Artifacts stored, listed on the item or not."""
    artifacts_truncated: bool | None = None
    """``artifacts`` lists only the first ``artifact_count`` that fit."""
    processed_at: int | None = None
    """When the work finished (worker)."""
    status_url: str | None = None
    """Where the poller asks Sume about a registered job."""
    metadata: dict[str, Any] | None = None
    """The application's JSON object given at registration, at most 64 KiB."""
    registered_at: int | None = None
    """When the job was registered for status polling."""
    poll_attempts: int | None = None
    """Status polls made (poller)."""
    last_polled_at: int | None = None
    """When the latest status poll was made."""
    last_poll_error: str | None = None
    """Why the latest status poll got no answer (e.g. ``refused_host``)."""
    lost_at: int | None = None
    """When polling gave up before a terminal event arrived; it stays when a late
    event completes the job, whose announcement says so."""
    report_bucket: str | None = None
    """Report index partition: the UTC day of ``report_at`` and the job's report shard; set
    when the job first ends (worker's finish, poller's lost), never by the receiver."""
    report_at: int | None = None
    """Report index sort key: when the job entered the report's window (``window_at``)."""
    sequence: int | None = None
    """The number of the job's latest announcement, sent or owed: record, mark_lost
    and replay each add 1, a claim stores 1 on items written before it existed."""
    announced: dict[str, Any] | None = None
    """The ending a claim settled on, written before its announcement is sent:
    ``{sequence, result, processed_at, processing_error, artifact_count, gave_up}``.
    A later claim of the same ``sequence`` (a crash, a failed finish) announces it
    again instead of doing the work again (worker)."""
    expires_at: int | None = None
    """DynamoDB TTL: the item, and its dedupe, go after ``RETENTION_DAYS``."""
    other: dict[str, Any] = field(default_factory=dict)
    """Attributes not listed above, or whose value is not of the field's type."""

    def as_item(self) -> dict[str, Any]:
        """The item as stored, in plain Python (whole numbers as ints, fractions as Decimals)."""
        item = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "other"}
        return {**{name: value for name, value in item.items() if value is not None}, **self.other}

    def window_at(self) -> int | None:
        """When the job entered the completeness report's window: its registration,
        else the first record of its terminal event (both are written once)."""
        return self.registered_at if self.registered_at is not None else self.first_seen

    def unreported_at(self) -> int | None:
        """``window_at`` for a job not yet in the report index; None once it is."""
        return None if self.report_bucket is not None else self.window_at()

    def conflicts_with(self, event: JobEvent) -> bool:
        """A later delivery that disagrees with the first terminal event (which wins)."""
        return self.event != event.event or self.status != event.status

    def work_owed(self, now: int, grace_seconds: int) -> bool:
        """True when the job's follow-up work is still owed and nobody is plausibly on it.

        A fresh ``received`` item is left alone for ``grace_seconds``: its first
        enqueue is very likely in flight, and concurrent twins must not add messages.
        A parked job's message waits in the DLQ for an operator: a second one
        would only meet the same fault and park it again.
        """
        if self.parked_at is not None:
            return False
        if self.state == State.RECEIVED:
            return now - (self.received_at or 0) >= grace_seconds
        if self.state == State.PROCESSING:
            return (self.lease_until or 0) < now
        return False


# The item's attribute names, as every expression and reader spells them: one
# per field of ``Job``, which documents it, so the names cannot drift from the
# fields. (Built from the fields, so type checkers see its members as ``Any``.)
def _attribute_names() -> Any:
    return enum.StrEnum(
        "JobAttr", {f.name.upper(): f.name for f in fields(Job) if f.name != "other"}
    )


JobAttr = _attribute_names()
# The table's key and index attributes are named in sume.core.names for the
# stack; they must be the fields' names.
_STACK_NAMES = (JOB_ID, DUE_SHARD, DUE_AT, TTL_ATTRIBUTE, REPORT_BUCKET, REPORT_AT)
if (
    JobAttr.JOB_ID,
    JobAttr.DUE_SHARD,
    JobAttr.DUE_AT,
    JobAttr.EXPIRES_AT,
    JobAttr.REPORT_BUCKET,
    JobAttr.REPORT_AT,
) != _STACK_NAMES:
    raise RuntimeError("the Job's key and index fields must be named as sume.core.names says")
if not set(DUE_PROJECTED) <= set(JobAttr):
    raise RuntimeError("the due-work index projects only the Job's fields")


# An operator's reason for a replay, as kept on the item.
MAX_REPLAY_REASON_BYTES = 512
# Counts whose ids the item keeps (``delivery_ids``): a resent count is recognised
# while fewer newer deliveries of its job have been counted since it landed. Each
# slot holds a 32-character id, so the ring costs the item about 0.5 KB.
RECENT_DELIVERIES = 16
