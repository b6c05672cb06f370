"""The functions as deployed on a fresh moto account in this process (the worker and the
poller behind devstack's SQS event source, as Lambda's), each invocation's calls counted
and its CPU taken, and a job's paths run to their end (sections 1, 8 and 9 read them).

The meter (``Stack._after``) books units as DynamoDB bills them: a write one per started
KB of the larger of the item's images before and after (read by the bench's own client,
unwatched; a failed conditional write meets the stored item), a read one per started 4 KB
returned, half if eventually consistent. moto writes no index entry: each index's writes
are counted here (``index_writes``) by DynamoDB's rules for global secondary indexes, as
deployed, as keys-only (the floor's), and the due-work index as it was (``ALL``).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any
from unittest import mock

from botocore import handlers

from bench import cost
from bench.harness import LOCAL_URLS, SECRET, delivery, environment, silenced
from devstack.counting import CallCounter
from devstack.lambda_context import LambdaContext
from infra import spec
from infra.spec import POLLER_MEMORY_MB, RECEIVER_MEMORY_MB, WORKER_MEMORY_MB
from sume.core import runtime
from sume.core.names import DUE_AT, DUE_SHARDS, JOB_ID, REPORT_BUCKET, Env
from sume.store.sizing import item_size

WRITES = ("PutItem", "UpdateItem", "DeleteItem")
READS = ("GetItem", "Query", "BatchGetItem", "Scan")
ESM_BATCH = ("sqs.ReceiveMessage", "sqs.DeleteMessageBatch")
"""What Lambda's SQS event source sends per batch it hands over (at least)."""
KEYS_ONLY = " keys-only"
INDEXES = spec.table_definition("t")["GlobalSecondaryIndexes"]
DEPLOYED_INDEXES = [i["IndexName"] for i in INDEXES]
KEYS_ONLY_PROJECTION = {"Projection": {"ProjectionType": "KEYS_ONLY"}}
METERED_INDEXES = [
    *INDEXES,
    *({**i, "IndexName": i["IndexName"] + KEYS_ONLY, **KEYS_ONLY_PROJECTION} for i in INDEXES),
    spec.DUE_INDEX_BEFORE_DEFINITION,
]
MEMORY_MB = {"receiver": RECEIVER_MEMORY_MB, "worker": WORKER_MEMORY_MB, "poller": POLLER_MEMORY_MB}


def index_writes(
    before: dict[str, Any] | None, after: dict[str, Any] | None, index: dict[str, Any]
) -> tuple[int, int]:
    """(index writes, write units) one table write makes in ``index``: an entry added or
    removed is one write, a changed key two (a delete and a put), a changed projected
    attribute one, anything else none; one unit per started KB of the entry plus the
    100 bytes DynamoDB adds to each."""
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    projection = index["Projection"]
    held = (JOB_ID, *keys, *projection.get("NonKeyAttributes", ()))

    def entry(item: dict[str, Any] | None) -> dict[str, Any] | None:
        if item is None or any(key not in item for key in keys):
            return None
        if projection["ProjectionType"] == "ALL":
            return item
        return {name: item[name] for name in held if name in item}

    old, new = entry(before), entry(after)
    if old == new:
        return 0, 0
    units = [cost.wru(item_size(e) + 100) for e in (old, new) if e is not None]
    if old is not None and new is not None and all(old[k] == new[k] for k in keys):
        return 1, units[-1]
    return len(units), sum(units)


def billed_ms(function: str, cpu_ms: float, calls: list[str], http_requests: int) -> int:
    """What Lambda bills an invocation of ``function`` (a reference receiver's as ours'):
    ``cost.billed_ms`` of its CPU and calls, and ``cost.HTTP_LATENCY_MS`` a request to Sume."""
    memory = MEMORY_MB.get(function, RECEIVER_MEMORY_MB)
    billed = cost.billed_ms(cost.Usage(cpu_ms * 1000, tuple(calls), 0, 0), memory)
    return billed + round(http_requests * cost.HTTP_LATENCY_MS)


