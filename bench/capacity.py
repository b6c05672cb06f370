"""Poller capacity: a round fanned out over 1, 4 and 16 parallel runs, each a process.

One moto server (a process of its own) holds the stack's resources anew for
each row, and the same backlog: ``ITEMS`` awaiting jobs, all due, spread
over the 16 due-work shards by their job id as the registry spreads them.
Their ``status_url`` is a loopback server (in the bench's process) that
answers ``{"state": "running"}`` after ``DELAY_SECONDS``, so every poll ends
in a reschedule and the work waits on Sume, as a poller's does. Then W
processes (``python -m bench.capacity run``) each take 16 / W of the shards
as one assignment of the round and work it through the real code
(``polling.compose.build_shard_run``: the leases claimed, the shards
polled, the leases freed), started together and given the same polling
window. Each counts its own AWS calls on botocore's ``before-call``.

What bounds the rows here: each run polls at most ``PARALLEL`` / latency
jobs a second (``MAX_PARALLEL_POLLS`` set low so 16 runs fit this machine),
and every process shares 2 cores with moto's server, whose ``UpdateItem``
costs milliseconds of its CPU. In AWS each run has its own CPU share and
DynamoDB's cost is not on it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from bench.report import Targets, table
from devstack.loopback import LoopbackHTTPServer, Served
from sume.core.names import DUE_SHARDS, Env

ITEMS = 3_000
QUICK_ITEMS = 600
RUNS = (1, 4, 16)
DELAY_SECONDS = 1.5
PARALLEL = 2
"""MAX_PARALLEL_POLLS of each run here (32 deployed): 16 runs of 2 polls at 1.5 s are
21 polls/s, what this shared 2-core machine carries beside moto's server."""
WINDOW_SECONDS = 20.0
QUICK_WINDOW_SECONDS = 6.0
POLL_TIMEOUT_SECONDS = 2.0
"""HTTP_TOTAL_TIMEOUT_SECONDS here: a poll's worst case, so a run's reserve, stays short."""
STATUS_PATH = "/status/"


def poll_reserve(settings: Any) -> float:
    """Seconds before a run's end when it starts no poll: one poll's worst case
    (``sume.polling.settings.PollPolicy.poll_reserve_seconds``)."""
    from sume.polling.settings import POLL_FINISH_SECONDS

    return float(settings.total_timeout_seconds) + POLL_FINISH_SECONDS


def keeps_up_with(
    polled_per_second: float, window_seconds: float, interval_seconds: float, every_seconds: float
) -> float:
    """The largest backlog of awaiting jobs a schedule of rounds keeps polling on time.

    Each round polls for ``window_seconds``, at ``polled_per_second``, once
    every ``every_seconds``; each job is due once per ``interval_seconds``. A
    backlog of N brings N x every / interval polls due per round, so it keeps
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


def _item(job_id: str, status_url: str, now: int, due_at: int | None) -> dict[str, Any]:
    """An awaiting job as ``JobsTable.register`` leaves it; finished when ``due_at`` is None."""
    from sume.core.names import due_shard
    from sume.store.job import JobAttr, State

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


def run_environment(names: Any, endpoint_url: str) -> dict[str, str]:
    """A poller run's Lambda environment, its AWS calls going to moto's server."""
    from devstack.resources import environment

    return {
        **environment(names),
        "AWS_ENDPOINT_URL": endpoint_url,
        Env.ALLOW_HTTP_URLS: "true",
        Env.ALLOW_PRIVATE_HOSTS: "true",
        Env.MAX_PARALLEL_POLLS: str(PARALLEL),
        Env.HTTP_TOTAL_TIMEOUT_SECONDS: str(POLL_TIMEOUT_SECONDS),
        Env.TIME_BUDGET_MARGIN_SECONDS: "0",
    }


@dataclass(frozen=True)
class Run:
    """What one run's process reports."""

    shards: list[int]
    polled: int
    seconds: float
    calls: dict[str, int]


@dataclass(frozen=True)
class Row:
    runs: int
    due: int
    window: float
    seconds: float
    """From the common start to the last run's end."""
    polled: int
    calls: Counter[str]
    each: list[Run] = field(default_factory=list)

    @property
    def polled_per_second(self) -> float:
        return self.polled / self.seconds

    @property
    def dynamodb_calls(self) -> int:
        return sum(n for call, n in self.calls.items() if call.startswith("dynamodb."))

    @property
    def lease_calls(self) -> int:
        """The leases table's: a claim per shard (``PutItem``), a release per shard won."""
        claims = self.calls["dynamodb.PutItem"]
        return claims + sum(len(run.shards) for run in self.each)

    @property
    def calls_per_polled_job(self) -> float:
        return self.dynamodb_calls / max(1, self.polled)

    @property
    def job_calls_per_polled_job(self) -> float:
        """The jobs table's calls (index pages, updates) per polled job, the leases apart."""
        return (self.dynamodb_calls - self.lease_calls) / max(1, self.polled)


