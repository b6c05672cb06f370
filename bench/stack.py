"""The functions as deployed, on a fresh moto account in this process: each invocation's
AWS calls counted and its CPU taken, every DynamoDB unit booked, and the paths of a job
run to their end. Sections 1, 8 and 9 read what happens here; none sets it up again.

Invocations go through ``Stack.invoke``: the receiver behind API Gateway, the worker and
the poller behind ``devstack.eventsources.SqsEventSource`` (which receives and deletes as
Lambda's event source does). After each step every queue is drained, so a path stops
only when no message is left, and its ending is read off the item.

``Meter`` books units as DynamoDB bills them, read off the calls as they run: for each
write the item is read before and after by a client of the bench's own (not watched)
and charged one write unit per started KB of the larger image, a failed conditional
write the size of the item it met, at least one. Each index of the table is charged by
DynamoDB's rules for global secondary indexes (``index_writes``), as deployed, as a
keys-only index would be (the floor design's), and, for the due-work index, as it was
(``ALL``, not deployed). moto writes no index entry (it filters the table when an index
is read), so every index figure is this module's count, not moto's. A read books units
per started 4 KB of what it returned, half when eventually consistent.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore import handlers

from bench import rounds
from bench.harness import LOCAL_URLS, SECRET, delivery, environment, grown, silenced
from devstack.counting import CallCounter, builtin_handlers
from devstack.lambda_context import LambdaContext
from sume.core import runtime
from sume.core.names import DUE_AT, DUE_INDEX, DUE_SHARDS, JOB_ID, REPORT_BUCKET, Env
from sume.store.sizing import item_size

WRITES = ("PutItem", "UpdateItem", "DeleteItem")
READS = ("GetItem", "Query", "BatchGetItem", "Scan")
INDEX_ENTRY_OVERHEAD_BYTES = 100
ESM_BATCH = ("sqs.ReceiveMessage", "sqs.DeleteMessageBatch")
"""What Lambda's SQS event source sends per batch it hands over (at least)."""
KEYS_ONLY = " keys-only"
IDEMPOTENCY_TABLE = "sume-bench-idempotency"
ENDED = ("processed", "processing_error", "lost")


def _entry(item: dict[str, Any] | None, index: dict[str, Any]) -> dict[str, Any] | None:
    """The index's entry for ``item`` (attribute values as stored); None when not in it."""
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    if item is None or any(key not in item for key in keys):
        return None
    projection = index["Projection"]
    if projection["ProjectionType"] == "ALL":
        return item
    held = (JOB_ID, *keys, *projection.get("NonKeyAttributes", ()))
    return {name: item[name] for name in held if name in item}


