"""The parts the jobs table's conditions are built from, each named for the rule it
states, so a transition's condition reads as what it enforces.

Reserved words (state, source, status, ...) go through #aliases; see
``sume.store.table``.
"""

from __future__ import annotations

from sume.store.job import JobAttr

IS_NEW_JOB = f"attribute_not_exists({JobAttr.JOB_ID})"
IS_WAITING_FOR_EVENT = "#state IN (:awaiting, :lost)"
EXISTS = f"attribute_exists({JobAttr.JOB_ID})"
# A delivery's count, unless this very write landed already (its answer lost, botocore
# sends it again with the same id) and is still among the ids of the latest counts.
IS_NOT_COUNTED = f"NOT contains({JobAttr.DELIVERY_IDS}, :delivery)"
# The item keeps the latest counts' ids in a ring of ``:ring`` slots, which a count
# shifts; anything else (no ring yet, or one of another size) is started afresh.
HAS_DELIVERY_RING = (
    f"(attribute_exists({JobAttr.DELIVERY_IDS}) AND size({JobAttr.DELIVERY_IDS}) = :ring)"
)
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
