"""The poller's writes on the due-work index: the next status poll, giving up on a job
(lost, its announcement owed), and the sweep's next deadline for owed work.
"""

from __future__ import annotations

import uuid
from typing import Any

from sume.core.names import due_shard
from sume.store.conditions import IS_DUE_AWAITING
from sume.store.job import Job, JobAttr, State
from sume.store.table import TableBase


def _poll_error(values: dict[str, Any], error: str | None) -> tuple[str, list[str]]:
    """The SET clause part recording the last poll's error, or what to REMOVE instead."""
    if error is None:
        return "", [JobAttr.LAST_POLL_ERROR]
    values["poll_error"] = error
    return f", {JobAttr.LAST_POLL_ERROR} = :poll_error", []


class DueWrites(TableBase):
    """Writes conditional on the due time the poller saw, so a late one changes nothing."""

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
        claim: bool = False,
    ) -> Job | None:
        """Give up polling a job whose event never came; its announcement becomes owed.

        The item stays visible as lost and stays in the due-work index, due at
        ``sweep_at``, like a recorded job, so the announcement is made even if
        the caller never makes it: the sweeper queues it then for the worker.
        ``claim``: the same write takes the announcement's claim, as
        ``claim_lost`` does, under a lease until ``sweep_at``, for the caller
        to announce and ``finish_lost``; no worker claims it, and the sweeper
        waits, while the lease runs. ``window_at`` as for ``finish``: the
        polled job's ``unreported_at()``. Returns the item as written; None
        when the job was no longer due for this poll.
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
        claimed = ""
        if claim:
            values["claim"] = uuid.uuid4().hex
            claimed = (
                f", {JobAttr.CLAIM_ID} = :claim, {JobAttr.LEASE_UNTIL} = :due, "
                f"{JobAttr.CLAIMED_AT} = :now"
            )
        # The poll that found it still unfinished is counted like any other.
        update = (
            f"SET #state = :lost, {JobAttr.LOST_AT} = :now, {JobAttr.DUE_AT} = :due, "
            f"{JobAttr.LAST_POLLED_AT} = :now{set_error}{reported}{claimed} "
            f"ADD #sequence :one, {JobAttr.POLL_ATTEMPTS} :one"
        )
        update += f" REMOVE {', '.join(remove)}" if remove else ""
        done, job = self._conditional(
            job_id, update, IS_DUE_AWAITING, values, ReturnValues="ALL_NEW"
        )
        return job if done else None

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
