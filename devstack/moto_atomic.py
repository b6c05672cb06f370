"""Make moto's DynamoDB apply each request atomically, as DynamoDB does.

moto evaluates a ConditionExpression and then writes, with no lock between
the two. Under concurrent requests (moto's threaded server, or threads in one
process) two conditional writes for one new key can both succeed, and a
reader can see an item half-updated. Real DynamoDB serialises writes per item,
and this project's exactly-once guarantees rest on that, so tests and the
local stack run moto with one lock around every item operation.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

# Shared with devstack.moto_limits, whose snapshot-and-restore must be atomic too.
LOCK = threading.RLock()
_OPERATIONS = (
    "put_item",
    "update_item",
    "delete_item",
    "get_item",
    "query",
    "scan",
    "transact_write_items",
    "transact_get_items",
    "batch_get_item",
)


def install() -> None:
    """Patch moto's DynamoDB backend once per process (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend, "_sume_atomic", False):
        return
    for name in _OPERATIONS:
        original = getattr(DynamoDBBackend, name, None)
        if original is None:
            continue

        @functools.wraps(original)
        def locked(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with LOCK:
                return __original(self, *args, **kwargs)

        setattr(DynamoDBBackend, name, locked)
    DynamoDBBackend._sume_atomic = True  # type: ignore[attr-defined]
