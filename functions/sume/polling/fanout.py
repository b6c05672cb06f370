"""A poller round fanned out over parallel runs (docs/poller.md, "One round").

The schedule's tick (``FanOut.start``) names the round by its time (the start
of its period, ``round_of``, when regions share the leases table) and sends
one message per group of due-work shards to the shards queue, whose event
source starts a run per message. A run (``ShardRun.work``) first claims each of
its shards for the round in the leases table, one conditional write per shard,
then polls and sweeps the shards it won with the round's time as "now", and
frees them when done. A claim is refused for a shard some run already claimed
for this round or a later one, and for one whose lease (its holder's Lambda
deadline) has not ended, so a duplicate or late message, or SQS's retry of a
failed run, never polls a job twice in one round.

Every run of a round queries ``due_at <= round``, and every write of the round
moves an item's ``due_at`` past it, so an item one run re-homed to another
shard (a changed ``DUE_SHARDS``) is not due for that shard's run either.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from sume.core.errors import AWS_FAILURES, PermanentError, RetryableError
from sume.core.names import DUE_SHARD
from sume.core.observability import logger
from sume.core.runtime import Clock, TimeLeft
from sume.polling.poller import RunSummary

# The round a lease was last claimed for, and when its run lets go of it.
CLAIMED_ROUND = "claimed_round"
LEASE_UNTIL = "lease_until"
# An assignment is a few numbers; anything longer is not ours.
MAX_ASSIGNMENT_BYTES = 8192
# SendMessageBatch takes at most 10 entries.
SEND_BATCH = 10


class InvalidAssignment(PermanentError, ValueError):
    """A shards-queue message that is not an assignment this poller can work."""

    reason = "invalid_assignment"


@dataclass(frozen=True)
class Assignment:
    """Shards of the due-work index to work in one round."""

    round: int
    """The tick's Unix time, or its period's start (``round_of``): the round's name, and
    its runs' "now"."""
    shards: tuple[int, ...]

    def body(self) -> str:
        return json.dumps({"round": self.round, "shards": list(self.shards)})

    @classmethod
    def parse(cls, body: str, read_shards: int) -> Assignment:
        """The assignment in a message body; raises ``InvalidAssignment``."""
        if len(body.encode("utf-8", "surrogatepass")) > MAX_ASSIGNMENT_BYTES:
            raise InvalidAssignment(f"over {MAX_ASSIGNMENT_BYTES} bytes")
        try:
            data = json.loads(body)
        except ValueError:
            raise InvalidAssignment("not JSON") from None
        if not isinstance(data, dict):
            raise InvalidAssignment("not a JSON object")
        round_, shards = data.get("round"), data.get("shards")
        if not _whole(round_) or round_ <= 0:
            raise InvalidAssignment("round is not a positive integer")
        if not isinstance(shards, list) or not shards:
            raise InvalidAssignment("shards is not a non-empty list")
        if not all(_whole(s) and 0 <= s < read_shards for s in shards):
            raise InvalidAssignment(f"a shard is not an integer in 0..{read_shards - 1}")
        if len(set(shards)) != len(shards):
            raise InvalidAssignment("a shard is named twice")
        return cls(round_, tuple(shards))


def _whole(value: Any) -> TypeGuard[int]:
    # JSON's true and false are ints to Python, never a round or a shard.
    return isinstance(value, int) and not isinstance(value, bool)


def groups(read_shards: int, per_run: int) -> list[tuple[int, ...]]:
    """The shards ``0 .. read_shards - 1`` in runs of ``per_run`` (the last may be shorter)."""
    return [
        tuple(range(first, min(first + per_run, read_shards)))
        for first in range(0, read_shards, per_run)
    ]


