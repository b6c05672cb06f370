"""Poller capacity: what one scheduled run polls, and the backlog that keeps up with.

Awaiting jobs are written straight into the jobs table on moto (in-process,
batch writes), spread over the due-work shards by their job id as the
registry spreads them, every one due. Their ``status_url`` is a loopback
server that answers ``{"state": "running"}`` after a fixed delay, so every
poll ends in a reschedule. Then one real run: ``build_poller`` with
the default settings and the deployed time budget (the function's timeout
less the handler's margin), its DynamoDB calls counted on botocore's
``before-call``. The same run over a table with as many again items that are
not due shows whether the calls follow due work or table size.

What these figures are bound by here: the status latency over the parallel
polls, and moto. Each poll's ``UpdateItem`` costs milliseconds of this
process's CPU in moto, and moto's ``Query`` scans the whole table where
DynamoDB reads only the index range, so on a shared 2-core machine the rate
is a floor for what the same run does in AWS.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from devstack.loopback import LoopbackHTTPServer, Served
from sume.core.names import Env

ITEMS = 10_000
QUICK_ITEMS = 2_000
DELAYS_SECONDS = (0.05, 0.5)
QUICK_POLL_WINDOW_SECONDS = 10.0
"""--quick: the run's polling window (the budget less the poll reserve)."""
STATUS_PATH = "/status/"


def poll_reserve(settings: Any) -> float:
    """Seconds before a run's end when it starts no poll: one poll's worst case
    (``sume.polling.settings.PollPolicy.poll_reserve_seconds``)."""
    from sume.polling.settings import POLL_FINISH_SECONDS

    return float(settings.total_timeout_seconds) + POLL_FINISH_SECONDS


def keeps_up_with(
    polled_per_second: float, window_seconds: float, interval_seconds: float, every_seconds: float
) -> float:
    """The largest backlog of awaiting jobs a schedule of runs keeps polling on time.

    Each run polls for ``window_seconds``, at ``polled_per_second``, once
    every ``every_seconds``; each job is due once per ``interval_seconds``. A
    backlog of N brings N x every / interval polls due per run, so it keeps
    up while N <= rate x window x interval / every.
    """
    return polled_per_second * window_seconds * interval_seconds / every_seconds