@dataclass
class Usage:
    """What a path (or a round) used: DynamoDB's units (an index's by writer and index, the
    writer being the function or who wrote from outside), API and Lambda requests, each
    function's billed ms, CPU and requests to Sume, every AWS call (the event sources' too)."""

    api: int = 0
    wru: float = 0.0
    rru: float = 0.0
    writes: int = 0
    index_writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    index_units: Counter[tuple[str, str]] = field(default_factory=Counter)
    calls: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    billed_ms: Counter[str] = field(default_factory=Counter)
    cpu_us: Counter[str] = field(default_factory=Counter)
    http: Counter[str] = field(default_factory=Counter)

    def index(self, name: str) -> tuple[int, int]:
        """(writes, units) of index ``name``, every writer's."""
        return (
            sum(n for (_, i), n in self.index_writes.items() if i == name),
            sum(n for (_, i), n in self.index_units.items() if i == name),
        )

    def less(self, other: Usage) -> Usage:
        """What was used beyond ``other`` (a path's share of its round), none below 0."""
        pairs = [(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)]
        return Usage(*(a - b if isinstance(a, Counter) else max(0, a - b) for a, b in pairs))


@dataclass
class Invocation:
    function: str
    calls: list[str]
    answer: Any


@dataclass
class PathRun:
    """One path (or one empty poller round): its invocations, what it used, its ending."""

    label: str
    invocations: list[Invocation] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    ending: str = ""
    state: str = ""
    ended: bool = False
    """Finished, or lost and announced, with nothing due: the path ran to its end."""


def check_worked(answers: Iterable[dict[str, Any]]) -> None:
    """Stop the bench if a run in the poller's ``answers`` was refused a shard (no round's cost)."""
    runs = [run for answer in answers for run in answer.get("runs", [])]
    taken = sorted(shard for run in runs for shard in run.get("taken", ()))
    if taken:
        raise RuntimeError(f"shards {taken} were held by another run: the round is not measured")


