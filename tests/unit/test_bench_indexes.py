"""The bench's rule for what one table write costs an index (DynamoDB's GSI write rules)."""

from __future__ import annotations

from bench.stack import index_writes
from infra import spec
from sume.core.names import DUE_INDEX, REPORT_INDEX

INDEXES = {i["IndexName"]: i for i in spec.table_definition("jobs")["GlobalSecondaryIndexes"]}
DUE, REPORT = INDEXES[DUE_INDEX], INDEXES[REPORT_INDEX]
DUE_ALL = spec.DUE_INDEX_BEFORE_DEFINITION


def item(**attributes: str | int) -> dict[str, dict[str, str]]:
    typed = {"job_id": {"S": "job_1"}}
    for name, value in attributes.items():
        typed[name] = {"S": value} if isinstance(value, str) else {"N": str(value)}
    return typed


def test_an_entry_added_or_removed_is_one_write():
    ended = item(state="processed", report_bucket="2026-12-01#07", report_at=1)
    assert index_writes(item(state="processing"), ended, REPORT) == (1, 1)
    owed = item(state="received", due_shard=3, due_at=10)
    assert index_writes(owed, item(state="processed"), DUE) == (1, 1)
    assert index_writes(None, owed, DUE) == (1, 1)


def test_a_changed_key_is_a_delete_and_a_put():
    before = item(state="received", due_shard=3, due_at=10)
    assert index_writes(before, item(state="processing", due_shard=3, due_at=20), DUE) == (2, 2)


def test_a_keys_only_index_ignores_every_other_attribute():
    before = item(state="lost", report_bucket="2026-12-01#07", report_at=1)
    after = item(state="received", report_bucket="2026-12-01#07", report_at=1, deliveries=1)
    assert index_writes(before, after, REPORT) == (0, 0)
    owed = {**before, "due_shard": {"N": "3"}, "due_at": {"N": "10"}}
    # The due-work index holds what its readers read: a count it does not hold
    # writes nothing, where the index as it was (ALL) took one write.
    assert index_writes(owed, {**owed, "deliveries": {"N": "2"}}, DUE) == (0, 0)
    assert index_writes(owed, {**owed, "deliveries": {"N": "2"}}, DUE_ALL) == (1, 1)
    claimed = {**owed, "state": {"S": "processing"}, "lease_until": {"N": "900"}}
    assert index_writes(owed, claimed, DUE) == (1, 1)


def test_no_entry_before_or_after_costs_nothing():
    assert index_writes(item(state="processed"), item(state="processed", replays=1), DUE) == (0, 0)
    assert index_writes(None, None, REPORT) == (0, 0)


def test_a_large_entry_costs_a_unit_per_started_kb():
    # Just under 3 KB with its other attributes and the entry's 100 B.
    big = item(state="received", due_shard=3, due_at=10, body="x" * 2900)
    assert index_writes(None, big, DUE_ALL) == (1, 3)
    # The body is not among what the due-work index holds.
    assert index_writes(None, big, DUE) == (1, 1)
    long_url = item(state="awaiting", due_shard=3, due_at=10, status_url="x" * 2000)
    assert index_writes(None, long_url, DUE) == (1, 3)
