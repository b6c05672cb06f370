"""The jobs table: one item per job, and every transition of its story.

Each transition is a single conditional write, so two actors racing for the
same job (twin deliveries, a webhook and a poll, two workers) are decided by
DynamoDB and never by a read followed by a write. Conditions are built from
named parts so each one reads as the rule it enforces.

States (see docs/design.md)::

    (absent) --register--> awaiting --past max age--> lost
    (absent | awaiting | lost) --record--> received --claim--> processing
    processing --lease expired--> (claimable again)
    processing --finish--> processed | processing_error

``received`` and ``processing`` items carry the due-work keys (``due_shard``,
``due_at``) so the sweeper finds owed work a crash left behind; ``awaiting``
items carry them for their next status poll. Finishing removes them.
"""

from __future__ import annotations

import contextlib
import enum
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from sume.envelope import JobEvent
from sume.names import DUE_AT, DUE_INDEX, DUE_SHARD, JOB_ID, TTL_ATTRIBUTE, due_shard


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


# Condition parts. Reserved words (state, source, status, ...) go through
# #aliases; see _NAMES.
IS_NEW_JOB = f"attribute_not_exists({JOB_ID})"
IS_WAITING_FOR_EVENT = "#state IN (:awaiting, :lost)"
EXISTS = f"attribute_exists({JOB_ID})"
IS_OWED = "#state = :received"
HAS_EXPIRED_LEASE = "(#state = :processing AND lease_until < :now)"
HOLDS_CLAIM = "(#state = :processing AND claim_id = :claim)"
IS_AWAITING = "#state = :awaiting"
IS_FINISHED = "#state IN (:processed, :processing_error)"

_NAMES = {
    "#state": "state",
    "#source": "source",
    "#event": "event",
    "#status": "status",
    "#error": "error",
}

# DynamoDB's cap on one item: names and values, every attribute counted.
MAX_ITEM_BYTES = 400 * 1024

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
        return int(value) if value == value.to_integral_value() else float(value)
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


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as plain Python (ints, not Decimals)."""
    return {k: _from_av(v) for k, v in item.items()}


def attribute_size(value: Any) -> int:
    """Bytes DynamoDB counts for a value, by its documented rules (numbers rounded up)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int | float | Decimal):
        return (len(str(value)) + 1) // 2 + 1
    if isinstance(value, dict):
        return 3 + sum(1 + attribute_size(k) + attribute_size(v) for k, v in value.items())
    if isinstance(value, list):
        return 3 + sum(1 + attribute_size(v) for v in value)
    return len(str(value).encode("utf-8", "surrogatepass"))


