"""The writes that bring a job into the table: its first terminal event (``record``),
a later delivery's count, a registration for status polling.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sume.contract.envelope import JobEvent
from sume.core.names import due_shard
from sume.store.conditions import (
    EXISTS,
    HAS_DELIVERY_RING,
    IS_NEW_JOB,
    IS_NOT_COUNTED,
    IS_WAITING_FOR_EVENT,
)
from sume.store.errors import refused_as_invalid
from sume.store.job import RECENT_DELIVERIES, Job, JobAttr, Source, State
from sume.store.table import TableBase

# A count's id into the ring's first slot, each other slot's into the next, the
# last one's out. Slots are written last to first, so the expression means the
# same whether a store reads its operands before the update or as it goes.
_SHIFT = ", ".join(
    [
        *(
            f"{JobAttr.DELIVERY_IDS}[{i}] = {JobAttr.DELIVERY_IDS}[{i - 1}]"
            for i in range(RECENT_DELIVERIES - 1, 0, -1)
        ),
        f"{JobAttr.DELIVERY_IDS}[0] = :delivery",
    ]
)
# Where items counted before the ring kept the latest count's id alone; a fresh
# ring replaces it.
_SINGLE_DELIVERY_ID = "delivery_id"


@dataclass(frozen=True)
class Recorded:
    """Outcome of recording a terminal event: for a duplicate, the job as stored before."""

    stored: Job | None = None

    @property
    def new(self) -> bool:
        return self.stored is None


class Recording(TableBase):
    """Record, count_delivery and register: a job's arrival, by webhook, poll or registration."""

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

    def count_delivery(
        self, job_id: str, now: int, conflict: bool, seen: list[str] | None = None
    ) -> None:
        """A later delivery of a known job changes nothing but its counters, once.

        The write carries a random id, which it shifts into the ring of the
        latest counts' ids (``delivery_ids``) as it adds 1 to ``deliveries``; it
        is refused when the ring holds the id already. So when botocore resends
        a count that landed (its answer lost), even after other deliveries of the
        job were counted meanwhile, the resend counts nothing, and ``deliveries``
        counts deliveries, not requests. The ring stays ``RECENT_DELIVERIES``
        long. ``seen`` is the ring as the caller saw it (the stored job that
        refused the record); when there is none yet, or one of another size, the
        count starts a fresh one. A refusal hands back the stored item, which
        tells whether the other write fits instead: still one write per count
        but for the first counts of a job racing each other.
        """
        values: dict[str, Any] = {
            "now": now,
            "one": 1,
            # 64 random bits: ample among the ring's 16, and half the bytes of a whole uuid.
            "delivery": uuid.uuid4().hex[:16],
            "ring": RECENT_DELIVERIES,
        }
        counters = f"ADD {JobAttr.DELIVERIES} :one" + (
            f", {JobAttr.CONFLICTS} :one" if conflict else ""
        )
        shifts = seen is not None and len(seen) == RECENT_DELIVERIES
        for _ in range(2):
            if shifts:
                update = f"SET {JobAttr.LAST_DELIVERY_AT} = :now, {_SHIFT} {counters}"
                condition = f"{EXISTS} AND {HAS_DELIVERY_RING} AND {IS_NOT_COUNTED}"
                values.pop("fresh", None)
            else:
                update = (
                    f"SET {JobAttr.LAST_DELIVERY_AT} = :now, {JobAttr.DELIVERY_IDS} = :fresh "
                    f"{counters} REMOVE {_SINGLE_DELIVERY_ID}"
                )
                condition = f"{EXISTS} AND NOT {HAS_DELIVERY_RING} AND {IS_NOT_COUNTED}"
                values["fresh"] = [values["delivery"]] + [""] * (RECENT_DELIVERIES - 1)
            counted, stored = self._conditional(job_id, update, condition, values, read_stored=True)
            if counted or stored is None or values["delivery"] in (stored.delivery_ids or ()):
                return
            # Refused for the ring's shape alone: another count of the job started it.
            shifts = not shifts

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
        with refused_as_invalid():
            created, _ = self._conditional(job_id, update, IS_NEW_JOB, values)
        return created
