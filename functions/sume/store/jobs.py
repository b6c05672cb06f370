"""The jobs table: one item per job, and every transition of its story.

Each transition is a single conditional write, so two actors racing for the
same job (twin deliveries, a webhook and a poll, two workers) are decided by
DynamoDB and never by a read followed by a write. Conditions are built from
named parts so each one reads as the rule it enforces.

States (see docs/design.md)::

    (absent) --register--> awaiting --past max age--> lost (announcement owed)
    lost (announcement owed) --claim_lost, announce, finish_lost--> lost
    (absent | awaiting | lost) --record--> received --claim--> processing
    processing --lease expired--> (claimable again)
    processing --finish--> processed | processing_error
    (received | processing) --park--> the same state, due after the DLQ's retention
    (processed | processing_error) --replay--> received

``received`` and ``processing`` items carry the due-work keys (``due_shard``,
``due_at``) so the sweeper finds owed work a crash left behind; ``awaiting``
items carry them for their next status poll, and a ``lost`` item until its
announcement is out. Finishing removes them. The writes that end a job (finish,
mark_lost) add the report index's keys (``report_bucket``, ``report_at``) in the
same write, so every job is in one of the two indexes, or in both (ended, then
owed again).

``sequence`` numbers the job's announcements: every transition that owes one
(record, mark_lost, replay) adds 1 in its own write, and every copy of that
announcement (a retry, a redelivery) carries the same number.

``attempts`` is the attempt budget of one round of work: claims since the work
became owed. A claim given back for want of time takes its attempt back; a
replay and a park start a fresh budget (docs/worker.md, "Retries, giving up
and the DLQ").

``Job`` is the item as every reader gets it, one field per attribute; its
fields are the one list of the item's attributes, which ``JobAttr`` names for
expressions.
"""

from __future__ import annotations