class ShardQueue:
    """The shards queue: one message per assignment."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._url = queue_url

    def send(self, assignments: Sequence[Assignment]) -> None:
        failed = 0
        for start in range(0, len(assignments), SEND_BATCH):
            batch = assignments[start : start + SEND_BATCH]
            response = self._client.send_message_batch(
                QueueUrl=self._url,
                Entries=[{"Id": str(n), "MessageBody": a.body()} for n, a in enumerate(batch)],
            )
            failed += len(response.get("Failed") or [])
        if failed:
            # The sent ones run; the rest of the round waits for the next tick.
            raise RetryableError(f"{failed} of {len(assignments)} shard assignments not sent")


class ShardLeases:
    """The leases table: one item per shard, claimed by one run per round."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def claim(self, shard: int, round_: int, now: int, until: int) -> bool:
        """Hold ``shard`` for ``round_`` until ``until``; False when another run has it."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    DUE_SHARD: {"N": str(shard)},
                    CLAIMED_ROUND: {"N": str(round_)},
                    LEASE_UNTIL: {"N": str(until)},
                },
                ConditionExpression=(
                    f"attribute_not_exists({DUE_SHARD}) OR "
                    f"({CLAIMED_ROUND} < :round AND {LEASE_UNTIL} <= :now)"
                ),
                ExpressionAttributeValues={
                    ":round": {"N": str(round_)},
                    ":now": {"N": str(now)},
                },
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def release(self, shard: int, round_: int, now: int) -> None:
        """End this round's lease on ``shard`` now, so the next round need not wait for it."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={DUE_SHARD: {"N": str(shard)}},
                UpdateExpression=f"SET {LEASE_UNTIL} = :now",
                ConditionExpression=f"{CLAIMED_ROUND} = :round",
                ExpressionAttributeValues={
                    ":round": {"N": str(round_)},
                    ":now": {"N": str(now)},
                },
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            # A later round holds it already: nothing of ours to end.
            return


class FanOut:
    """The schedule's tick: one assignment per group of shards, all for one round."""

    def __init__(
        self,
        queue: ShardQueue,
        read_shards: int,
        shards_per_run: int,
        clock: Clock,
        round_seconds: int = 1,
    ) -> None:
        self._queue = queue
        self._groups = groups(read_shards, shards_per_run)
        self._clock = clock
        self._round_seconds = round_seconds

    def start(self) -> dict[str, int]:
        round_ = round_of(self._clock(), self._round_seconds)
        self._queue.send([Assignment(round_, group) for group in self._groups])
        return {"round": round_, "runs": len(self._groups)}


def round_of(tick: float, round_seconds: int) -> int:
    """The round a tick at ``tick`` starts: the start of its period of ``round_seconds``.

    Two regions' schedules tick once a period each, at unrelated seconds; named
    by their period, both ticks name one round, and the leases table (one global
    table for both) lets one run work each shard in it. The round is also the
    runs' "now", so a period's start: never later than the tick.
    """
    whole = int(tick)
    return whole - whole % round_seconds


Run = Callable[[TimeLeft, int, Sequence[int]], RunSummary]
"""(time left, the round's time, shards) -> what one poller run over them did."""


class ShardRun:
    """One assignment's run: claim its shards for the round, work the ones won, free them."""

    def __init__(self, run: Run, leases: ShardLeases, read_shards: int, clock: Clock) -> None:
        self._run = run
        self._leases = leases
        self._read_shards = read_shards
        self._clock = clock

    def parse(self, body: str) -> Assignment:
        return Assignment.parse(body, self._read_shards)

    def work(self, assignment: Assignment, remaining: TimeLeft) -> RunSummary:
        now = int(self._clock())
        # The lease lasts as long as this invocation may: a run that dies
        # holds its shards no longer than Lambda would let it live.
        until = now + int(remaining()) + 1
        won: list[int] = []
        taken: list[int] = []
        # A claim that fails (throttled) ends the run: the shards it won
        # before are let go of too, not held unworked until the deadline.
        try:
            for shard in assignment.shards:
                claimed = self._leases.claim(shard, assignment.round, now, until)
                (won if claimed else taken).append(shard)
            if taken:
                logger.info(
                    "shards held by another run of this round or a later one: skipped",
                    round=assignment.round,
                    shards=taken,
                )
            summary = self._run(remaining, assignment.round, won)
        finally:
            self._release(won, assignment.round)
        return dataclasses.replace(summary, taken=tuple(taken))

    def _release(self, shards: list[int], round_: int) -> None:
        now = int(self._clock())
        for shard in shards:
            try:
                self._leases.release(shard, round_, now)
            except AWS_FAILURES:
                # The lease then ends at its deadline instead; nothing is lost.
                logger.warning("shard lease not released", shard=shard, round=round_)
