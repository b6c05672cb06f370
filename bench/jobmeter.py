"""What a job's AWS calls consume, read off the calls as they run: DynamoDB units, moto's CPU.

``Meter`` watches every DynamoDB call of every session made while it is
installed (botocore's ``before-parameter-build`` and ``after-call``, as
``bench.indexes.Watcher`` does). For a write it reads the item before and after
with a client of the bench's own (not watched) and books the write units
DynamoDB charges: one per started KB of the larger image, a failed conditional
write the size of the item it met, at least one. Each index's writes are
``bench.indexes.index_writes`` over the same two images, once with the index's
projection as deployed and once keys-only (what the floor design pays). A
read books its read units from what it returned: per started 4 KB, half for an
eventually consistent read.

``moto_cpu`` is the CPU moto's own stub spends answering (per thread, so a
pool's calls are not counted twice); a handler's CPU less it is ours and
botocore's, which is what Lambda would bill.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore import handlers

from bench.counting import builtin_handlers
from bench.indexes import index_writes
from sume.store.sizing import item_size

WRITES = ("PutItem", "UpdateItem", "DeleteItem")
READS = ("GetItem", "Query", "BatchGetItem", "Scan")
READ_UNIT_BYTES = 4096


@dataclass
class Units:
    """DynamoDB units booked since the last ``take``."""

    wru: int = 0
    rru: float = 0.0
    index_wru: dict[str, int] = field(default_factory=dict)
    """Per index, as deployed."""
    keys_only_wru: dict[str, int] = field(default_factory=dict)
    """Per index, had it projected its keys only."""
    writes: int = 0


def _keys_only(index: dict[str, Any]) -> dict[str, Any]:
    return {**index, "Projection": {"ProjectionType": "KEYS_ONLY"}}


def read_units(items: list[dict[str, Any]], consistent: bool) -> float:
    size = sum(item_size(i) for i in items)
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


class Meter:
    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._tables: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
        self._pending = threading.local()
        self._lock = threading.Lock()
        self.units = Units()
        self.moto_cpu = 0.0

    def _table(self, name: str) -> tuple[list[str], list[dict[str, Any]]]:
        if name not in self._tables:
            described = self._reader.describe_table(TableName=name)["Table"]
            keys = [k["AttributeName"] for k in described["KeySchema"]]
            self._tables[name] = (keys, described.get("GlobalSecondaryIndexes", []))
        return self._tables[name]

    def _image(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        keys, _ = self._table(name)
        key = params.get("Key") or {k: params["Item"][k] for k in keys}
        found: dict[str, Any] | None = self._reader.get_item(
            TableName=name, Key=key, ConsistentRead=True
        ).get("Item")
        return found

    def before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        # Per thread: the poller writes from its pool while its pages are read.
        image = None
        if model.name in WRITES and "TableName" in params:
            image = self._image(params["TableName"], params)
        self._pending.call = (params, image)

    def after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        pending = getattr(self._pending, "call", None)
        self._pending.call = None
        if pending is None:
            return
        request, before = pending
        if model.name in READS:
            self._read(model.name, request, parsed)
            return
        if model.name not in WRITES or "TableName" not in request:
            return
        name = request["TableName"]
        after = self._image(name, request)
        sizes = [item_size(i) for i in (before, after) if i is not None]
        indexes = self._table(name)[1]
        with self._lock:
            self.units.writes += 1
            self.units.wru += max(1, math.ceil(max(sizes, default=0) / 1024))
            for index in indexes:
                named = index["IndexName"]
                deployed = index_writes(before, after, index)[1]
                keys_only = index_writes(before, after, _keys_only(index))[1]
                self.units.index_wru[named] = self.units.index_wru.get(named, 0) + deployed
                floor = self.units.keys_only_wru
                floor[named] = floor.get(named, 0) + keys_only

    def _read(self, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        if operation == "GetItem":
            items = [parsed["Item"]] if "Item" in parsed else []
        elif operation == "BatchGetItem":
            items = [i for found in parsed.get("Responses", {}).values() for i in found]
        else:
            items = parsed.get("Items", [])
        consistent = bool(params.get("ConsistentRead"))
        with self._lock:
            self.units.rru += read_units(items, consistent)

    def take(self) -> Units:
        with self._lock:
            units, self.units = self.units, Units()
        return units

    def timed_stub(self, stub: Callable[..., Any]) -> Callable[..., Any]:
        def answer(**kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return stub(**kwargs)
            finally:
                with self._lock:
                    self.moto_cpu += time.thread_time() - started

        return answer

    @contextmanager
    def installed(self) -> Iterator[Meter]:
        """Hooks for the sessions made from now on; moto's stub timed in place."""
        specs: list[tuple[str, Any]] = [
            ("before-parameter-build.dynamodb.*", self.before),
            ("after-call.dynamodb.*", self.after),
        ]
        stubs = [
            (i, spec)
            for i, spec in enumerate(handlers.BUILTIN_HANDLERS)
            if spec[0] == "before-send"
        ]
        for i, (event, stub) in stubs:
            handlers.BUILTIN_HANDLERS[i] = (event, self.timed_stub(stub))
        try:
            with builtin_handlers(specs):
                yield self
        finally:
            for i, spec in stubs:
                handlers.BUILTIN_HANDLERS[i] = spec
