"""The worker's writes: a claim under a lease, the ending settled and finished, progress
saved, the claim given back or the job parked; and the same for a lost job's announcement.
"""

from __future__ import annotations

import uuid
from typing import Any

from sume.store.conditions import (
    HOLDS_CLAIM,
    HOLDS_LOST_CLAIM,
    IS_LOST_UNANNOUNCED,
    IS_UNATTENDED,
)
from sume.store.errors import NotClaimable, refused_as_invalid
from sume.store.job import Job, JobAttr, State
from sume.store.table import TableBase, alias

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


class Work(TableBase):
    """Every write of the follow-up work, each fenced by the claim it holds."""

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
        with refused_as_invalid():
            done, _ = self._conditional(job_id, update, HOLDS_CLAIM, values)
        return done

    def save_progress(self, job_id: str, claim_id: str, artifacts: list[dict[str, Any]]) -> bool:
        """Record artifacts stored so far, so a retry does not fetch them again.

        Raises ``InvalidWrite`` when DynamoDB refuses the records.
        """
        values = {"processing": State.PROCESSING.value, "claim": claim_id, "artifacts": artifacts}
        with refused_as_invalid():
            update = f"SET {JobAttr.ARTIFACTS} = :artifacts"
            done, _ = self._conditional(job_id, update, HOLDS_CLAIM, values)
        return done

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
            sets.append(f"{alias(key)} = :d_{key}")
            values[f"d_{key}"] = value
        removed: list[str] = [
            JobAttr.DUE_SHARD,
            JobAttr.DUE_AT,
            JobAttr.LEASE_UNTIL,
            JobAttr.REPLAY,
        ]
        removed += [alias(a) for a in _ENDING if a not in details]
        update = "SET " + ", ".join(sets) + f" REMOVE {', '.join(removed)}"
        with refused_as_invalid():
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
        with refused_as_invalid():
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
        with refused_as_invalid():
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