def item_size(item: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for an item (as ``from_item`` returns it)."""
    return sum(attribute_size(name) + attribute_size(value) for name, value in item.items())


class InvalidWrite(Exception):
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


def _values(**values: Any) -> dict[str, dict[str, Any]]:
    return {f":{k}": _av(v) for k, v in values.items()}


def _names(expression: str) -> dict[str, str]:
    return {alias: name for alias, name in _NAMES.items() if alias in expression}


@dataclass(frozen=True)
class Recorded:
    """Outcome of recording a terminal event. ``previous`` is set for duplicates."""

    new: bool
    previous: dict[str, Any] | None = None


def is_conflicting(stored: dict[str, Any], event: JobEvent) -> bool:
    """A later delivery that disagrees with the first terminal event (which wins)."""
    return stored.get("event") != event.event or stored.get("status") != event.status


def work_owed(stored: dict[str, Any], now: int, grace_seconds: int) -> bool:
    """True when a job's follow-up work is still owed and nobody is plausibly on it.

    A fresh ``received`` item is left alone for ``grace_seconds``: its first
    enqueue is very likely in flight, and concurrent twins must not add messages.
    """
    state = stored.get("state")
    if state == State.RECEIVED:
        return now - int(stored.get("received_at", 0)) >= grace_seconds
    if state == State.PROCESSING:
        return int(stored.get("lease_until", 0)) < now
    return False


def _poll_error(values: dict[str, Any], error: str | None) -> tuple[str, list[str]]:
    """The SET clause part recording the last poll's error, or what to REMOVE instead."""
    if error is None:
        return "", ["last_poll_error"]
    values["poll_error"] = error
    return ", last_poll_error = :poll_error", []


class JobsTable:
    def __init__(self, client: Any, table_name: str, shards: int) -> None:
        self._client = client
        self._table = table_name
        self._shards = shards

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
            "Key": {JOB_ID: {"S": job_id}},
            "UpdateExpression": update,
            **kwargs,
        }
        if condition:
            request["ConditionExpression"] = condition
        if names := _names(expression):
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = _values(**values)
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
    ) -> tuple[bool, dict[str, Any] | None]:
        """Run a conditional update; on a failed condition, the stored item if ``read_stored``.

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
            return False, from_item(old) if old else self.get(job_id)
        attributes = response.get("Attributes")
        return True, from_item(attributes) if attributes else None

    def get(self, job_id: str, consistent: bool = True) -> dict[str, Any] | None:
        response = self._client.get_item(
            TableName=self._table, Key={JOB_ID: {"S": job_id}}, ConsistentRead=consistent
        )
        item = response.get("Item")
        return from_item(item) if item else None

    def record(
        self,
        event: JobEvent,
        source: Source,
        now: int,
        sweep_at: int,
        body_ref: str | None = None,
    ) -> Recorded:
        """Store the first terminal event of a job; report duplicates with the stored item.

        One conditional write: the item is created when the job is new, or
        completed when it was only registered (awaiting) or given up (lost).
        Otherwise the condition fails and DynamoDB hands back the stored item
        (ALL_OLD), so a duplicate costs no extra read. Attributes set by
        registration (status_url, metadata) are kept because this is an update.
        """
        body = {"body_ref": body_ref} if body_ref else {"body": event.raw}
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
            **body,
        }
        body_attr = next(iter(body))
        update = (
            "SET #state = :received, #source = :source, #event = :event, #status = :status, "
            f"{body_attr} = :{body_attr}, first_seen = :now, received_at = :now, "
            f"last_delivery_at = :now, deliveries = :deliveries, "
            f"{DUE_SHARD} = :shard, {DUE_AT} = :due"
        )
        new, old = self._conditional(
            event.job_id,
            update,
            f"{IS_NEW_JOB} OR {IS_WAITING_FOR_EVENT}",
            values,
            read_stored=True,
        )
        if new:
            return Recorded(new=True)
        return Recorded(new=False, previous=old or {})

    def count_delivery(self, job_id: str, now: int, conflict: bool) -> None:
        """A later delivery of a known job changes nothing but its counters."""
        update = "SET last_delivery_at = :now ADD deliveries :one"
        if conflict:
            update += ", conflicts :one"
        self._update(job_id, update, EXISTS, {"now": now, "one": 1})

    def register(
        self,
        job_id: str,
        status_url: str,
        metadata: dict[str, Any] | None,
        now: int,
        first_poll_at: int,
    ) -> bool:
        """Watch a submitted job through its status_url. A known job is left as it is."""
        values: dict[str, Any] = {
            "awaiting": State.AWAITING.value,
            "url": status_url,
            "now": now,
            "zero": 0,
            "shard": due_shard(job_id, self._shards),
            "due": first_poll_at,
        }
        update = (
            "SET #state = :awaiting, status_url = :url, registered_at = :now, "
            f"poll_attempts = :zero, {DUE_SHARD} = :shard, {DUE_AT} = :due"
        )
        if metadata:
            values["metadata"] = metadata
            update += ", metadata = :metadata"
        created, _ = self._conditional(job_id, update, IS_NEW_JOB, values)
        return created

    def claim(
        self, job_id: str, now: int, lease_seconds: int
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Take the job's follow-up work under a lease.

        Returns ``(claimed_item, None)`` on success, or ``(None, stored_item)``
        when the job is not claimable (finished, leased by another worker,
        awaiting, or absent: ``stored_item`` is then None). The lease's expiry
        doubles as the sweep deadline, so a worker that dies mid-job leaves an
        item the sweeper will find.
        """
        lease_until = now + lease_seconds
        values = {
            "received": State.RECEIVED.value,
            "processing": State.PROCESSING.value,
            "now": now,
            "lease": lease_until,
            "claim": uuid.uuid4().hex,
            "one": 1,
        }
        update = (
            "SET #state = :processing, lease_until = :lease, claim_id = :claim, "
            f"claimed_at = :now, {DUE_AT} = :lease ADD attempts :one"
        )
        ok, item = self._conditional(
            job_id,
            update,
            f"{IS_OWED} OR {HAS_EXPIRED_LEASE}",
            values,
            read_stored=True,
            ReturnValues="ALL_NEW",
        )
        return (item, None) if ok else (None, item)

    def finish(
        self,
        job_id: str,
        claim_id: str,
        state: State,
        now: int,
        expires_at: int,
        details: dict[str, Any],
    ) -> bool:
        """Close the job (processed or processing_error) if we still hold its claim.

        Removing the due-work keys takes the item out of the sparse index.
        ``details`` holds outcome, artifacts, error and/or processing_error.
        Raises ``InvalidWrite`` when DynamoDB refuses the details.
        """
        values: dict[str, Any] = {
            "processing": State.PROCESSING.value,
            "claim": claim_id,
            "done": state.value,
            "now": now,
            "ttl": expires_at,
        }
        sets = ["#state = :done", "processed_at = :now", f"{TTL_ATTRIBUTE} = :ttl"]
        for key, value in details.items():
            alias = f"#{key}" if f"#{key}" in _NAMES else key
            sets.append(f"{alias} = :d_{key}")
            values[f"d_{key}"] = value
        update = "SET " + ", ".join(sets) + f" REMOVE {DUE_SHARD}, {DUE_AT}, lease_until, replay"
        with _refused_as_invalid():
            done, _ = self._conditional(job_id, update, HOLDS_CLAIM, values)
        return done

    def save_progress(self, job_id: str, claim_id: str, artifacts: list[dict[str, Any]]) -> bool:
        """Record artifacts stored so far, so a retry does not fetch them again.

        Raises ``InvalidWrite`` when DynamoDB refuses the records.
        """
        values = {"processing": State.PROCESSING.value, "claim": claim_id, "artifacts": artifacts}
        with _refused_as_invalid():
            done, _ = self._conditional(job_id, "SET artifacts = :artifacts", HOLDS_CLAIM, values)
        return done

    def release(self, job_id: str, claim_id: str, now: int, error: dict[str, Any]) -> bool:
        """Give the claim back after a failure a retry may fix, noting why.

        The lease ends at once, so the queue's retry can claim the job without
        waiting for it; the due time stays, so the sweeper still finds the job
        if that retry never comes. Raises ``InvalidWrite`` when DynamoDB refuses
        ``error``.
        """
        values = {
            "processing": State.PROCESSING.value,
            "claim": claim_id,
            "expired": now - 1,
            "error": error,
            "now": now,
        }
        update = "SET lease_until = :expired, last_error = :error, last_error_at = :now"
        with _refused_as_invalid():
            done, _ = self._conditional(job_id, update, HOLDS_CLAIM, values)
        return done

    def due(
        self, shard: int, now: int, limit: int = 100, start: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """Items of one shard whose due time has come, oldest first."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": DUE_INDEX,
            "KeyConditionExpression": f"{DUE_SHARD} = :shard AND {DUE_AT} <= :now",
            "ExpressionAttributeValues": _values(shard=shard, now=now),
            "Limit": limit,
        }
        if start:
            request["ExclusiveStartKey"] = start
        response = self._client.query(**request)
        return [from_item(i) for i in response.get("Items", [])], response.get("LastEvaluatedKey")

    def reschedule_poll(
        self, job_id: str, now: int, next_poll_at: int, error: str | None = None
    ) -> bool:
        """Not terminal yet: poll again later (only while still awaiting).

        ``error`` says why the status_url gave no answer (e.g. ``refused_host``);
        it stays on the item as ``last_poll_error`` until a poll gets one.
        """
        values = {"awaiting": State.AWAITING.value, "now": now, "due": next_poll_at, "one": 1}
        set_error, remove = _poll_error(values, error)
        update = f"SET last_polled_at = :now, {DUE_AT} = :due{set_error} ADD poll_attempts :one"
        update += f" REMOVE {', '.join(remove)}" if remove else ""
        done, _ = self._conditional(job_id, update, IS_AWAITING, values)
        return done

    def mark_lost(self, job_id: str, now: int, error: str | None = None) -> bool:
        """Give up polling a job whose event never came; it stays visible as lost."""
        values = {"awaiting": State.AWAITING.value, "lost": State.LOST.value, "now": now}
        set_error, remove = _poll_error(values, error)
        update = f"SET #state = :lost, lost_at = :now{set_error}"
        update += f" REMOVE {', '.join([DUE_SHARD, DUE_AT, *remove])}"
        done, _ = self._conditional(job_id, update, IS_AWAITING, values)
        return done

    def defer_sweep(self, job_id: str, seen_due_at: int, next_due_at: int) -> bool:
        """Push an owed job's sweep deadline after re-enqueueing it.

        Conditional on the due time the sweeper saw, so a worker that claimed
        or finished the job in between is never overwritten.
        """
        values = {
            "received": State.RECEIVED.value,
            "processing": State.PROCESSING.value,
            "seen": seen_due_at,
            "next": next_due_at,
            "one": 1,
        }
        update = f"SET {DUE_AT} = :next ADD sweeps :one"
        condition = f"#state IN (:received, :processing) AND {DUE_AT} = :seen"
        done, _ = self._conditional(job_id, update, condition, values)
        return done

    def request_replay(self, job_id: str, now: int, sweep_at: int) -> bool:
        """Make a finished job's follow-up work owed again, on an operator's request."""
        values = {
            "processed": State.PROCESSED.value,
            "processing_error": State.PROCESSING_ERROR.value,
            "received": State.RECEIVED.value,
            "now": now,
            "shard": due_shard(job_id, self._shards),
            "due": sweep_at,
            "yes": True,
        }
        update = (
            "SET #state = :received, received_at = :now, replay = :yes, "
            f"{DUE_SHARD} = :shard, {DUE_AT} = :due REMOVE {TTL_ATTRIBUTE}"
        )
        done, _ = self._conditional(job_id, update, IS_FINISHED, values)
        return done
