"""Section 7, poller capacity: a round fanned out over 1, 4 and 16 parallel runs, each a process.

One moto server (a process of its own) holds the stack's resources anew for each row,
and the same backlog: ``ITEMS`` awaiting jobs, all due, spread over the 16 due-work
shards by their job id as the registry spreads them. Their ``status_url`` is a
loopback server (in the bench's process) that answers ``{"state": "running"}`` after
``DELAY_SECONDS``, so every poll ends in a reschedule and the work waits on Sume, as a
poller's does. Then W processes (``python -m bench.capacity ROUND SHARDS WINDOW``) each
take 16 / W of the shards as one assignment of the round and work it through the real
code (``polling.compose.build_shard_run``: the leases claimed, the shards polled, the
leases freed), started together and given the same polling window, each counting its
own AWS calls.

What bounds the rows here: each run polls at most ``PARALLEL`` / latency jobs a second
(``MAX_PARALLEL_POLLS`` set low so 16 runs fit this machine), and every process shares
2 cores with moto's server, whose ``UpdateItem`` costs milliseconds of its CPU. In AWS
each run has its own CPU share and DynamoDB's cost is not on it.
"""

from __future__ import annotations

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

from bench import harness as h
from devstack.loopback import LoopbackHTTPServer, Served
from sume.core.names import DUE_SHARDS, Env

ITEMS, QUICK_ITEMS = 3_000, 600
RUNS = (1, 4, 16)
DELAY_SECONDS = 1.5
PARALLEL = 2
"""MAX_PARALLEL_POLLS of each run here (32 deployed): 16 runs of 2 polls at 1.5 s are
21 polls/s, what this shared 2-core machine carries beside moto's server."""
WINDOW_SECONDS, QUICK_WINDOW_SECONDS = 20.0, 6.0
POLL_TIMEOUT_SECONDS = 2.0
"""HTTP_TOTAL_TIMEOUT_SECONDS here: a poll's worst case, so a run's reserve, stays short."""
STATUS_PATH = "/status/"


def poll_reserve(settings: Any) -> float:
    """Seconds before a run's end when it starts no poll: one poll's worst case
    (``sume.polling.settings.PollPolicy.poll_reserve_seconds``)."""
    from sume.polling.settings import POLL_FINISH_SECONDS

    return float(settings.total_timeout_seconds) + POLL_FINISH_SECONDS


def keeps_up_with(rate: float, window: float, interval: float, every: float) -> float:
    """The largest backlog of awaiting jobs a schedule of rounds keeps polling on time:
    each round polls for ``window`` seconds at ``rate``, once every ``every`` seconds;
    each job is due once per ``interval``. A backlog of N brings N x every / interval
    polls due per round, so it keeps up while N <= rate x window x interval / every."""
    return rate * window * interval / every


class _StatusHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server: LoopbackHTTPServer

    def do_GET(self) -> None:
        if self.server.stopping.wait(self.server.owner.delay):
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


def seed(ddb: Any, table: str, server: StatusServer, due: int, now: int) -> None:
    """``due`` awaiting jobs, due now, as ``JobsTable.register`` leaves them."""
    from sume.core.names import due_shard
    from sume.store.job import JobAttr, State

    items = []
    for n in range(due):
        job_id = f"job_{n:06d}"
        values = {
            JobAttr.JOB_ID: ("S", job_id),
            JobAttr.STATE: ("S", State.AWAITING.value),
            JobAttr.STATUS_URL: ("S", server.url(job_id)),
            JobAttr.REGISTERED_AT: ("N", now - 60),
            JobAttr.POLL_ATTEMPTS: ("N", 0),
            JobAttr.DUE_SHARD: ("N", due_shard(job_id)),
            JobAttr.DUE_AT: ("N", now - 1),
        }
        items.append({"PutRequest": {"Item": {k: {t: str(v)} for k, (t, v) in values.items()}}})
    for start in range(0, len(items), 25):
        ddb.batch_write_item(RequestItems={table: items[start : start + 25]})


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
    each: list[Run]

    @property
    def polled(self) -> int:
        return sum(run.polled for run in self.each)

    @property
    def calls(self) -> Counter[str]:
        return sum((Counter(run.calls) for run in self.each), Counter())

    @property
    def polled_per_second(self) -> float:
        return self.polled / self.seconds

    @property
    def lease_calls(self) -> int:
        """The leases table's: a claim per shard (``PutItem``), a release per shard won."""
        return self.calls["dynamodb.PutItem"] + sum(len(run.shards) for run in self.each)

    @property
    def calls_per_polled_job(self) -> float:
        dynamodb = sum(n for call, n in self.calls.items() if call.startswith("dynamodb."))
        return dynamodb / max(1, self.polled)

    @property
    def job_calls_per_polled_job(self) -> float:
        """The jobs table's calls (index pages, updates) per polled job, the leases apart."""
        return self.calls_per_polled_job - self.lease_calls / max(1, self.polled)