class Stack:
    """Made inside ``account()``: the session's clients are the bench's own (unwatched)."""

    def __init__(self, session: Any, names: Any) -> None:
        import poller
        import receiver
        import worker
        from devstack.eventsources import Schedule, SqsEventSource

        self.session, self.names, self.table = session, names, names.table
        self.reader = session.client("dynamodb")
        self.jobs = session.resource("dynamodb").Table(names.table)
        self.handlers = {f.__name__: f.handler for f in (receiver, worker, poller)}
        self.counter = CallCounter()
        self.run = PathRun("")
        self.sume_hits: Counter[str] = Counter()
        self.writer = ""
        self.bench_cpu = 0.0
        self._last_round = 0
        self._keys: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        work, poll = (functools.partial(self.invoke, name) for name in ("worker", "poller"))
        sqs = session.client("sqs")
        # Batch sizes as deployed: the worker's 10, one assignment per poller run.
        self.sources = [
            SqsEventSource(sqs, names.queue_url, work, "worker", 300, 1, 10, wait_seconds=0),
            SqsEventSource(sqs, names.shards_queue_url, poll, "poller", 300, 1, 1, wait_seconds=0),
        ]
        # The tick's own deadline, as Lambda gives each invocation.
        self.schedule = Schedule(poll, 300, "sume-bench-poller", spec.POLLER_TIMEOUT)

    @contextmanager
    def installed(self) -> Iterator[Stack]:
        """The counter and the meter's hooks on the sessions made from now on, moto's answering
        and the hooks timed (per thread: a pool's calls count once), so that a handler's CPU
        less them is ours and botocore's, which is what Lambda would bill."""

        def timed(stub: Callable[..., Any]) -> Callable[..., Any]:
            def answer(**kwargs: Any) -> Any:
                started = time.thread_time()
                try:
                    return stub(**kwargs)
                finally:
                    with self._lock:
                        self.bench_cpu += time.thread_time() - started

            return answer

        builtins = handlers.BUILTIN_HANDLERS
        patched = [
            *((s[0], timed(s[1])) if s[0] == "before-send" else s for s in builtins),
            ("before-parameter-build.dynamodb.*", timed(self._before)),
            ("after-call.dynamodb.*", timed(self._after)),
        ]
        with mock.patch.object(handlers, "BUILTIN_HANDLERS", patched), self.counter.installed():
            yield self

    def _image(self, table: str, params: dict[str, Any]) -> dict[str, Any]:
        """The item a call's ``params`` name, read consistently; {} when there is none."""
        if table not in self._keys:
            described = self.reader.describe_table(TableName=table)["Table"]
            self._keys[table] = [k["AttributeName"] for k in described["KeySchema"]]
        key = params.get("Key") or {k: params["Item"][k] for k in self._keys[table]}
        got = self.reader.get_item(TableName=table, Key=key, ConsistentRead=True)
        return dict(got.get("Item", {}))

    def _before(self, model: Any, params: dict[str, Any], context: Any, **_: Any) -> None:
        write = model.name in WRITES
        context["metered"] = (params, self._image(params["TableName"], params) if write else None)

    def _after(self, model: Any, parsed: Any, context: Any, **_: Any) -> None:
        """Book the call's units on the running path (the meter of the module's docstring)."""
        request, before = context["metered"]
        use = self.run.usage
        if model.name in READS:
            found = parsed.get("Items", []) + ([parsed["Item"]] if "Item" in parsed else [])
            found += [i for items in parsed.get("Responses", {}).values() for i in items]
            with self._lock:
                size = sum(item_size(i) for i in found)
                use.rru += cost.rru(size, bool(request.get("ConsistentRead")))
        if model.name not in WRITES:
            return
        after = self._image(request["TableName"], request)
        indexes = METERED_INDEXES if request["TableName"] == self.table else []
        with self._lock:
            use.writes += 1
            use.wru += cost.wru(max(item_size(before), item_size(after)))
            for index in indexes:
                writes, units = index_writes(before, after, index)
                use.index_writes[(self.writer, index["IndexName"])] += writes
                use.index_units[(self.writer, index["IndexName"])] += units

    def invoke(self, function: str, event: dict[str, Any], context: Any = None) -> Any:
        """One invocation of ``function``'s handler (or any handler named so, a reference
        receiver): its calls, its answer, and what it used booked on the path."""
        hits = sum(self.sume_hits.values())
        self.counter.take()
        self.writer = function
        bench, started = self.bench_cpu, time.process_time()
        answer = None
        try:
            with silenced():
                answer = self.handlers[function](event, context or LambdaContext())
            return answer
        finally:
            cpu = time.process_time() - started - (self.bench_cpu - bench)
            http = sum(self.sume_hits.values()) - hits
            calls, use = self.counter.take(), self.run.usage
            self.run.invocations.append(Invocation(function, calls, answer))
            use.calls.update(calls)
            use.requests[function] += 1
            use.billed_ms[function] += billed_ms(function, cpu * 1000, calls, http)
            use.cpu_us[function] += round(cpu * 1e6)
            use.http[function] += http

    @contextmanager
    def path(self, label: str, job_id: str = "") -> Iterator[PathRun]:
        """A path run to its end: every queue drained, and how ``job_id`` ended."""
        self.drain()
        self.run = PathRun(label)
        yield self.run
        self.drain()
        if job_id:
            self.end(job_id)

    def drain(self) -> None:
        while batches := [size for size in (s.poll_once() for s in self.sources) if size]:
            self.run.usage.calls.update(ESM_BATCH * len(batches))

    def deliver(self, body: bytes) -> None:
        self.run.usage.api += 1
        self.invoke("receiver", delivery(body))

    def tick(self) -> None:
        """A round as deployed: the schedule's tick, then every run it fanned out."""
        # A tick names its round by its own clock (``FanOut.start``), which may be a
        # second later than this one when the invocation is slow to start; a tick that
        # named the last round again would have every claim of its runs refused.
        while int(time.time()) <= self._last_round:
            time.sleep(0.05)
        first = len(self.run.invocations)
        self._last_round = self.schedule.run_once()["round"]
        self.drain()
        check_worked(i.answer for i in self.run.invocations[first + 1 :] if i.function == "poller")

    def outside(self, who: str, action: Callable[[], Any]) -> None:
        """``action``'s calls, made outside Lambda by ``who``: the integrator, the ops CLI."""
        self.counter.take()
        self.writer = who
        action()
        self.run.usage.calls.update(self.counter.take())

    def register(self, job_id: str, status_url: str, due_ago: int = 0, age: int = 0) -> None:
        from sume.polling import registry

        self.outside("registration", lambda: registry.expect(job_id, status_url))
        if due_ago or age:
            # Due now, registered ``age`` ago: the bench's own write, not counted.
            now = int(time.time())
            self.set(job_id, f"SET {DUE_AT} = :a, registered_at = :b", now - due_ago, now - age)

    def set(self, job_id: str, expression: str, *values: Any, **names: str) -> None:
        """The bench's own write on a job (``:a``, ``:b``... are ``values``), not counted."""
        params: dict[str, Any] = {"UpdateExpression": expression}
        if names:
            params["ExpressionAttributeNames"] = {f"#{k}": v for k, v in names.items()}
        placeholders = {f":{chr(97 + n)}": v for n, v in enumerate(values)}
        self.jobs.update_item(
            Key={JOB_ID: job_id}, ExpressionAttributeValues=placeholders, **params
        )

    def item(self, job_id: str) -> dict[str, Any]:
        return self._image(self.table, {"Key": {JOB_ID: {"S": job_id}}})

    def end(self, job_id: str) -> None:
        """Write down how the current path ended: its state, and the indexes it is in."""
        item = self.item(job_id)
        state = item.get("state", {}).get("S", "absent")
        outcome = f" ({item['outcome']['S']})" if "outcome" in item else ""
        where = "in due-work" if DUE_AT in item else "out of due-work"
        report = ", in report-window" if REPORT_BUCKET in item else ""
        self.run.ending = f"{state}{outcome}, {where}{report}"
        self.run.state = state
        self.run.ended = state in ("processed", "processing_error", "lost") and DUE_AT not in item


