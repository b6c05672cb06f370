"""The writes an operator's command asks for: a finished job's work owed again (replay),
a lost job's announcement owed (``announce-owed``).
"""

from __future__ import annotations

from typing import Any

from sume.core.bounded import bounded_text
from sume.core.names import due_shard
from sume.store.conditions import IS_FINISHED
from sume.store.job import MAX_REPLAY_REASON_BYTES, Job, JobAttr, State
from sume.store.table import TableBase


class OperatorWrites(TableBase):
    """Make work owed again, once: a second request finds nothing to owe."""

    def request_replay(
        self,
        job_id: str,
        now: int,
        sweep_at: int,
        reason: str | None = None,
        run: str | None = None,
    ) -> Job | None:
        """Make a finished job's follow-up work owed again, on an operator's request.

        The replay starts a fresh attempt budget and is counted, with its time
        and ``reason`` (cut to ``MAX_REPLAY_REASON_BYTES``). The records of the
        artifacts already stored stay until the new copies replace them.
        A window replay passes its ``run`` id: the same write adds it to
        ``replay_runs``, and is refused when the run already replayed the job.
        Returns the job as the replay left it; None when it was not finished
        (or this run already replayed it).
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
        added = [f"{JobAttr.REPLAYS} :one"]
        condition = IS_FINISHED
        if run is not None:
            values |= {"run": run, "runs": {run}}
            added.append(f"{JobAttr.REPLAY_RUNS} :runs")
            condition += f" AND NOT contains({JobAttr.REPLAY_RUNS}, :run)"
        update = f"SET {', '.join(sets)} ADD {', '.join(added)} REMOVE {', '.join(removed)}"
        done, job = self._conditional(job_id, update, condition, values, ReturnValues="ALL_NEW")
        return job if done else None

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