class _StatusHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server: LoopbackHTTPServer

    def do_GET(self) -> None:
        owner: StatusServer = self.server.owner
        if self.server.stopping.wait(owner.delay):
            return
        job_id = unquote(self.path.removeprefix(STATUS_PATH))
        body = json.dumps({"job_id": job_id, "state": "running"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class StatusServer(Served):
    """Sume's status URLs for every job: "running", after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.http = LoopbackHTTPServer(_StatusHandler, self)

    def url(self, job_id: str) -> str:
        return self.http.url(STATUS_PATH + job_id)


@dataclass(frozen=True)
class PollerRun:
    delay: float
    due: int
    in_table: int
    budget: float
    """Seconds the run was given (its ``time_left`` at the start)."""
    window: float
    """Seconds in which it could start polls (budget less the poll reserve)."""
    seconds: float
    polled: int
    remaining: int
    complete: bool
    calls: Counter[str]

    @property
    def polled_per_second(self) -> float:
        return self.polled / self.seconds

    @property
    def dynamodb_calls(self) -> int:
        return sum(n for call, n in self.calls.items() if call.startswith("dynamodb."))

    @property
    def calls_per_polled_job(self) -> float:
        return self.dynamodb_calls / max(1, self.polled)


@dataclass
class CapacityReport:
    budget: float
    """Seconds a deployed run has: the function's timeout less the handler's margin."""
    reserve: float
    """Seconds before the end of the budget when no poll is started any more."""
    every: int
    """Seconds between scheduled runs."""
    intervals: tuple[int, int]
    """A job's first and longest poll interval, seconds."""
    parallel: int
    runs: list[PollerRun] = field(default_factory=list)

    @property
    def window(self) -> float:
        """Seconds in which a deployed run starts polls."""
        return self.budget - self.reserve

    def backlog(self, run: PollerRun, interval: int) -> float:
        return keeps_up_with(run.polled_per_second, self.window, interval, self.every)


def _item(job_id: str, status_url: str, now: int, due_at: int | None) -> dict[str, Any]:
    """An awaiting job as ``JobsTable.register`` leaves it; finished when ``due_at`` is None."""
    from sume.core.names import due_shard
    from sume.store.jobs import JobAttr, State

    state = State.PROCESSED if due_at is None else State.AWAITING
    item: dict[str, Any] = {
        JobAttr.JOB_ID: {"S": job_id},
        JobAttr.STATE: {"S": state.value},
        JobAttr.STATUS_URL: {"S": status_url},
        JobAttr.REGISTERED_AT: {"N": str(now - 60)},
        JobAttr.POLL_ATTEMPTS: {"N": "0"},
    }
    if due_at is not None:
        item[JobAttr.DUE_SHARD] = {"N": str(due_shard(job_id))}
        item[JobAttr.DUE_AT] = {"N": str(due_at)}
    return item


def seed(ddb: Any, table: str, server: StatusServer, due: int, not_due: int, now: int) -> None:
    """``due`` awaiting jobs due now; ``not_due`` more, half finished, half due in an hour."""
    items = []
    for n in range(due + not_due):
        job_id = f"job_{n:06d}"
        when = now - 1 if n < due else (None if n % 2 else now + 3600)
        items.append(_item(job_id, server.url(job_id), now, when))
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        ddb.batch_write_item(RequestItems={table: batch})


def run_once(delay: float, due: int, not_due: int, window: float | None = None) -> PollerRun:
    """One poller run over ``due`` due jobs (and ``not_due`` others), status after ``delay``."""
    import boto3
    from moto import mock_aws

    from bench.counting import CallCounter
    from bench.env import environment
    from bench.runtime import silenced
    from devstack import moto_atomic
    from devstack.resources import create_resources
    from devstack.resources import environment as lambda_env
    from infra.spec import POLLER_TIMEOUT
    from sume.core import runtime
    from sume.polling.compose import build_poller
    from sume.polling.settings import PollerSettings

    moto_atomic.install()
    counter = CallCounter()
    with mock_aws(), counter.installed(), StatusServer(delay) as server:
        session = boto3.session.Session()
        names = create_resources(session, prefix="sume-bench")
        seed(session.client("dynamodb"), names.table, server, due, not_due, int(time.time()))
        local = {Env.ALLOW_HTTP_URLS: "true", Env.ALLOW_PRIVATE_HOSTS: "true"}
        with environment({**lambda_env(names), **local}):
            runtime.reset()
            settings = PollerSettings.from_env()
            run = build_poller(settings)
            reserve = poll_reserve(settings)
            margin = settings.policy.time_margin_seconds
            budget: float = POLLER_TIMEOUT - margin
            if window is not None:
                budget = min(budget, window + reserve)
            counter.take()
            started = time.monotonic()
            # What Lambda would report as remaining: the run keeps the margin back.
            invocation_ends = started + budget + margin
            with silenced():
                summary = run.run(lambda: invocation_ends - time.monotonic())
            seconds = time.monotonic() - started
            calls = Counter(counter.take())
        runtime.reset()
    return PollerRun(
        delay=delay,
        due=due,
        in_table=due + not_due,
        budget=budget,
        window=budget - reserve,
        seconds=seconds,
        polled=summary.polled,
        remaining=summary.remaining,
        complete=summary.complete,
        calls=calls,
    )


def measure(items: int = ITEMS, window: float | None = None) -> CapacityReport:
    """Runs at each delay over ``items`` due jobs, and the first again over a table twice as big."""
    from infra.spec import DEFAULT_POLL_RATE_MINUTES, POLLER_TIMEOUT
    from sume.polling.settings import PollerSettings

    defaults = PollerSettings.from_env({Env.JOBS_TABLE_NAME: "t", Env.JOBS_QUEUE_URL: "q"})
    report = CapacityReport(
        budget=POLLER_TIMEOUT - defaults.policy.time_margin_seconds,
        reserve=poll_reserve(defaults),
        every=DEFAULT_POLL_RATE_MINUTES * 60,
        intervals=(defaults.policy.initial_seconds, defaults.policy.max_interval_seconds),
        parallel=defaults.max_parallel_polls,
    )
    first, *others = DELAYS_SECONDS
    report.runs.append(run_once(first, items, 0, window))
    report.runs.append(run_once(first, items, items, window))
    report.runs.extend(run_once(delay, items, 0, window) for delay in others)
    return report
