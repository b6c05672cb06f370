"""Recording a terminal event and making its follow-up work owed: the one path
shared by webhook deliveries (receiver) and status polls (poller), so a late
webhook and a poll racing for the same job are decided by the same write.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sume.contract.envelope import JobEvent
from sume.core.errors import ConfigurationError
from sume.core.names import Env
from sume.store.job import Source, State
from sume.store.jobs import JobsTable
from sume.store.payloads import PayloadStore, needs_offload
from sume.store.queue import JobQueue


class Outcome(enum.StrEnum):
    NEW = "new"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Intake:
    outcome: Outcome
    enqueued: bool
    state: State | None = None


class JobIntake:
    def __init__(
        self,
        jobs: JobsTable,
        queue: JobQueue,
        payloads: PayloadStore | None,
        redeliver_grace_seconds: int,
        sweep_after_seconds: int,
    ) -> None:
        self._jobs = jobs
        self._queue = queue
        self._payloads = payloads
        self._grace = redeliver_grace_seconds
        self._sweep_after = sweep_after_seconds

    def accept(self, event: JobEvent, source: Source, now: int) -> Intake:
        """Store the event once and guarantee its work is owed or queued.

        Raises botocore errors unchanged: the caller answers 5xx and Sume (or
        the next poll) tries again. Once ``record`` succeeded the item itself
        says work is owed, so a failing ``send`` loses nothing.
        """
        body_ref = None
        if needs_offload(event.raw):
            if self._payloads is None:
                raise ConfigurationError(f"{Env.PAYLOADS_BUCKET_NAME} is needed for large events")
            body_ref = self._payloads.put(event.job_id, event.raw)
        recorded = self._jobs.record(
            event, source, now, sweep_at=now + self._sweep_after, body_ref=body_ref
        )
        stored = recorded.stored
        if stored is None:
            self._queue.send(event.job_id)
            return Intake(Outcome.NEW, enqueued=True)

        conflict = stored.conflicts_with(event)
        if source is Source.WEBHOOK:
            self._jobs.count_delivery(event.job_id, now, conflict, seen=stored.delivery_ids)
        # A retry after a crash between write and send finds the work still
        # owed: send again, the worker's claim makes a second message harmless.
        owed = stored.work_owed(now, self._grace)
        if owed:
            self._queue.send(event.job_id)
        return Intake(
            Outcome.CONFLICT if conflict else Outcome.DUPLICATE,
            enqueued=owed,
            state=stored.state,
        )