@dataclass
class CapacityReport:
    delay: float
    parallel: int
    deployed_parallel: int
    budget: float
    """Seconds a deployed run has: the function's timeout less the handler's margin."""
    reserve: float
    """Seconds before the end of the budget when a deployed run starts no poll."""
    every: int
    """Seconds between scheduled rounds."""
    intervals: tuple[int, int]
    """A job's first and longest poll interval, seconds."""
    rows: list[Row] = field(default_factory=list)

    @property
    def window(self) -> float:
        """Seconds in which a deployed run starts polls."""
        return self.budget - self.reserve

    def backlog(self, polled_per_second: float, interval: int) -> float:
        """The backlog a deployed schedule keeps up with at this rate and interval."""
        return keeps_up_with(polled_per_second, self.window, interval, self.every)

    def growth(self, row: Row) -> float:
        """This row's polls/s over the one-run row's."""
        return row.polled_per_second / self.rows[0].polled_per_second


def _spawn(env: dict[str, str], round_: int, shards: list[int], window: float) -> Any:
    return subprocess.Popen(  # noqa: S603 - this interpreter running the bench's own module
        [
            sys.executable,
            "-m",
            "bench.capacity",
            "run",
            "--round",
            str(round_),
            "--shards",
            ",".join(map(str, shards)),
            "--window",
            str(window),
        ],
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def measure_row(
    endpoint_url: str, runs: int, due: int, window: float, delay: float = DELAY_SECONDS
) -> Row:
    """One round over ``due`` due jobs in ``runs`` processes, each 16 / ``runs`` shards;
    status answers after ``delay`` seconds."""
    import boto3

    from devstack.resources import create_resources
    from sume.polling.fanout import groups

    session = boto3.session.Session()
    with StatusServer(delay) as server:
        names = create_resources(session, prefix=f"cap-{runs}", endpoint_url=endpoint_url)
        ddb = session.client("dynamodb", endpoint_url=endpoint_url)
        now = int(time.time())
        seed(ddb, names.table, server, due, 0, now)
        env = run_environment(names, endpoint_url)
        processes = [
            _spawn(env, now, list(group), window)
            for group in groups(DUE_SHARDS, DUE_SHARDS // runs)
        ]
        for process in processes:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a poller run did not start (exit code {process.poll()})")
        started = time.monotonic()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        each = []
        for process in processes:
            out, _ = process.communicate(timeout=window + 120)
            each.append(Run(**json.loads(out.strip().splitlines()[-1])))
        seconds = time.monotonic() - started
    calls: Counter[str] = Counter()
    for run in each:
        calls.update(run.calls)
    return Row(
        runs=runs,
        due=due,
        window=window,
        seconds=seconds,
        polled=sum(run.polled for run in each),
        calls=calls,
        each=each,
    )


def measure(items: int = ITEMS, window: float = WINDOW_SECONDS) -> CapacityReport:
    """A row per count of parallel runs, each over the same backlog."""
    from bench.servers import spawned
    from infra.spec import DEFAULT_POLL_RATE_MINUTES, POLLER_TIMEOUT
    from sume.polling.settings import PollerSettings

    defaults = PollerSettings.from_env({Env.JOBS_TABLE_NAME: "t", Env.JOBS_QUEUE_URL: "q"})
    report = CapacityReport(
        delay=DELAY_SECONDS,
        parallel=PARALLEL,
        deployed_parallel=defaults.max_parallel_polls,
        budget=POLLER_TIMEOUT - defaults.policy.time_margin_seconds,
        reserve=poll_reserve(defaults),
        every=DEFAULT_POLL_RATE_MINUTES * 60,
        intervals=(defaults.policy.initial_seconds, defaults.policy.max_interval_seconds),
    )
    with spawned("moto") as endpoint_url:
        report.rows.extend(measure_row(endpoint_url, runs, items, window) for runs in RUNS)
    return report


def _run(args: argparse.Namespace) -> None:
    """One run of the round, in this process: ready, wait for go, work, report."""
    from bench.counting import CallCounter
    from bench.runtime import silenced
    from sume.polling.compose import build_shard_run
    from sume.polling.fanout import Assignment
    from sume.polling.settings import FanOutSettings, PollerSettings

    counter = CallCounter()
    with counter.installed():
        settings = PollerSettings.from_env()
        run = build_shard_run(settings, FanOutSettings.from_env())
        shards = [int(s) for s in args.shards.split(",")]
        assignment = Assignment(args.round, tuple(shards))
        print("ready", flush=True)
        sys.stdin.readline()
        started = time.monotonic()
        # What Lambda would report as remaining: polls start for ``window`` seconds.
        ends = started + args.window + poll_reserve(settings)
        with silenced():
            summary = run.work(assignment, lambda: ends - time.monotonic())
        seconds = time.monotonic() - started
    report = Run(list(summary.shards), summary.polled, seconds, dict(Counter(counter.take())))
    print(json.dumps(report.__dict__), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity")
    kinds = parser.add_subparsers(required=True)
    run = kinds.add_parser("run", help="one poller run of a round (the bench starts these)")
    run.add_argument("--round", type=int, required=True)
    run.add_argument("--shards", required=True, help="comma-separated shard numbers")
    run.add_argument("--window", type=float, required=True, help="seconds to start polls in")
    run.set_defaults(serve=_run)
    args = parser.parse_args(argv)
    args.serve(args)


if __name__ == "__main__":
    main()


def render(report: CapacityReport, targets: Targets) -> None:
    print(
        "## 7. Poller capacity (a round fanned out: 1, 4 and 16 runs, each a process working "
        "16 / runs shards through `polling.compose.build_shard_run`; one moto server; status "
        f"URLs on loopback answering `running` after {report.delay * 1000:.0f} ms, so every "
        f"poll reschedules; MAX_PARALLEL_POLLS {report.parallel} a run)\n"
    )
    one = report.rows[0]
    print(
        table(
            [
                "runs",
                "due",
                "window s",
                "ran s",
                "polled",
                "polled/s",
                "x one run",
                "Query",
                "UpdateItem",
                "lease calls",
                "DynamoDB calls per polled job",
                "jobs table's per polled job",
            ],
            [
                (
                    row.runs,
                    row.due,
                    f"{row.window:.0f}",
                    f"{row.seconds:.1f}",
                    row.polled,
                    f"{row.polled_per_second:.1f}",
                    f"{report.growth(row):.1f}",
                    row.calls["dynamodb.Query"],
                    row.calls["dynamodb.UpdateItem"],
                    row.lease_calls,
                    f"{row.calls_per_polled_job:.3f}",
                    f"{row.job_calls_per_polled_job:.3f}",
                )
                for row in report.rows
            ],
        )
    )
    bound = report.parallel / report.delay
    print(
        f"\nEach run polls at most MAX_PARALLEL_POLLS / latency = {bound:.2f} jobs/s here. "
        "Lease calls are a claim (`PutItem`) and a release (`UpdateItem`) per shard per round, "
        "whatever the backlog; the jobs table's calls are an `UpdateItem` per poll and a "
        "`Query` per page of 50. Every process shares this machine's 2 cores with moto's "
        "server, so the last row is bound by CPU, not by the design.\n"
    )
    for row in report.rows[1:]:
        targets.add(
            f"poller: {row.runs} parallel runs poll >= 0.7 x {row.runs} x one run's rate",
            f"{report.growth(row):.1f}x ({row.polled_per_second:.1f} vs "
            f"{one.polled_per_second:.1f} polls/s)",
            report.growth(row) >= 0.7 * row.runs,
        )
    worst = max(row.job_calls_per_polled_job for row in report.rows)
    targets.add(
        "poller: the jobs table's DynamoDB calls per polled job stay about 1.02 (<= 1.05)",
        f"{worst:.3f} at most",
        worst <= 1.05,
    )
    first, last = report.intervals
    runs_deployed = DUE_SHARDS
    per_run = report.deployed_parallel / 0.5
    aws_rate = runs_deployed * per_run
    print(
        "In AWS a round polls about S x P / L jobs a second: S parallel runs (one per shard "
        f"group: {runs_deployed} at the default `due_shards` {DUE_SHARDS} and "
        "`poller_shards_per_run` 1), P = `MAX_PARALLEL_POLLS` "
        f"({report.deployed_parallel}) and L Sume's answer time, as long as each run's CPU "
        "share carries P / L (about 64 polls/s at 512 MB, docs/poller.md). Each run has its own "
        "invocation, CPU and deadline, so the rows above grow with S until this machine's "
        f"cores are used up. At L = 500 ms: {runs_deployed} x {report.deployed_parallel} / "
        f"0.5 = {aws_rate:,.0f} polls/s. A schedule keeps up with N <= rate x W x I / R "
        f"outstanding jobs: W = {report.window:.0f} s in which a run starts polls (budget "
        f"{report.budget:.0f} s, the function's timeout less the handler's margin, less one "
        f"poll's worst case of {report.reserve:.0f} s), R = {report.every} s between rounds, "
        f"I the interval at which each job is due: {first} s for fresh jobs, up to {last} s.\n"
    )
    print(
        table(
            ["runs S", "polls/s (S x P / L)", f"N at I = {first} s", f"N at I = {last} s"],
            [
                (
                    runs,
                    f"{runs * per_run:,.0f}",
                    f"{report.backlog(runs * per_run, first):,.0f}",
                    f"{report.backlog(runs * per_run, last):,.0f}",
                )
                for runs in (1, 16, 64)
            ],
        )
    )
    print()