@dataclass
class CapacityReport:
    parallel: int
    """Deployed ``MAX_PARALLEL_POLLS``."""
    budget: float
    """Seconds a deployed run has: the function's timeout less the handler's margin."""
    window: float
    """Seconds in which a deployed run starts polls: its budget less one poll's worst case."""
    every: int
    """Seconds between scheduled rounds."""
    intervals: tuple[int, int]
    """A job's first and longest poll interval, seconds."""
    rows: list[Row] = field(default_factory=list)

    def growth(self, row: Row) -> float:
        """This row's polls/s over the one-run row's."""
        return row.polled_per_second / self.rows[0].polled_per_second


def _finish(process: Any, timeout: float) -> Run:
    """The run's report; a run that printed none is an error saying why, not a row."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return Run(**h.last_json(done, "a poller run"))


def measure_row(
    endpoint_url: str, runs: int, due: int, window: float, delay: float = DELAY_SECONDS
) -> Row:
    """One round over ``due`` due jobs in ``runs`` processes, each 16 / ``runs`` shards;
    status answers after ``delay`` seconds."""
    import boto3

    from devstack.resources import create_resources, environment
    from sume.polling.fanout import groups

    session = boto3.session.Session()
    with StatusServer(delay) as server:
        names = create_resources(session, prefix=f"cap-{runs}", endpoint_url=endpoint_url)
        now = int(time.time())
        seed(session.client("dynamodb", endpoint_url=endpoint_url), names.table, server, due, now)
        env = {
            **os.environ,
            **environment(names),
            **h.LOCAL_URLS,
            "AWS_ENDPOINT_URL": endpoint_url,
            Env.MAX_PARALLEL_POLLS: str(PARALLEL),
            Env.HTTP_TOTAL_TIMEOUT_SECONDS: str(POLL_TIMEOUT_SECONDS),
            Env.TIME_BUDGET_MARGIN_SECONDS: "0",
        }
        processes = [
            subprocess.Popen(  # noqa: S603 - this interpreter running the bench's own module
                [sys.executable, "-m", "bench.capacity", str(now), json.dumps(group), str(window)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for group in groups(DUE_SHARDS, DUE_SHARDS // runs)
        ]
        for process in processes:
            if process.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                _finish(process, 10)  # raises, with what the run said
        started = time.monotonic()
        for process in processes:
            process.stdin.write("go\n")  # type: ignore[union-attr]
            process.stdin.flush()  # type: ignore[union-attr]
        each = [_finish(process, window + 120) for process in processes]
        return Row(runs, due, window, time.monotonic() - started, each)


def measure(items: int = ITEMS, window: float = WINDOW_SECONDS) -> CapacityReport:
    """A row per count of parallel runs, each over the same backlog."""
    from devstack.servers import spawned
    from infra.spec import DEFAULT_POLL_RATE_MINUTES, POLLER_TIMEOUT
    from sume.polling.settings import PollerSettings

    defaults = PollerSettings.from_env({Env.JOBS_TABLE_NAME: "t", Env.JOBS_QUEUE_URL: "q"})
    budget = POLLER_TIMEOUT - defaults.policy.time_margin_seconds
    report = CapacityReport(
        parallel=defaults.max_parallel_polls,
        budget=budget,
        window=budget - poll_reserve(defaults),
        every=DEFAULT_POLL_RATE_MINUTES * 60,
        intervals=(defaults.policy.initial_seconds, defaults.policy.max_interval_seconds),
    )
    with spawned("moto") as endpoint_url:
        report.rows.extend(measure_row(endpoint_url, runs, items, window) for runs in RUNS)
    return report


def run(round_: int, shards: list[int], window: float) -> None:
    """One run of the round, in this process: ready, wait for go, work, report."""
    from devstack.counting import CallCounter
    from sume.polling.compose import build_shard_run
    from sume.polling.fanout import Assignment
    from sume.polling.settings import FanOutSettings, PollerSettings

    counter = CallCounter()
    with counter.installed():
        settings = PollerSettings.from_env()
        shard_run = build_shard_run(settings, FanOutSettings.from_env())
        print("ready", flush=True)
        sys.stdin.readline()
        started = time.monotonic()
        # What Lambda would report as remaining: polls start for ``window`` seconds.
        ends = started + window + poll_reserve(settings)
        with h.silenced():
            summary = shard_run.work(
                Assignment(round_, tuple(shards)), lambda: ends - time.monotonic()
            )
        seconds = time.monotonic() - started
    found = Run(list(summary.shards), summary.polled, seconds, dict(Counter(counter.take())))
    print(json.dumps(found.__dict__), flush=True)


if __name__ == "__main__":
    run(int(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3]))


def section(ctx: h.Context) -> CapacityReport:
    report = measure(*ctx.pick((ITEMS, WINDOW_SECONDS), (QUICK_ITEMS, QUICK_WINDOW_SECONDS)))
    print(
        "## 7. Poller capacity (a round fanned out over 1, 4 and 16 runs, each a process "
        "working 16 / runs shards through `polling.compose.build_shard_run`; one moto server; "
        f"status URLs answering `running` after {DELAY_SECONDS * 1000:.0f} ms; "
        f"MAX_PARALLEL_POLLS {PARALLEL} a run)\n"
    )
    one = report.rows[0]
    rows = [
        (
            r.runs,
            r.due,
            f"{r.window:.0f}",
            f"{r.seconds:.1f}",
            r.polled,
            f"{r.polled_per_second:.1f}",
            f"{report.growth(r):.1f}",
            r.calls["dynamodb.Query"],
            r.calls["dynamodb.UpdateItem"],
            r.lease_calls,
            f"{r.calls_per_polled_job:.3f}",
            f"{r.job_calls_per_polled_job:.3f}",
        )
        for r in report.rows
    ]
    headers = ["runs", "due", "window s", "ran s", "polled", "polled/s", "x one run", "Query"]
    headers += ["UpdateItem", "lease calls", "DynamoDB calls per polled job"]
    print(h.table([*headers, "jobs table's per polled job"], rows))
    print(
        f"\nEach run polls at most MAX_PARALLEL_POLLS / latency = "
        f"{PARALLEL / DELAY_SECONDS:.2f} jobs/s here.\n"
    )
    for row in report.rows[1:]:
        ctx.targets.add(
            f"poller: {row.runs} parallel runs poll >= 0.7 x {row.runs} x one run's rate",
            f"{report.growth(row):.1f}x ({row.polled_per_second:.1f} vs "
            f"{one.polled_per_second:.1f} polls/s)",
            report.growth(row) >= 0.7 * row.runs,
        )
    worst = max(row.job_calls_per_polled_job for row in report.rows)
    ctx.targets.add(
        "poller: the jobs table's DynamoDB calls per polled job stay about 1.02 (<= 1.05)",
        f"{worst:.3f} at most",
        worst <= 1.05,
    )
    first, last = report.intervals
    per_run = report.parallel / 0.5
    print(
        f"In AWS a round polls about S x P / L jobs/s (S runs, P = `MAX_PARALLEL_POLLS` "
        f"{report.parallel}, L = Sume's answer time, 500 ms here), and a schedule "
        f"keeps up with N <= rate x W x I / R awaiting jobs (W = {report.window:.0f} s of "
        f"polling in a run's budget of {report.budget:.0f} s, R = {report.every} s between "
        f"rounds, I = {first} s for fresh jobs, up to {last} s):\n"
    )
    aws = [
        (
            s,
            f"{s * per_run:,.0f}",
            f"{keeps_up_with(s * per_run, report.window, first, report.every):,.0f}",
            f"{keeps_up_with(s * per_run, report.window, last, report.every):,.0f}",
        )
        for s in (1, DUE_SHARDS, 64)
    ]
    print(h.table(["runs S", "polls/s", f"N at I = {first} s", f"N at I = {last} s"], aws))
    print()
    return report