import contextlib
import enum
import time
import typing
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any, Literal

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from sume.contract.envelope import JobEvent
from sume.core.bounded import bounded_text
from sume.core.errors import PermanentError, RetryableError
from sume.core.names import (
    DUE_AT,
    DUE_INDEX,
    DUE_PROJECTED,
    DUE_SHARD,
    JOB_ID,
    REPORT_AT,
    REPORT_BUCKET,
    TTL_ATTRIBUTE,
    due_shard,
    report_bucket,
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


# Condition parts. Reserved words (state, source, status, ...) go through
# #aliases; see _NAMES.
IS_NEW_JOB = f"attribute_not_exists({JobAttr.JOB_ID})"
IS_WAITING_FOR_EVENT = "#state IN (:awaiting, :lost)"
EXISTS = f"attribute_exists({JobAttr.JOB_ID})"
IS_OWED = "#state = :received"
HAS_EXPIRED_LEASE = f"(#state = :processing AND {JobAttr.LEASE_UNTIL} < :now)"
HOLDS_CLAIM = f"(#state = :processing AND {JobAttr.CLAIM_ID} = :claim)"
# A lost job whose announcement is owed: due, and nobody's lease running.
IS_LOST_UNANNOUNCED = (
    f"(#state = :lost AND attribute_exists({JobAttr.DUE_AT}) AND "
    f"(attribute_not_exists({JobAttr.LEASE_UNTIL}) OR {JobAttr.LEASE_UNTIL} < :now))"
)
HOLDS_LOST_CLAIM = f"(#state = :lost AND {JobAttr.CLAIM_ID} = :claim)"
IS_AWAITING = "#state = :awaiting"
# Still awaiting and due at the poll's "now": every later write (a later round's
# poll, a new registration) moves due_at past it, so a poll's write that lands
# late (stuck past its run's deadline, resumed when a frozen container thaws)
# changes nothing a later round did.
IS_DUE_AWAITING = f"{IS_AWAITING} AND {JobAttr.DUE_AT} <= :now"
IS_FINISHED = "#state IN (:processed, :processing_error)"
IS_UNATTENDED = f"({IS_OWED} OR {HAS_EXPIRED_LEASE})"

# Attribute names DynamoDB reserves, by the alias expressions use for them.
_NAMES = {
    f"#{name}": name.value
    for name in (
        JobAttr.STATE,
        JobAttr.SOURCE,
        JobAttr.EVENT,
        JobAttr.STATUS,
        JobAttr.ERROR,
        JobAttr.SEQUENCE,
    )
}

# An operator's reason for a replay, as kept on the item.
MAX_REPLAY_REASON_BYTES = 512
# What a finish writes about how the work ended. A finish removes those it does
# not write, so an ending never keeps parts of the one before a replay.
# Artifact records are not among them: they stay until new copies replace them.
_ENDING = (
    JobAttr.OUTCOME,
    JobAttr.ERROR,
    JobAttr.ERROR_TRUNCATED,
    JobAttr.DETAILS_DROPPED,
    JobAttr.PROCESSING_ERROR,
    JobAttr.ARTIFACT_COUNT,
    JobAttr.ARTIFACTS_TRUNCATED,
)

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _av(value: Any) -> dict[str, Any]:
    # Strings and whole numbers are nearly every value on the hot path; the
    # general serializer costs about 10 us each (bench), these two lines ~1 us.
    if type(value) is str:
        return {"S": value}
    if type(value) is int:
        return {"N": str(value)}
    return _serializer.serialize(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        # A fraction stays a Decimal: a float would round metadata's numbers.
        return int(value) if value == value.to_integral_value() else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return sorted(_plain(v) for v in value)
    return value


def _from_av(value: dict[str, Any]) -> Any:
    # A duplicate delivery reads the stored item back on the hot path; its
    # attributes are almost all strings and whole numbers (see _av).
    if "S" in value:
        return value["S"]
    if "N" in value and value["N"].lstrip("-").isdigit():
        return int(value["N"])
    return _plain(_deserializer.deserialize(value))


_MISFIT = object()


def _reader(hint: Any) -> Callable[[Any], Any]:
    """Reads a plain value into a field of type ``hint``; ``_MISFIT`` when it is not one.

    Types are matched exactly, so a flag is no count and a fraction no time.
    """
    kinds = [
        typing.get_origin(a) or a for a in typing.get_args(hint) or (hint,) if a is not type(None)
    ]
    plain = tuple(k for k in kinds if not issubclass(k, enum.Enum))
    members = {m.value: m for k in kinds if issubclass(k, enum.Enum) for m in k}

    def read(value: Any) -> Any:
        if type(value) in plain:
            return value
        return members.get(value, _MISFIT) if type(value) is str else _MISFIT

    return read


_READERS = {
    name: _reader(hint) for name, hint in typing.get_type_hints(Job).items() if name != "other"
}


def _job(item: dict[str, Any]) -> Job:
    """The one conversion of a stored item (DynamoDB's attribute values) into a ``Job``."""
    known: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for name, stored in item.items():
        value = _from_av(stored)
        read = _READERS.get(name)
        typed = read(value) if read else _MISFIT
        if typed is _MISFIT:
            other[name] = value
        else:
            known[name] = typed
    return Job(**known, other=other)


# BatchGetItem's most keys per call, and the calls made for keys it leaves unprocessed.
BATCH_KEYS = 100
BATCH_ATTEMPTS = 5


class IncompleteRead(RetryableError):
    """DynamoDB left keys of a batch read unprocessed after every attempt (throttling)."""


class InvalidWrite(PermanentError):
    """DynamoDB refused a write as invalid (``ValidationException``): sent again, it fails again."""


@contextlib.contextmanager
def _refused_as_invalid() -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") != "ValidationException":
            raise
        raise InvalidWrite(str(error.get("Message", ""))) from exc


def expression_values(**values: Any) -> dict[str, dict[str, Any]]:
    return {f":{k}": _av(v) for k, v in values.items()}


def _alias(name: str) -> str:
    """How an expression spells attribute ``name``: through its #alias when reserved."""
    return f"#{name}" if f"#{name}" in _NAMES else name


def _names(expression: str) -> dict[str, str]:
    return {alias: name for alias, name in _NAMES.items() if alias in expression}


@dataclass(frozen=True)
class Recorded:
    """Outcome of recording a terminal event: for a duplicate, the job as stored before."""

    stored: Job | None = None

    @property
    def new(self) -> bool:
        return self.stored is None


class NotClaimable(PermanentError):
    """The job's work is not ours to take now: finished, leased, awaiting, or absent.

    ``stored`` is the job as the refused claim found it; None when there is no such job.
    """

    def __init__(self, job_id: str, stored: Job | None) -> None:
        super().__init__(f"job {job_id} is not claimable: {stored.state if stored else 'absent'}")
        self.job_id = job_id
        self.stored = stored


@dataclass(frozen=True)
class Page:
    """One page of a listing."""

    jobs: list[Job]
    read: int
    """Items DynamoDB read to answer (the cost); the filter may have dropped most."""
    start: dict[str, Any] | None
    """Where the next page starts; None after the last one."""


def _poll_error(values: dict[str, Any], error: str | None) -> tuple[str, list[str]]:
    """The SET clause part recording the last poll's error, or what to REMOVE instead."""
    if error is None:
        return "", [JobAttr.LAST_POLL_ERROR]
    values["poll_error"] = error
    return f", {JobAttr.LAST_POLL_ERROR} = :poll_error", []


class JobsTable:
    """The jobs table: its transitions, and its reads, which hand back ``Job``s."""

    def __init__(
        self, client: Any, table_name: str, shards: int, due_index: str = DUE_INDEX
    ) -> None:
        self._client = client
        self._table = table_name
        self._shards = shards
        self._due_index = due_index

    @property
    def shards(self) -> int:
        """Partitions of the due-work index."""
        return self._shards

    @property
    def due_index(self) -> str:
        """The due-work index its readers query (the one before, while a table migrates)."""
        return self._due_index

    def _update(
        self,
        job_id: str,
        update: str,
        condition: str | None,
        values: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        expression = update + " " + (condition or "")
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": {JobAttr.JOB_ID: {"S": job_id}},
            "UpdateExpression": update,
            **kwargs,
        }
        if condition:
            request["ConditionExpression"] = condition
        if names := _names(expression):
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = expression_values(**values)
        return self._client.update_item(**request)

    def _conditional(
        self,
        job_id: str,
        update: str,
        condition: str,
        values: dict[str, Any],
        *,
        read_stored: bool = False,
        **kw: Any,
    ) -> tuple[bool, Job | None]:
        """Run a conditional update; on a failed condition, the stored job if ``read_stored``.

        DynamoDB hands the stored item back with the refusal (ALL_OLD), so a
        duplicate costs no extra call. Stores that speak DynamoDB's API but
        ignore ALL_OLD (dynalite, for one) hand back nothing: one strongly
        consistent GetItem then reads it, because an eventually consistent
        read may predate the write that made the condition fail (an absent
        or awaiting item) and turn a duplicate into a conflict, a retry after
        a crash into nothing owed, a busy job into an absent one. No item
        comes back either when there is none (a claim of an unknown job);
        that read then finds nothing, as ALL_OLD did.
        """
        if read_stored:
            kw["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            response = self._update(job_id, update, condition, values, **kw)
        except self._client.exceptions.ConditionalCheckFailedException as exc:
            if not read_stored:
                return False, None
            old = exc.response.get("Item")
            return False, _job(old) if old else self.get(job_id)
        attributes = response.get("Attributes")
        return True, _job(attributes) if attributes else None

    def get(self, job_id: str, consistent: bool = True) -> Job | None:
        """The job as stored; None when there is no such job."""
        response = self._client.get_item(
            TableName=self._table, Key={JobAttr.JOB_ID: {"S": job_id}}, ConsistentRead=consistent
        )
        item = response.get("Item")
        return _job(item) if item else None

    def get_many(self, job_ids: list[str], attributes: tuple[str, ...]) -> list[Job]:
        """The jobs of ``job_ids`` that exist, ``attributes`` only, eventually consistent.

        BatchGetItem, 100 keys a call; keys DynamoDB leaves unprocessed (throttling)
        are asked again after a growing pause, and ``IncompleteRead`` is raised
        if some are still left after ``BATCH_ATTEMPTS`` calls for them.
        """
        names = {f"#p{i}": attribute for i, attribute in enumerate(attributes)}
        found: list[Job] = []
        for first in range(0, len(job_ids), BATCH_KEYS):
            keys: list[dict[str, Any]] = [
                {JobAttr.JOB_ID: {"S": job_id}} for job_id in job_ids[first : first + BATCH_KEYS]
            ]
            for attempt in range(BATCH_ATTEMPTS):
                if attempt:
                    time.sleep(0.05 * 2**attempt)
                request = {
                    "Keys": keys,
                    "ProjectionExpression": ", ".join(names),
                    "ExpressionAttributeNames": names,
                }
                response = self._client.batch_get_item(RequestItems={self._table: request})
                found.extend(_job(item) for item in response["Responses"].get(self._table, []))
                keys = response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", [])
                if not keys:
                    break
            if keys:
                raise IncompleteRead(f"{len(keys)} job(s) left unread by DynamoDB (throttled)")
        return found

    def record(
        self,
        event: JobEvent,
        source: Source,
        now: int,
        sweep_at: int,
        body_ref: str | None = None,
    ) -> Recorded:
        """Store the first terminal event of a job; report duplicates with the stored job.

        One conditional write: the item is created when the job is new, or
        completed when it was only registered (awaiting) or given up (lost).
        Otherwise the condition fails and DynamoDB hands back the stored item
        (ALL_OLD), so a duplicate costs no extra read. Attributes set by
        registration (status_url, metadata) and ``lost_at`` are kept because
        this is an update; ``sequence`` gains 1. The write carries a fresh
        ``intake_id``, so a retry of this very write that had landed is told from
        another delivery's.
        """
        intake_id = uuid.uuid4().hex
        body: dict[str, str] = (
            {JobAttr.BODY_REF: body_ref} if body_ref else {JobAttr.BODY: event.raw}
        )
        values: dict[str, Any] = {
            "received": State.RECEIVED.value,
            "awaiting": State.AWAITING.value,
            "lost": State.LOST.value,
            "source": source.value,
            "event": event.event,
            "status": event.status,
            "now": now,
            "deliveries": 1 if source is Source.WEBHOOK else 0,
            "shard": due_shard(event.job_id, self._shards),
            "due": sweep_at,
            "one": 1,
            "intake": intake_id,
            **body,
        }
        body_attr = next(iter(body))
        update = (
            "SET #state = :received, #source = :source, #event = :event, #status = :status, "
            f"{body_attr} = :{body_attr}, {JobAttr.FIRST_SEEN} = :now, "
            f"{JobAttr.RECEIVED_AT} = :now, {JobAttr.LAST_DELIVERY_AT} = :now, "
            f"{JobAttr.DELIVERIES} = :deliveries, {JobAttr.DUE_SHARD} = :shard, "
            f"{JobAttr.DUE_AT} = :due, {JobAttr.INTAKE_ID} = :intake ADD #sequence :one "
            # A lost job's announcement claim, if one was taken, says nothing
            # about this work: its attempt budget starts here.
            f"REMOVE {JobAttr.ATTEMPTS}, {JobAttr.CLAIM_ID}, {JobAttr.LEASE_UNTIL}"
        )
        new, old = self._conditional(
            event.job_id,
            update,
            f"{IS_NEW_JOB} OR {IS_WAITING_FOR_EVENT}",
            values,
            read_stored=True,
        )
        if new or (old is not None and old.intake_id == intake_id):
            return Recorded()
        # Refused, yet no stored job read back: it was deleted in between (its
        # TTL, an operator). Taken as a job with no event: a conflict, nothing owed.
        return Recorded(stored=old or Job(job_id=event.job_id))

    def count_delivery(self, job_id: str, now: int, conflict: bool) -> None:
        """A later delivery of a known job changes nothing but its counters."""
        update = f"SET {JobAttr.LAST_DELIVERY_AT} = :now ADD {JobAttr.DELIVERIES} :one"
        if conflict:
            update += f", {JobAttr.CONFLICTS} :one"
        self._update(job_id, update, EXISTS, {"now": now, "one": 1})

    def register(
        self,
        job_id: str,
        status_url: str,
        metadata: dict[str, Any] | None,
        now: int,
        first_poll_at: int,
    ) -> bool:
        """Watch a submitted job through its status_url. A known job is left as it is.

        Raises ``InvalidWrite`` when DynamoDB refuses the metadata.
        """
        values: dict[str, Any] = {
            "awaiting": State.AWAITING.value,
            "url": status_url,
            "now": now,
            "zero": 0,
            "shard": due_shard(job_id, self._shards),
            "due": first_poll_at,
        }
        update = (
            f"SET #state = :awaiting, {JobAttr.STATUS_URL} = :url, "
            f"{JobAttr.REGISTERED_AT} = :now, {JobAttr.POLL_ATTEMPTS} = :zero, "
            f"{JobAttr.DUE_SHARD} = :shard, {JobAttr.DUE_AT} = :due"
        )
        if metadata:
            values["metadata"] = metadata
            update += f", {JobAttr.METADATA} = :metadata"
        with _refused_as_invalid():
            created, _ = self._conditional(job_id, update, IS_NEW_JOB, values)
        return created

    def _reported(self, job_id: str, window_at: int | None, values: dict[str, Any]) -> list[str]:
        """The SET parts that put a job in the report index (none for ``window_at`` None)."""
        if window_at is None:
            return []
        values["report_bucket"] = report_bucket(window_at, job_id)
        values["report_at"] = window_at
        return [
            f"{JobAttr.REPORT_BUCKET} = :report_bucket",
            f"{JobAttr.REPORT_AT} = :report_at",
        ]

    def claim(self, job_id: str, now: int, lease_seconds: int) -> Job:
        """Take the job's follow-up work under a lease; the claimed job comes back.

        Its ``claim_id`` fences every later write of the work. Raises
        ``NotClaimable``, with the stored job, when the job is finished, leased
        by another worker, awaiting, or absent. The lease's expiry doubles as
        the sweep deadline, so a worker that dies mid-job leaves an item the
        sweeper will find. A parked job's message has left the DLQ once it is
        claimed, so ``parked_at`` goes.
        """
        values = {"received": State.RECEIVED.value, "processing": State.PROCESSING.value}
        return self._lease(
            job_id,
            now,
            lease_seconds,
            IS_UNATTENDED,
            values,
            set_state="#state = :processing, ",
            remove=f" REMOVE {JobAttr.PARKED_AT}, {JobAttr.PARKED_ATTEMPTS}",
        )

    def _lease(
        self,
        job_id: str,
        now: int,
        lease_seconds: int,
        condition: str,
        values: dict[str, Any],
        set_state: str = "",
        remove: str = "",
    ) -> Job:
        """The one claim write: a fresh ``claim_id``, the lease and an attempt, when
        ``condition`` holds; else ``NotClaimable``.

        The due time stays: a claim that moved the due-work index's key would
        cost its entry a delete and a put. The sweeper, meeting the running
        lease at that due time, waits for its end (``await_lease``).
        """
        lease_until = now + lease_seconds
        values = {**values, "now": now, "lease": lease_until, "claim": uuid.uuid4().hex, "one": 1}
        # An item written before ``sequence`` existed is announced as 1: the
        # claim stores that 1, so the next announcement owed is numbered 2.
        update = (
            f"SET {set_state}{JobAttr.LEASE_UNTIL} = :lease, {JobAttr.CLAIM_ID} = :claim, "
            f"{JobAttr.CLAIMED_AT} = :now, "
            f"#sequence = if_not_exists(#sequence, :one) "
            f"ADD {JobAttr.ATTEMPTS} :one{remove}"
        )
        ok, job = self._conditional(
            job_id, update, condition, values, read_stored=True, ReturnValues="ALL_NEW"
        )
        if not ok or job is None:
            raise NotClaimable(job_id, job)
        return job

    def finish(
        self,
        job_id: str,
        claim_id: str,
        state: State,
        now: int,
        expires_at: int,
        details: dict[str, Any],
        *,
        window_at: int | None,
    ) -> bool:
        """Close the job (processed or processing_error) if we still hold its claim.

        Removing the due-work keys takes the item out of the sparse index.
        ``details`` holds outcome, artifacts, error and/or processing_error;
        what an earlier finish wrote about its ending and these details do
        not say is removed. ``window_at`` is the claimed job's
        ``unreported_at()``: when given, the same write puts the job in the
        report index. Raises ``InvalidWrite`` when DynamoDB refuses the
        details.
        """
        values: dict[str, Any] = {
            "processing": State.PROCESSING.value,
            "claim": claim_id,
            "done": state.value,
            "now": now,
            "ttl": expires_at,
        }
        sets = ["#state = :done", f"{JobAttr.PROCESSED_AT} = :now", f"{JobAttr.EXPIRES_AT} = :ttl"]
        sets += self._reported(job_id, window_at, values)
        for key, value in details.items():
            sets.append(f"{_alias(key)} = :d_{key}")
            values[f"d_{key}"] = value
        removed: list[str] = [
            JobAttr.DUE_SHARD,
            JobAttr.DUE_AT,
            JobAttr.LEASE_UNTIL,
            JobAttr.REPLAY,
        ]
        removed += [_alias(a) for a in _ENDING if a not in details]
        update = "SET " + ", ".join(sets) + f" REMOVE {', '.join(removed)}"
        with _refused_as_invalid():
            done, _ = self._conditional(job_id, update, HOLDS_CLAIM, values)
        return done

    def settle(
        self,
        job_id: str,
        claim_id: str,
        announced: dict[str, Any],
        artifacts: list[dict[str, Any]] | None,
    ) -> bool:
        """Write down the ending about to be announced (and its artifact records), if we
        still hold the claim: a retry announces this one again, never another.

        Raises ``InvalidWrite`` when DynamoDB refuses the records.
        """
        values: dict[str, Any] = {
            "processing": State.PROCESSING.value,
            "claim": claim_id,
            "announced": announced,
        }
        update = f"SET {JobAttr.ANNOUNCED} = :announced"
        if artifacts is not None:
            values["artifacts"] = artifacts
            update += f", {JobAttr.ARTIFACTS} = :artifacts"
        with _refused_as_invalid():
            done, _ = self._conditional(job_id, update, HOLDS_CLAIM, values)
        return done

    def save_progress(self, job_id: str, claim_id: str, artifacts: list[dict[str, Any]]) -> bool:
        """Record artifacts stored so far, so a retry does not fetch them again.

        Raises ``InvalidWrite`` when DynamoDB refuses the records.
        """
        values = {"processing": State.PROCESSING.value, "claim": claim_id, "artifacts": artifacts}
        with _refused_as_invalid():
            update = f"SET {JobAttr.ARTIFACTS} = :artifacts"
            done, _ = self._conditional(job_id, update, HOLDS_CLAIM, values)
        return done

    def release(
        self,
        job_id: str,
        claim_id: str,
        now: int,
        error: dict[str, Any],
        due_at: int,
        refund: bool = False,
        lost: bool = False,
    ) -> bool:
        """Give the claim back after a failure a retry may fix, noting why.

        The lease ends at once, so the queue's retry can claim the job without
        waiting for it; the job stays due at ``due_at``, when the sweeper
        queues it should that retry never come. ``refund`` takes the claim's
        attempt back (the work did not fail: time ran out). ``lost``: the claim
        is of a lost job's announcement (``claim_lost``). Raises
        ``InvalidWrite`` when DynamoDB refuses ``error``.
        """
        held = State.LOST if lost else State.PROCESSING
        values = {
            held.value: held.value,
            "claim": claim_id,
            "expired": now - 1,
            "error": error,
            "now": now,
            "due": due_at,
        }
        update = (
            f"SET {JobAttr.LEASE_UNTIL} = :expired, {JobAttr.LAST_ERROR} = :error, "
            f"{JobAttr.LAST_ERROR_AT} = :now, {JobAttr.DUE_AT} = :due"
        )
        if refund:
            values["refund"] = -1
            update += f" ADD {JobAttr.ATTEMPTS} :refund"
        condition = HOLDS_LOST_CLAIM if lost else HOLDS_CLAIM
        with _refused_as_invalid():
            done, _ = self._conditional(job_id, update, condition, values)
        return done

    def park(
        self, job_id: str, claim_id: str | None, now: int, error: dict[str, Any], until: int
    ) -> bool:
        """Leave the job to an operator: its message is about to go to the DLQ.

        Like ``release`` (the claim, when ``claim_id`` names ours, ends at once
        and ``error`` is noted), and more: the job is due only at ``until``,
        past the DLQ's retention, so the sweeper does not queue a second copy
        while the first waits there; the attempt budget starts afresh for the
        redrive (``parked_attempts`` keeps the spent one); ``parked_at`` says
        where the message is. Without a claim,
        only a job nobody is working on is parked. Raises ``InvalidWrite``
        when DynamoDB refuses ``error``.
        """
        values: dict[str, Any] = {
            "processing": State.PROCESSING.value,
            "error": error,
            "now": now,
            "until": until,
            "zero": 0,
        }
        update = (
            f"SET {JobAttr.LAST_ERROR} = :error, {JobAttr.LAST_ERROR_AT} = :now, "
            f"{JobAttr.DUE_AT} = :until, {JobAttr.ATTEMPTS} = :zero, {JobAttr.PARKED_AT} = :now, "
            f"{JobAttr.PARKED_ATTEMPTS} = if_not_exists({JobAttr.ATTEMPTS}, :zero)"
        )
        if claim_id is None:
            values.update(received=State.RECEIVED.value)
            condition = IS_UNATTENDED
        else:
            values.update(claim=claim_id, expired=now - 1)
            update += f", {JobAttr.LEASE_UNTIL} = :expired"
            condition = HOLDS_CLAIM
        with _refused_as_invalid():
            done, _ = self._conditional(job_id, update, condition, values)
        return done

    def due(
        self, shard: int, now: int, limit: int = 100, start: dict[str, Any] | None = None
    ) -> tuple[list[Job], dict[str, Any] | None]:
        """Jobs of one shard whose due time has come, oldest first; each has its ``due_at``."""
        request: dict[str, Any] = {
            "IndexName": self._due_index,
            "KeyConditionExpression": f"{JobAttr.DUE_SHARD} = :shard AND {JobAttr.DUE_AT} <= :now",
            "ExpressionAttributeValues": expression_values(shard=shard, now=now),
            "Limit": limit,
        }
        page = self.read_page("query", request, start)
        return page.jobs, page.start

    def count_awaiting(self, shard: int, limit: int) -> tuple[int, bool]:
        """Awaiting jobs among the first ``limit`` items of one due-work shard, and
        whether those were all of its items (else the count is a lower bound).

        ``Select=COUNT`` returns no items, but reading still costs what the
        ``limit`` items weigh: the bound is what keeps the gauge cheap.
        """
        response = self._client.query(
            TableName=self._table,
            IndexName=self._due_index,
            KeyConditionExpression=f"{JobAttr.DUE_SHARD} = :shard",
            FilterExpression=IS_AWAITING,
            ExpressionAttributeNames=_names(IS_AWAITING),
            ExpressionAttributeValues=expression_values(shard=shard, awaiting=State.AWAITING.value),
            Select="COUNT",
            Limit=limit,
        )
        return int(response.get("Count", 0)), "LastEvaluatedKey" not in response

    def read_page(
        self,
        operation: Literal["query", "scan"],
        request: dict[str, Any],
        start: dict[str, Any] | None,
    ) -> Page:
        """One page of a Query or Scan of the table: ``request`` less the table's name."""
        read: Callable[..., Any] = getattr(self._client, operation)
        request = {**request, "TableName": self._table}
        if start:
            request["ExclusiveStartKey"] = start
        response = read(**request)
        return Page(
            [_job(i) for i in response.get("Items", [])],
            response.get("ScannedCount", 0),
            response.get("LastEvaluatedKey"),
        )

    def reschedule_poll(
        self, job_id: str, now: int, next_poll_at: int, error: str | None = None
    ) -> bool:
        """Not terminal yet: poll again later (only while still awaiting).

        The item moves to the shard its id has under today's ``DUE_SHARDS``, so
        a changed shard count drains the old shards as their items come due.

        ``error`` says why the status_url gave no answer (e.g. ``refused_host``);
        it stays on the item as ``last_poll_error`` until a poll gets one.
        """
        values = {
            "awaiting": State.AWAITING.value,
            "now": now,
            "due": next_poll_at,
            "one": 1,
            "shard": due_shard(job_id, self._shards),
        }
        set_error, remove = _poll_error(values, error)
        update = (
            f"SET {JobAttr.LAST_POLLED_AT} = :now, {JobAttr.DUE_AT} = :due, "
            f"{JobAttr.DUE_SHARD} = :shard{set_error} "
            f"ADD {JobAttr.POLL_ATTEMPTS} :one"
        )
        update += f" REMOVE {', '.join(remove)}" if remove else ""
        done, _ = self._conditional(job_id, update, IS_DUE_AWAITING, values)
        return done

    def mark_lost(
        self,
        job_id: str,
        now: int,
        sweep_at: int,
        error: str | None = None,
        *,
        window_at: int | None,
    ) -> bool:
        """Give up polling a job whose event never came; its announcement becomes owed.

        The item stays visible as lost and stays in the due-work index, due at
        ``sweep_at``, like a recorded job: the caller queues it for the worker,
        which announces it, and should that send never happen the sweeper does.
        ``window_at`` as for ``finish``: the polled job's ``unreported_at()``.
        """
        values: dict[str, Any] = {
            "awaiting": State.AWAITING.value,
            "lost": State.LOST.value,
            "now": now,
            "due": sweep_at,
            "one": 1,
        }
        set_error, remove = _poll_error(values, error)
        reported = "".join(f", {part}" for part in self._reported(job_id, window_at, values))
        # The poll that found it still unfinished is counted like any other.
        update = (
            f"SET #state = :lost, {JobAttr.LOST_AT} = :now, {JobAttr.DUE_AT} = :due, "
            f"{JobAttr.LAST_POLLED_AT} = :now{set_error}{reported} "
            f"ADD #sequence :one, {JobAttr.POLL_ATTEMPTS} :one"
        )
        update += f" REMOVE {', '.join(remove)}" if remove else ""
        done, _ = self._conditional(job_id, update, IS_DUE_AWAITING, values)
        return done

    def owe_lost_announcement(self, job_id: str, now: int) -> bool:
        """Make a lost job's announcement owed, for a job lost before it was announced.

        As ``mark_lost`` leaves a job: due at ``now`` and numbered; the caller
        queues it for the worker. Only a lost job with no announcement sent or
        owed (no ``sequence``, not due) qualifies, so a second call owes nothing.
        """
        values = {"lost": State.LOST.value, "now": now, "one": 1}
        values["shard"] = due_shard(job_id, self._shards)
        update = f"SET {JobAttr.DUE_AT} = :now, {JobAttr.DUE_SHARD} = :shard ADD #sequence :one"
        condition = (
            f"#state = :lost AND attribute_not_exists(#sequence) AND "
            f"attribute_not_exists({JobAttr.DUE_AT})"
        )
        done, _ = self._conditional(job_id, update, condition, values)
        return done

    def claim_lost(self, job_id: str, now: int, lease_seconds: int) -> Job:
        """Take a lost job's owed announcement under a lease; the claimed job comes back.

        The state stays ``lost``, so a late webhook still completes the job
        (``record``) while the announcement is made. Raises ``NotClaimable``,
        with the stored job, when it is not a lost job owing its announcement
        or another worker's lease on it runs.
        """
        values = {"lost": State.LOST.value}
        return self._lease(job_id, now, lease_seconds, IS_LOST_UNANNOUNCED, values)

    def finish_lost(self, job_id: str, claim_id: str) -> bool:
        """The lost job's announcement is out: it leaves the due-work index.

        False when the claim is no longer ours, or a late event has made the
        job ``received`` meanwhile (its own announcement follows).
        """
        values = {"lost": State.LOST.value, "claim": claim_id}
        removed = [
            JobAttr.DUE_SHARD,
            JobAttr.DUE_AT,
            JobAttr.LEASE_UNTIL,
            JobAttr.CLAIM_ID,
            JobAttr.ATTEMPTS,
        ]
        update = f"REMOVE {', '.join(removed)}"
        done, _ = self._conditional(job_id, update, HOLDS_LOST_CLAIM, values)
        return done

    def defer_sweep(self, job_id: str, seen_due_at: int, next_due_at: int) -> bool:
        """Push an owed job's sweep deadline after re-enqueueing it.

        Conditional on the due time the sweeper saw, so a worker that released
        or finished the job in between is never overwritten (a claim leaves the
        due time: its copy of the message finds the job claimed). Moves the item
        to its shard under today's ``DUE_SHARDS``, as ``reschedule_poll`` does.
        """
        values = {
            "received": State.RECEIVED.value,
            "processing": State.PROCESSING.value,
            "lost": State.LOST.value,
            "seen": seen_due_at,
            "next": next_due_at,
            "one": 1,
            "shard": due_shard(job_id, self._shards),
        }
        update = (
            f"SET {JobAttr.DUE_AT} = :next, {JobAttr.DUE_SHARD} = :shard ADD {JobAttr.SWEEPS} :one"
        )
        condition = f"#state IN (:received, :processing, :lost) AND {JobAttr.DUE_AT} = :seen"
        done, _ = self._conditional(job_id, update, condition, values)
        return done

    def await_lease(self, job_id: str, seen_due_at: int, lease_until: int) -> bool:
        """Make a claimed job due when its running lease ends, as the sweeper found it.

        Conditional on the due time and the lease the sweeper read: a finish,
        a release or a new claim meanwhile is never overwritten. Nothing is
        sent and ``sweeps`` is not counted: the job is not owed while its lease runs.
        """
        values = {
            "processing": State.PROCESSING.value,
            "lost": State.LOST.value,
            "seen": seen_due_at,
            "lease": lease_until,
            "shard": due_shard(job_id, self._shards),
        }
        update = f"SET {JobAttr.DUE_AT} = :lease, {JobAttr.DUE_SHARD} = :shard"
        condition = (
            f"#state IN (:processing, :lost) AND {JobAttr.DUE_AT} = :seen "
            f"AND {JobAttr.LEASE_UNTIL} = :lease"
        )
        done, _ = self._conditional(job_id, update, condition, values)
        return done

    def request_replay(
        self, job_id: str, now: int, sweep_at: int, reason: str | None = None
    ) -> Job | None:
        """Make a finished job's follow-up work owed again, on an operator's request.

        The replay starts a fresh attempt budget and is counted, with its time
        and ``reason`` (cut to ``MAX_REPLAY_REASON_BYTES``). The records of the
        artifacts already stored stay until the new copies replace them.
        Returns the job as the replay left it; None when it was not finished.
        """
        values: dict[str, Any] = {
            "processed": State.PROCESSED.value,
            "processing_error": State.PROCESSING_ERROR.value,
            "received": State.RECEIVED.value,
            "now": now,
            "shard": due_shard(job_id, self._shards),
            "due": sweep_at,
            "yes": True,
            "zero": 0,
            "one": 1,
        }
        sets = [
            "#state = :received",
            f"{JobAttr.RECEIVED_AT} = :now",
            f"{JobAttr.REPLAY} = :yes",
            f"{JobAttr.REPLAYED_AT} = :now",
            f"{JobAttr.ATTEMPTS} = :zero",
            f"{JobAttr.DUE_SHARD} = :shard",
            f"{JobAttr.DUE_AT} = :due",
        ]
        # The last round's transient failure says nothing about this one.
        removed = [JobAttr.EXPIRES_AT, JobAttr.LAST_ERROR, JobAttr.LAST_ERROR_AT]
        if reason:
            values["reason"] = bounded_text(reason, MAX_REPLAY_REASON_BYTES)
            sets.append(f"{JobAttr.REPLAY_REASON} = :reason")
        else:
            removed.append(JobAttr.REPLAY_REASON)
        # A finished item was announced: one without ``sequence`` (written
        # before it existed) as 1, so its replay is 2.
        sets.append("#sequence = if_not_exists(#sequence, :one) + :one")
        update = f"SET {', '.join(sets)} ADD {JobAttr.REPLAYS} :one REMOVE {', '.join(removed)}"
        done, job = self._conditional(job_id, update, IS_FINISHED, values, ReturnValues="ALL_NEW")
        return job if done else None