def index_writes(
    before: dict[str, Any] | None, after: dict[str, Any] | None, index: dict[str, Any]
) -> tuple[int, int]:
    """(index writes, write units) one table write makes in ``index``: an entry added or
    removed is one write, a changed key two (a delete and a put), a changed projected
    attribute one, anything else none; one unit per started KB of the entry plus the
    100 bytes DynamoDB adds to each (so rounded up, never down)."""
    old, new = _entry(before, index), _entry(after, index)
    if old == new:
        return 0, 0
    units = [
        max(1, -(-(item_size(e) + INDEX_ENTRY_OVERHEAD_BYTES) // 1024))
        for e in (old, new)
        if e is not None
    ]
    if old is not None and new is not None:
        if any(old[k["AttributeName"]] != new[k["AttributeName"]] for k in index["KeySchema"]):
            return 2, sum(units)
        return 1, units[-1]
    return 1, units[0]


def read_units(items: list[dict[str, Any]], consistent: bool) -> float:
    units = max(1, math.ceil(sum(item_size(i) for i in items) / 4096))
    return float(units) if consistent else units / 2


@dataclass
class Units:
    """DynamoDB units booked since the last ``take``."""

    wru: int = 0
    rru: float = 0.0
    writes: int = 0
    index_writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Per (writer, index): the writer is the function or who wrote from outside."""
    index_units: Counter[tuple[str, str]] = field(default_factory=Counter)

    def index(self, name: str) -> tuple[int, int]:
        """(writes, units) of index ``name``, every writer's."""
        return (
            sum(n for (_, i), n in self.index_writes.items() if i == name),
            sum(n for (_, i), n in self.index_units.items() if i == name),
        )

    def less(self, other: Units) -> Units:
        """What these units used beyond ``other``'s (a round's share of a path)."""
        return Units(
            self.wru - other.wru,
            max(0.0, self.rru - other.rru),
            self.writes - other.writes,
            self.index_writes - other.index_writes,
            self.index_units - other.index_units,
        )


class Meter:
    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._tables: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
        self._pending = threading.local()
        self._lock = threading.Lock()
        self.units = Units()
        self.moto_cpu = 0.0
        self.writer = ""

    def _table(self, name: str) -> tuple[list[str], list[dict[str, Any]]]:
        if name not in self._tables:
            from infra import spec

            described = self._reader.describe_table(TableName=name)["Table"]
            indexes = described.get("GlobalSecondaryIndexes", [])
            for index in list(indexes):
                indexes.append({**index, "IndexName": index["IndexName"] + KEYS_ONLY})
                indexes[-1]["Projection"] = {"ProjectionType": "KEYS_ONLY"}
                if index["IndexName"] == DUE_INDEX:
                    indexes.append(spec.DUE_INDEX_BEFORE_DEFINITION)
            self._tables[name] = ([k["AttributeName"] for k in described["KeySchema"]], indexes)
        return self._tables[name]

    def _image(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        key = params.get("Key") or {k: params["Item"][k] for k in self._table(name)[0]}
        got = self._reader.get_item(TableName=name, Key=key, ConsistentRead=True)
        found: dict[str, Any] | None = got.get("Item")
        return found

    def before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        # Per thread: the poller writes from its pool while its pages are read.
        write = model.name in WRITES and "TableName" in params
        self._pending.call = (params, self._image(params["TableName"], params) if write else None)

    def after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        pending, self._pending.call = getattr(self._pending, "call", None), None
        if pending is None:
            return
        request, before = pending
        if model.name in READS:
            found = parsed.get("Items", [])
            if model.name == "GetItem":
                found = [parsed["Item"]] if "Item" in parsed else []
            elif model.name == "BatchGetItem":
                found = [i for items in parsed.get("Responses", {}).values() for i in items]
            with self._lock:
                self.units.rru += read_units(found, bool(request.get("ConsistentRead")))
        if model.name not in WRITES or "TableName" not in request:
            return
        after = self._image(request["TableName"], request)
        sizes = [item_size(i) for i in (before, after) if i is not None]
        with self._lock:
            self.units.writes += 1
            self.units.wru += max(1, math.ceil(max(sizes, default=0) / 1024))
            for index in self._table(request["TableName"])[1]:
                writes, units = index_writes(before, after, index)
                self.units.index_writes[(self.writer, index["IndexName"])] += writes
                self.units.index_units[(self.writer, index["IndexName"])] += units

    def take(self) -> Units:
        with self._lock:
            units, self.units = self.units, Units()
        return units

    @contextmanager
    def installed(self) -> Iterator[Meter]:
        """Hooks for the sessions made from now on; moto's answering timed in place (per
        thread, so a pool's calls are not counted twice): a handler's CPU less it is ours
        and botocore's, which is what Lambda would bill."""

        def timed(stub: Callable[..., Any]) -> Callable[..., Any]:
            def answer(**kwargs: Any) -> Any:
                started = time.thread_time()
                try:
                    return stub(**kwargs)
                finally:
                    with self._lock:
                        self.moto_cpu += time.thread_time() - started

            return answer

        stubs = [(i, s) for i, s in enumerate(handlers.BUILTIN_HANDLERS) if s[0] == "before-send"]
        for i, (event, stub) in stubs:
            handlers.BUILTIN_HANDLERS[i] = (event, timed(stub))
        hooks: list[tuple[str, Callable[..., None]]] = [
            ("before-parameter-build.dynamodb.*", self.before),
            ("after-call.dynamodb.*", self.after),
        ]
        try:
            with builtin_handlers(hooks):
                yield self
        finally:
            for i, spec in stubs:
                handlers.BUILTIN_HANDLERS[i] = spec


@dataclass
class Invocation:
    function: str
    cpu_ms: float
    calls: list[str]
    http_requests: int
    answer: Any = None


@dataclass
class PathRun:
    """What one path (or one empty poller round) used."""

    label: str
    api_requests: int = 0
    invocations: list[Invocation] = field(default_factory=list)
    outside_calls: dict[str, list[str]] = field(default_factory=dict)
    """Calls made outside Lambda, by who: the integrator's registration, the ops CLI."""
    esm_requests: list[str] = field(default_factory=list)
    units: Units = field(default_factory=Units)
    ending: str = ""
    ended: bool = False
    """Finished, or lost and announced, with nothing due: the path ran to its end."""
    round: PathRun | None = None
    """The empty round subtracted from this path's poller invocations."""

    def calls(self) -> Counter[str]:
        counted = Counter(c for i in self.invocations for c in i.calls)
        counted.update(c for calls in self.outside_calls.values() for c in calls)
        counted.update(self.esm_requests)
        return counted

    def requests(self) -> Counter[str]:
        """Lambda requests per function."""
        return Counter(i.function for i in self.invocations)

    def own_units(self) -> Units:
        """The path's units, less the empty round's when it ran one (the job's share)."""
        return self.units.less(self.round.units) if self.round else self.units


class Stack:
    """Made inside ``account()``: the session's clients are the bench's own (unwatched)."""

    def __init__(self, session: Any, names: Any, counter: CallCounter, meter: Meter) -> None:
        import boto3

        import poller
        import receiver
        import worker
        from devstack.eventsources import SqsEventSource
        from sume.store.jobs import JobsTable
        from sume.store.queue import JobQueue

        self.session, self.names, self.counter, self.meter = session, names, counter, meter
        self.table = names.table
        self.reader = session.client("dynamodb")
        watched = boto3.session.Session()
        self.ddb = watched.client("dynamodb")
        self.jobs = JobsTable(self.ddb, self.table, int(os.environ[Env.DUE_SHARDS]))
        self.queue = JobQueue(watched.client("sqs"), names.queue_url)
        self.handlers = {"receiver": receiver.handler, "worker": worker.handler}
        self.handlers["poller"] = poller.handler
        self.run = PathRun("")
        self.sume: Any = None
        self._last_round = 0
        sqs = session.client("sqs")
        # Batch sizes as deployed: the worker's 10, one assignment per poller run.
        self.sources = [
            SqsEventSource(sqs, url, self.lambda_of(name), name, 300, 1, batch, wait_seconds=0)
            for url, name, batch in (
                (names.queue_url, "worker", 10),
                (names.shards_queue_url, "poller", 1),
            )
        ]

    def invoke(self, function: str, event: dict[str, Any], context: Any = None) -> Any:
        """One invocation of ``function``'s handler (or any handler named so, a reference
        receiver): its calls, its CPU less moto's, its requests to Sume, its answer."""
        handler = self.handlers[function]
        hits = sum(self.sume.hits.values()) if self.sume else 0
        self.counter.take()
        self.meter.writer = function
        moto, started = self.meter.moto_cpu, time.process_time()
        answer = None
        try:
            with silenced():
                answer = handler(event, context or LambdaContext())
            return answer
        finally:
            cpu = time.process_time() - started - (self.meter.moto_cpu - moto)
            http = (sum(self.sume.hits.values()) if self.sume else 0) - hits
            invocation = Invocation(function, cpu * 1000, self.counter.take(), http, answer)
            self.run.invocations.append(invocation)

    def lambda_of(self, function: str) -> Callable[..., Any]:
        return lambda event, context: self.invoke(function, event, context)

    def add_references(self) -> None:
        """The two receivers ours is measured against (``bench.references``), as
        handlers ``floor`` and ``powertools``, on this account's table and queue."""
        import boto3

        from bench.references import floor_handler, powertools_handler
        from sume.core.secrets import SigningSecrets

        self.reader.create_table(
            TableName=IDEMPOTENCY_TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        )
        session = boto3.session.Session()  # made while the counter is installed: watched
        ddb, sqs, queue = session.client("dynamodb"), session.client("sqs"), self.names.queue_url
        self.handlers["floor"] = floor_handler(ddb, sqs, self.table, queue, SECRET.encode())
        secrets = SigningSecrets(None, SECRET)
        self.handlers["powertools"] = powertools_handler(
            ddb, sqs, IDEMPOTENCY_TABLE, queue, secrets
        )

    @contextmanager
    def path(self, label: str) -> Iterator[PathRun]:
        self.drain()
        self.meter.take()
        self.run = PathRun(label)
        yield self.run
        self.drain()
        self.run.units = self.meter.take()

    def drain(self) -> None:
        """Hand every queued message to its function until no queue holds one."""
        while batches := [size for size in (s.poll_once() for s in self.sources) if size]:
            self.run.esm_requests.extend(ESM_BATCH * len(batches))

    def deliver(self, body: bytes, drain: bool = True) -> Any:
        self.run.api_requests += 1
        answer = self.invoke("receiver", delivery(body))
        if drain:
            self.drain()
        return answer

    def tick(self) -> list[Invocation]:
        """A round as deployed: the schedule's tick, then every run it fanned out. Its
        invocations; a round whose runs were refused a shard stops the bench (its calls
        would be no round's, ``bench.rounds``)."""
        first = len(self.run.invocations)
        rounds.wait_past(self._last_round)
        tick = self.invoke("poller", rounds.SCHEDULED, rounds.poller_context())
        self._last_round = tick["round"]
        self.drain()
        made = self.run.invocations[first:]
        rounds.check_worked(i.answer for i in made[1:] if i.function == "poller")
        return made

    def outside(self, who: str, action: Callable[[], Any]) -> None:
        self.counter.take()
        self.meter.writer = who
        action()
        self.run.outside_calls.setdefault(who, []).extend(self.counter.take())
        self.drain()

    def register(self, job_id: str, status_url: str, due_ago: int = 0, age: int = 0) -> None:
        from sume.polling import registry

        self.outside(
            "registration",
            lambda: registry.expect(job_id, status_url, table_name=self.table, dynamodb=self.ddb),
        )
        if due_ago or age:
            # Due now, registered ``age`` ago: the bench's own write, not counted.
            now = int(time.time())
            self.set(job_id, f"SET {DUE_AT} = :a, registered_at = :b", now - due_ago, now - age)

    def replay(self, job_id: str) -> None:
        from sume.core.settings import DEFAULT_SWEEP_AFTER_SECONDS
        from sume_cli.jobs import replay

        self.outside(
            "ops CLI",
            lambda: replay(
                self.jobs, self.queue, job_id, int(time.time()), DEFAULT_SWEEP_AFTER_SECONDS
            ),
        )

    def set(self, job_id: str, expression: str, *values: Any, **names: str) -> None:
        """The bench's own write on a job (``:a``, ``:b``... are ``values``), not counted."""
        kinds = {str: "S", int: "N"}
        params: dict[str, Any] = {"UpdateExpression": expression}
        if values:
            params["ExpressionAttributeValues"] = {
                f":{chr(97 + n)}": {kinds[type(v)]: str(v)} for n, v in enumerate(values)
            }
        if names:
            params["ExpressionAttributeNames"] = {f"#{k}": v for k, v in names.items()}
        self.reader.update_item(TableName=self.table, Key={JOB_ID: {"S": job_id}}, **params)

    def item(self, job_id: str) -> dict[str, Any]:
        key = {JOB_ID: {"S": job_id}}
        got = self.reader.get_item(TableName=self.table, Key=key, ConsistentRead=True)
        return dict(got.get("Item", {}))

    def end(self, job_id: str) -> None:
        """Write down how the current path ended: its state, and the indexes it is in."""
        item = self.item(job_id)
        state = item.get("state", {}).get("S", "absent")
        outcome = f" ({item['outcome']['S']})" if "outcome" in item else ""
        where = "in due-work" if DUE_AT in item else "out of due-work"
        report = ", in report-window" if REPORT_BUCKET in item else ""
        self.run.ending = f"{state}{outcome}, {where}{report}"
        self.run.ended = state in ENDED and DUE_AT not in item


@contextmanager
def account(shards: int = DUE_SHARDS) -> Iterator[Stack]:
    """A fresh moto account with the stack's resources and the functions' environment."""
    import boto3
    from moto import mock_aws

    from devstack.resources import create_resources
    from devstack.resources import environment as lambda_env

    counter = CallCounter()
    with mock_aws():
        session = boto3.session.Session()
        names = create_resources(session, prefix="sume-bench", signing_secret=SECRET)
        env = {**lambda_env(names), **LOCAL_URLS, Env.DUE_SHARDS: str(shards)}
        meter = Meter(session.client("dynamodb"))
        runtime.reset()
        try:
            with meter.installed(), counter.installed(), environment(env):
                yield Stack(session, names, counter, meter)
        finally:
            runtime.reset()


LARGE_EVENT_PAD_BYTES = 300 * 1024
COMPLETED = "webhook, 2 artifacts"
PATHS = (
    "webhook, 0 artifacts",
    COMPLETED,
    "webhook, job.failed",
    "registered, then its webhook (2 artifacts)",
    "registered, found by a status poll (2 artifacts)",
    "registered, never found: lost",
    "a duplicate delivery (after processed)",
    "replayed by the ops CLI (2 artifacts)",
    "large event, 300 KiB (body in S3, 2 artifacts)",
)


def play_paths(stack: Stack) -> tuple[list[PathRun], PathRun]:
    """Every path of ``PATHS`` to its end, warm, and the empty round measured before them."""
    from devstack.simulator import Sume

    runs: list[PathRun] = []
    labels = iter(PATHS)
    with Sume("http://127.0.0.1:9/unused", [SECRET], attempts=1) as sume:
        stack.sume = sume
        # Every container warm first: a path is priced warm, the cold start apart.
        with stack.path("warm-up"):
            stack.deliver(sume.new_job().body)
            stack.tick()
        with stack.path("an empty round") as empty:
            stack.tick()

        def path(job: Any, *steps: Callable[[], Any], polled: bool = False) -> None:
            with stack.path(next(labels)) as run:
                for step in steps:
                    step()
            stack.end(job.job_id)
            run.round = empty if polled else None
            runs.append(run)

        bare, job, failed = (
            sume.new_job(),
            sume.new_job(artifacts=2),
            sume.new_job(event="job.failed"),
        )
        path(bare, lambda: stack.deliver(bare.body))
        path(job, lambda: stack.deliver(job.body))
        path(failed, lambda: stack.deliver(failed.body))
        reg = sume.new_job(artifacts=2)
        path(
            reg, lambda: stack.register(reg.job_id, reg.status_url), lambda: stack.deliver(reg.body)
        )
        silent = sume.new_job(artifacts=2)
        found = (lambda: stack.register(silent.job_id, silent.status_url, due_ago=1), stack.tick)
        path(silent, *found, polled=True)
        # A status URL Sume does not know: the poll fails and, past the job's maximum
        # age, the run gives the job up and announces it itself.
        never = sume.new_job()
        unknown = never.status_url.replace(never.job_id, "job_unknown")
        lost = (lambda: stack.register(never.job_id, unknown, due_ago=1, age=10**7), stack.tick)
        path(never, *lost, polled=True)
        path(job, lambda: stack.deliver(job.body))
        path(job, lambda: stack.replay(job.job_id))
        big = sume.new_job(artifacts=2)
        path(big, lambda: stack.deliver(grown(big.body, LARGE_EVENT_PAD_BYTES)))
    stack.sume = None
    return runs, empty


@functools.cache
def paths(shards: int = DUE_SHARDS) -> tuple[list[PathRun], PathRun]:
    """The paths on a fresh account, once per bench (sections 8 and 9 read the same)."""
    with account(shards) as stack:
        return play_paths(stack)
