"""One DynamoDB global table with multi-Region strong consistency (MRSC), simulated on moto.

moto has no global tables: each region's DynamoDB is its own store. Installed
in the process that runs the moto server, this makes the DynamoDB of every
region of a ``Replication`` the home region's, so the regional stacks' calls,
each signed for its own region as in AWS, reach one table. That table is
strongly consistent across the regions because it is one store whose item
operations ``devstack.moto_atomic`` serialises: what MRSC promises, a read in
any region sees the latest write of every region, and a conditional write is
decided against it.

And MRSC's one new answer: a write to an item that a request from another
region is modifying fails, unapplied, with ``ReplicatedWriteConflictException``
(retryable; botocore's standard mode retries it, as a modeled retryable error).
Here a write (PutItem, UpdateItem, DeleteItem) to an item that another region
wrote less than ``window_seconds`` before is answered so ``conflict_share`` of
the time, from a seeded generator; ``conflicts`` counts them by operation.
What this does not show is in docs/regions.md, "What the simulation shows".
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from devstack import moto_atomic

CONFLICT_MESSAGE: Final = (
    "The request was rejected because one or more items in the request are being "
    "modified by a request in another Region."
)
_WRITES: Final = ("put_item", "update_item", "delete_item")


@dataclass
class Replication:
    """The regions whose jobs table is one MRSC global table, and its conflict fault mode."""

    home: str
    """The region whose moto store holds the one table."""
    regions: frozenset[str]
    conflict_share: float = 0.0
    """Of the writes racing another region's, the share answered with a conflict."""
    window_seconds: float = 1.0
    """A write counts as racing when another region wrote the item this recently."""
    seed: int = 0
    conflicts: Counter[str] = field(default_factory=Counter)
    """Conflicts answered, by operation (``update_item``...)."""
    _last: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.home not in self.regions:
            raise ValueError(f"the home region {self.home} must be one of {sorted(self.regions)}")
        self._random = random.Random(self.seed)

    def store_of(self, region: str) -> str:
        """Whose store a region's DynamoDB calls reach."""
        return self.home if region in self.regions else region

    def conflicting(self, region: str, table: str, key: str) -> bool:
        """Whether this write from ``region`` races another region's write of the item."""
        with self._lock:
            last = self._last.get((table, key))
            racing = (
                last is not None
                and last[0] != region
                and time.monotonic() - last[1] < self.window_seconds
            )
            return racing and self._random.random() < self.conflict_share

    def wrote(self, region: str, table: str, key: str) -> None:
        with self._lock:
            self._last[(table, key)] = (region, time.monotonic())

    def count(self, operation: str) -> None:
        with self._lock:
            self.conflicts[operation] += 1

    def total_conflicts(self) -> int:
        with self._lock:
            return sum(self.conflicts.values())


_active: Replication | None = None
_installed = False


def install(replication: Replication) -> None:
    """Make ``replication``'s regions share one table from now on (one at a time)."""
    global _active  # noqa: PLW0603 - moto's backends are process-wide, and so is this
    with moto_atomic.LOCK:
        if _active is not None:
            raise RuntimeError("a replication is already installed in this process")
        _patch()
        _active = replication


def uninstall() -> None:
    """Every region's DynamoDB is its own again."""
    global _active  # noqa: PLW0603
    with moto_atomic.LOCK:
        _active = None


def _patch() -> None:
    global _installed  # noqa: PLW0603
    if _installed:
        return
    from moto.dynamodb.exceptions import DynamodbException
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.responses import DynamoHandler

    class ReplicatedWriteConflict(DynamodbException):
        error_type = "com.amazonaws.dynamodb.v20120810#ReplicatedWriteConflictException"

        def __init__(self) -> None:
            super().__init__(self.error_type, CONFLICT_MESSAGE)

    def backend(handler: Any) -> Any:
        region = handler.region if _active is None else _active.store_of(handler.region)
        return dynamodb_backends[handler.current_account][region]

    DynamoHandler.dynamodb_backend = property(backend)  # type: ignore[assignment]

    def replicated(operation: str, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(original)
        def write(handler: Any) -> Any:
            replication = _active
            if replication is None or handler.region not in replication.regions:
                return original(handler)
            name = handler.body["TableName"]
            key = _item_key(handler, name, operation)
            # Decided and written under the lock every item operation takes, so
            # no other write of the item comes between the check and this one.
            with moto_atomic.LOCK:
                if replication.conflicting(handler.region, name, key):
                    replication.count(operation)
                    raise ReplicatedWriteConflict()
                result = original(handler)
                replication.wrote(handler.region, name, key)
                return result

        return write

    for operation in _WRITES:
        setattr(DynamoHandler, operation, replicated(operation, getattr(DynamoHandler, operation)))
    _installed = True


def _item_key(handler: Any, table_name: str, operation: str) -> str:
    """The written item's key, as one comparable string."""
    if operation != "put_item":
        key = handler.body["Key"]
    else:
        table = handler.dynamodb_backend.get_table(table_name)
        item = handler.body["Item"]
        key = {name: item.get(name) for name in table.hash_key_names + table.range_key_names}
    return repr(sorted(key.items()))
