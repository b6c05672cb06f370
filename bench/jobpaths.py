"""Each path of a job, run to its end through the real handlers on moto, every call counted.

A path is what happens to one job from Sume's side to its ending: the receiver
behind API Gateway, the worker and the poller behind their SQS event sources
(``devstack.eventsources.SqsEventSource``, which receives and deletes as
Lambda's does), the integrator's registration, the ops CLI's replay. After each
step every queue is drained (jobs and shards), so a path stops only when no
message is left: its ending is read off the item (``state``) and printed.

Counted per path (``PathRun``): every AWS call of every function
(``bench.counting.CallCounter``), the event sources' own SQS requests (one
receive and one batch delete per batch they hand over), API Gateway requests,
each Lambda invocation with its CPU less moto's (``bench.jobmeter``), the
outbound HTTP requests the Sume stand-in answered, and DynamoDB units
(``bench.jobmeter.Meter``). A poller round costs the same whether or not a job
is due in it; its calls with the job less the calls of an empty round, measured
just before, are the job's share, and the empty round is priced per month
(``PathRun.round``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench import deliveries as d
from bench import rounds
from bench.counting import CallCounter
from bench.env import environment
from bench.jobmeter import Meter, Units
from bench.runtime import silenced
from devstack.eventsources import SqsEventSource
from devstack.lambda_context import LambdaContext
from sume.core import runtime
from sume.core.names import DUE_SHARDS, JOB_ID, Env

LARGE_EVENT_PAD_BYTES = 300 * 1024
ESM_BATCH = ("sqs.ReceiveMessage", "sqs.DeleteMessageBatch")
"""What Lambda's SQS event source sends per batch it hands over (at least)."""


@dataclass
class Invocation:
    function: str
    cpu_ms: float
    calls: list[str]
    http_requests: int


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
    round: PathRun | None = None
    """The empty round subtracted from this path's poller invocations."""

    def calls(self) -> Counter[str]:
        counted: Counter[str] = Counter()
        for invocation in self.invocations:
            counted.update(invocation.calls)
        for calls in self.outside_calls.values():
            counted.update(calls)
        counted.update(self.esm_requests)
        return counted

    def requests(self) -> Counter[str]:
        """Lambda requests per function."""
        return Counter(i.function for i in self.invocations)


