"""The writes an operator's command asks for: a finished job's work owed again (replay),
a lost job's announcement owed (``announce-owed``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sume.core.bounded import bounded_text
from sume.core.names import due_shard
from sume.store.conditions import IS_FINISHED
from sume.store.job import MAX_REPLAY_REASON_BYTES, Job, JobAttr, State
from sume.store.table import TableBase


@dataclass(frozen=True)
class ReplayOnly:
    """What a window replay asks of a job, each filter given must match (any of its
    values): checked on the plan's read, and again by the replay's write, so a job
    that stopped matching in between (replayed by id and processed, say) is refused.
    """

    states: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    error_codes: tuple[str, ...] = ()
    """A ``processing_error`` job's code, or its last retried error's."""
    events: tuple[str, ...] = ()

    def condition(self, values: dict[str, Any], names: dict[str, str]) -> str:
        """The filters as a condition expression, adding what it names to ``values``
        and ``names``; empty when no filter is given."""

        def among(spelled: str, key: str, given: tuple[str, ...]) -> str:
            keys = [f":only_{key}{i}" for i in range(len(given))]
            values.update({k[1:]: v for k, v in zip(keys, given, strict=True)})
            return f"{spelled} IN ({', '.join(keys)})"

        parts = []
        if self.states:
            parts.append(among("#state", "state", self.states))
        if self.outcomes:
            names["#only_outcome"] = JobAttr.OUTCOME
            parts.append(among("#only_outcome", "outcome", self.outcomes))
        if self.events:
            parts.append(among("#event", "event", self.events))
        if self.error_codes:
            names |= {
                "#only_pe": JobAttr.PROCESSING_ERROR,
                "#only_le": JobAttr.LAST_ERROR,
                "#only_code": "code",
            }
            values["only_error_state"] = State.PROCESSING_ERROR.value
            codes = among("#only_pe.#only_code", "code", self.error_codes)
            last = codes.replace("#only_pe.", "#only_le.", 1)
            parts.append(f"#state = :only_error_state AND ({codes} OR {last})")
        return " AND ".join(f"({part})" for part in parts)


class OperatorWrites(TableBase):
    """Make work owed again, once: a second request finds nothing to owe."""

    def request_replay(
        self,
        job_id: str,
        now: int,
        sweep_at: int,
        reason: str | None = None,
        run: str | None = None,
        only: ReplayOnly | None = None,
    ) -> Job | None:
        """Make a finished job's follow-up work owed again, on an operator's request.

        The replay starts a fresh attempt budget and is counted, with its time
        and ``reason`` (cut to ``MAX_REPLAY_REASON_BYTES``). The records of the
        artifacts already stored stay until the new copies replace them.
        A window replay passes its ``run`` id: the same write adds it to
        ``replay_runs``, and is refused when the run already replayed the job;
        and its filters (``only``), refused when the job no longer matches them.
        The write carries a fresh ``replay_id``: botocore's resend of a replay
        that landed (its answer lost) is refused, finds its own id in the stored
        item, and is the replay, as the receiver's ``intake_id`` is.
        Returns the job as the replay left it; None when it was not finished
        (or this run already replayed it, or it no longer matches).
        """
        replay_id = uuid.uuid4().hex
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
            "replay_id": replay_id,
        }
        sets = [
            "#state = :received",
            f"{JobAttr.RECEIVED_AT} = :now",
            f"{JobAttr.REPLAY} = :yes",
            f"{JobAttr.REPLAYED_AT} = :now",
            f"{JobAttr.ATTEMPTS} = :zero",
            f"{JobAttr.DUE_SHARD} = :shard",
            f"{JobAttr.DUE_AT} = :due",
            f"{JobAttr.REPLAY_ID} = :replay_id",
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
        names: dict[str, str] = {}
        if only is not None and (matches := only.condition(values, names)):
            condition += f" AND {matches}"
        update = f"SET {', '.join(sets)} ADD {', '.join(added)} REMOVE {', '.join(removed)}"
        extra: dict[str, Any] = {"ExpressionAttributeNames": names} if names else {}
        done, job = self._conditional(
            job_id, update, condition, values, read_stored=True, ReturnValues="ALL_NEW", **extra
        )
        if done or (job is not None and job.replay_id == replay_id):
            return job
        return None

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