@contextmanager
def account(shards: int = DUE_SHARDS) -> Iterator[Stack]:
    """A fresh moto account with the stack's resources and the functions' environment."""
    import boto3
    from moto import mock_aws

    from devstack import resources

    with mock_aws():
        session = boto3.session.Session()
        names = resources.create_resources(session, prefix="sume-bench", signing_secret=SECRET)
        env = {**resources.environment(names), **LOCAL_URLS, Env.DUE_SHARDS: str(shards)}
        runtime.reset()
        try:
            with environment(env), Stack(session, names).installed() as stack:
                yield stack
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


@functools.cache
def paths(shards: int = DUE_SHARDS) -> tuple[list[PathRun], PathRun]:
    """Every path of ``PATHS`` to its end on a fresh account, warm, and the empty round
    measured before them: once a bench, as sections 1, 8 and 9 read the same."""
    from devstack.simulator import Sume
    from sume.core import aws
    from sume.core.settings import DEFAULT_SWEEP_AFTER_SECONDS
    from sume.store.compose import TableRef, build_jobs
    from sume.store.queue import JobQueue
    from sume_cli.jobs import replay

    runs: list[PathRun] = []
    with account(shards) as stack, Sume("http://127.0.0.1:9/unused", [SECRET]) as sume:
        stack.sume_hits = sume.hits
        # Every container warm first: a path is priced warm, the cold start apart.
        with stack.path("warm-up"):
            stack.deliver(sume.new_job().body)
            stack.tick()
        with stack.path("an empty round") as empty:
            stack.tick()

        def path(job: Any, *steps: Callable[[], Any], polled: bool = False) -> None:
            with stack.path(PATHS[len(runs)], job.job_id) as run:
                for step in steps:
                    step()
            if polled:
                # The round is paid whether or not this job is due in it.
                run.usage = run.usage.less(empty.usage)
            runs.append(run)

        bare, never, failed = sume.new_job(), sume.new_job(), sume.new_job(event="job.failed")
        job, reg, silent = (sume.new_job(artifacts=2) for _ in range(3))
        big = sume.new_job(artifacts=2, extra_bytes=LARGE_EVENT_PAD_BYTES)
        path(bare, lambda: stack.deliver(bare.body))
        path(job, lambda: stack.deliver(job.body))
        path(failed, lambda: stack.deliver(failed.body))
        path(
            reg, lambda: stack.register(reg.job_id, reg.status_url), lambda: stack.deliver(reg.body)
        )
        found = (lambda: stack.register(silent.job_id, silent.status_url, due_ago=1), stack.tick)
        path(silent, *found, polled=True)
        # A status URL Sume does not know: the poll fails and, past the job's maximum
        # age, the run gives the job up and announces it itself.
        unknown = never.status_url.replace(never.job_id, "job_unknown")
        lost = (lambda: stack.register(never.job_id, unknown, due_ago=1, age=10**7), stack.tick)
        path(never, *lost, polled=True)
        path(job, lambda: stack.deliver(job.body))

        def replayed() -> None:
            table = TableRef(stack.table, int(os.environ[Env.DUE_SHARDS]))
            queue = JobQueue(aws.client("sqs"), stack.names.queue_url)
            jobs = build_jobs(table, aws.client("dynamodb"))
            replay(jobs, queue, job.job_id, int(time.time()), DEFAULT_SWEEP_AFTER_SECONDS)

        path(job, lambda: stack.outside("ops CLI", replayed))
        path(big, lambda: stack.deliver(big.body))
    return runs, empty