class Driver:
    """Runs paths on one moto account; made while the counter and the meter are installed."""

    def __init__(
        self,
        session: Any,
        env: dict[str, str],
        names: Any,
        counter: CallCounter,
        meter: Meter,
        shards: int = DUE_SHARDS,
    ) -> None:
        import boto3

        import poller
        import receiver
        import worker
        from sume.store.jobs import JobsTable
        from sume.store.queue import JobQueue

        self.env = env
        self.counter = counter
        self.meter = meter
        self.table = names.table
        self._reader = session.client("dynamodb")
        watched = boto3.session.Session()
        self.ddb = watched.client("dynamodb")
        self.jobs = JobsTable(self.ddb, self.table, shards)
        self.queue = JobQueue(watched.client("sqs"), names.queue_url)
        self.receiver = receiver.handler
        self.poller = poller.handler
        self.run: PathRun = PathRun("")
        self.sume: Any = None
        self._last_round = 0
        self._answers: list[Any] = []
        unwatched_sqs = session.client("sqs")
        self.sources = [
            SqsEventSource(
                unwatched_sqs, url, self._lambda(name, handler), name, 300, 1, wait_seconds=0
            )
            for url, name, handler in (
                (names.queue_url, "worker", worker.handler),
                (names.shards_queue_url, "poller", poller.handler),
            )
        ]

    def _hits(self) -> int:
        return sum(self.sume.hits.values()) if self.sume else 0

    def _lambda(self, function: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        def invoke(event: dict[str, Any], context: Any) -> Any:
            self.counter.take()
            hits, moto, started = self._hits(), self.meter.moto_cpu, time.process_time()
            try:
                with silenced():
                    answer = handler(event, context)
                self._answers.append(answer)
                return answer
            finally:
                cpu = time.process_time() - started - (self.meter.moto_cpu - moto)
                self.run.invocations.append(
                    Invocation(function, cpu * 1000, self.counter.take(), self._hits() - hits)
                )

        return invoke

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
        while True:
            batches = [source.poll_once() for source in self.sources]
            if not any(batches):
                return
            for size in batches:
                if size:
                    self.run.esm_requests.extend(ESM_BATCH)

    def deliver(self, body: bytes) -> None:
        self.run.api_requests += 1
        self._lambda("receiver", self.receiver)(d.delivery(body), LambdaContext())
        self.drain()

    def tick(self) -> None:
        rounds.wait_past(self._last_round)
        tick = self._lambda("poller", self.poller)(rounds.SCHEDULED, rounds.poller_context())
        self._last_round = tick["round"]
        self._answers.clear()
        self.drain()
        rounds.check_worked(self._answers)

    def outside(self, who: str, action: Callable[[], Any]) -> None:
        self.counter.take()
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
            self._reader.update_item(
                TableName=self.table,
                Key={JOB_ID: {"S": job_id}},
                UpdateExpression="SET due_at = :past, registered_at = :at",
                ExpressionAttributeValues={
                    ":past": {"N": str(now - due_ago)},
                    ":at": {"N": str(now - age)},
                },
            )

    def replay(self, job_id: str) -> None:
        from sume.core.settings import DEFAULT_SWEEP_AFTER_SECONDS
        from sume_cli.jobs import replay

        self.outside(
            "ops CLI",
            lambda: replay(
                self.jobs, self.queue, job_id, int(time.time()), DEFAULT_SWEEP_AFTER_SECONDS
            ),
        )

    def ending(self, job_id: str) -> str:
        item = self._reader.get_item(
            TableName=self.table, Key={JOB_ID: {"S": job_id}}, ConsistentRead=True
        ).get("Item", {})
        return str(item.get("state", {}).get("S", "absent"))


def large_body(body: bytes) -> bytes:
    """``body`` grown past what an item holds, so the receiver keeps it in S3."""
    event = json.loads(body)
    event["metadata"] = {"notes": "x" * LARGE_EVENT_PAD_BYTES}
    return json.dumps(event, separators=(",", ":")).encode()


PATHS = (
    "webhook, 0 artifacts",
    "webhook, 2 artifacts",
    "registered, then its webhook (2 artifacts)",
    "registered, found by a status poll (2 artifacts)",
    "registered, never found: lost",
    "a duplicate delivery (after processed)",
    "replayed by the ops CLI (2 artifacts)",
    "large event, 300 KiB (body in S3, 2 artifacts)",
)


def _paths(driver: Driver) -> tuple[list[PathRun], PathRun]:
    from devstack.simulator import Sume

    runs: list[PathRun] = []
    with Sume("http://127.0.0.1:9/unused", [d.SECRET], attempts=1) as sume:
        driver.sume = sume
        # Warm every container first: a path is priced warm, the cold start apart.
        warm = sume.new_job()
        with driver.path("warm-up"):
            driver.deliver(warm.body)
            driver.tick()
        with driver.path("an empty round") as empty:
            driver.tick()
        labels = iter(PATHS)

        def path(job: Any, steps: Callable[[], None]) -> None:
            with driver.path(next(labels)) as run:
                steps()
            run.ending = driver.ending(job.job_id)
            runs.append(run)

        bare = sume.new_job()
        path(bare, lambda: driver.deliver(bare.body))
        job = sume.new_job(artifacts=2)
        path(job, lambda: driver.deliver(job.body))
        registered = sume.new_job(artifacts=2)

        def register_then_deliver() -> None:
            driver.register(registered.job_id, registered.status_url)
            driver.deliver(registered.body)

        path(registered, register_then_deliver)
        silent = sume.new_job(artifacts=2)

        def found_by_poll() -> None:
            driver.register(silent.job_id, silent.status_url, due_ago=1)
            driver.tick()

        path(silent, found_by_poll)
        runs[-1].round = empty
        never = sume.new_job()
        # A status URL Sume does not know: the poll fails and, past the job's
        # maximum age, the poller gives it up.
        unknown = never.status_url.replace(never.job_id, "job_unknown")

        def lost() -> None:
            driver.register(never.job_id, unknown, due_ago=1, age=10**7)
            driver.tick()

        path(never, lost)
        runs[-1].round = empty
        path(job, lambda: driver.deliver(job.body))
        path(job, lambda: driver.replay(job.job_id))
        big = sume.new_job(artifacts=2)
        path(big, lambda: driver.deliver(large_body(big.body)))
    driver.sume = None
    return runs, empty


def measure(shards: int = DUE_SHARDS) -> tuple[list[PathRun], PathRun]:
    """Every path on a fresh moto account, and the empty round it subtracted.

    ``shards``: the due index's shard count (``DUE_SHARDS``), each claimed and
    released by every round; the bench prices the deployed one."""
    import boto3
    from moto import mock_aws

    from devstack.resources import create_resources
    from devstack.resources import environment as lambda_env

    counter = CallCounter()
    with mock_aws():
        session = boto3.session.Session()
        names = create_resources(session, prefix="sume-bench", signing_secret=d.SECRET)
        env = lambda_env(names)
        local = {
            Env.ALLOW_HTTP_URLS: "true",
            Env.ALLOW_PRIVATE_HOSTS: "true",
            Env.DUE_SHARDS: str(shards),
        }
        meter = Meter(session.client("dynamodb"))
        runtime.reset()
        with meter.installed(), counter.installed(), environment({**env, **local}):
            driver = Driver(session, env, names, counter, meter, shards)
            found = _paths(driver)
        runtime.reset()
    return found
