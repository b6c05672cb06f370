"""The jobs table: one item per job, and every transition of its story.

Each transition is a single conditional write, so two actors racing for the
same job (twin deliveries, a webhook and a poll, two workers) are decided by
DynamoDB and never by a read followed by a write. Conditions are built from
named parts so each one reads as the rule it enforces.

States (see docs/design.md)::

    (absent) --register--> awaiting --past max age--> lost (announcement owed, claimed)
    lost (announcement owed) --(claim_lost,) announce, finish_lost--> lost
    (absent | awaiting | lost) --record--> received --claim--> processing
    processing --lease expired--> (claimable again)
    processing --finish--> processed | processing_error
    (received | processing) --park--> the same state, due after the DLQ's retention
    (processed | processing_error) --replay--> received

``received`` and ``processing`` items carry the due-work keys (``due_shard``,
``due_at``) so the sweeper finds owed work a crash left behind; ``awaiting``
items carry them for their next status poll, and a ``lost`` item until its
announcement is out (the poller's run that gave it up makes it, under the claim
``mark_lost`` took; should it not, the sweeper queues it for the worker).
Finishing removes them. The writes that end a job (finish, mark_lost) add the
report index's keys (``report_bucket``, ``report_at``) in the same write, so
every job is in one of the two indexes, or in both (ended, then owed again).

``sequence`` numbers the job's announcements: every transition that owes one
(record, mark_lost, replay) adds 1 in its own write, and every copy of that
announcement (a retry, a redelivery) carries the same number.

``attempts`` is the attempt budget of one round of work: claims since the work
became owed. A claim given back for want of time takes its attempt back; a
replay and a park start a fresh budget (docs/worker.md, "Retries, giving up
and the DLQ").

The table's roles live apart, each a base of ``JobsTable``: ``recording``
(a job's arrival), ``work`` (the worker's claim and its writes), ``due`` (the
poller's writes), ``operator`` (replays, announcements owed) and ``reads``; the
machinery they share is in ``table``, the item in ``job`` and ``codec``, the
condition parts in ``conditions``, the errors in ``errors``.
"""

from __future__ import annotations

from sume.store.due import DueWrites
from sume.store.operator import OperatorWrites
from sume.store.reads import Reads
from sume.store.recording import Recording
from sume.store.work import Work


class JobsTable(Recording, Work, DueWrites, OperatorWrites, Reads):
    """The jobs table: its transitions, and its reads, which hand back ``Job``s."""
