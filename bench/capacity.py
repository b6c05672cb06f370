"""Section 7, poller capacity: a round fanned out over 1, 4 and 16 parallel runs, each a process.

Each row has the stack's resources anew and the same backlog, ``ITEMS`` awaiting jobs, all due,
spread over the shards as the registry spreads them: every poll waits on Sume and ends in a
reschedule, as a poller's does. The runs (``python -m bench.capacity ROUND SHARDS WINDOW``)
start together, each ready then all told to go, and count their own AWS calls.

What bounds the rows here: each run polls at most ``PARALLEL`` / latency jobs a second, and
every process shares 2 cores with moto's server, whose ``UpdateItem`` costs milliseconds of
its CPU. In AWS each run has its own CPU share and DynamoDB's cost is not on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import boto3

from bench import harness as h
from devstack.counting import CallCounter
from devstack.resources import create_resources, environment
from devstack.servers import spawned
from devstack.simulator import Sume
from infra.spec import DEFAULT_POLL_RATE_MINUTES, POLLER_TIMEOUT
from sume.core.names import DUE_SHARDS, Env, due_shard
from sume.polling.compose import build_shard_run
from sume.polling.fanout import Assignment, groups
from sume.polling.settings import FanOutSettings, PollerSettings
from sume.store.job import JobAttr, State

ITEMS, QUICK_ITEMS = 3_000, 600
DELAY_SECONDS = 1.5
PARALLEL = 2
"""MAX_PARALLEL_POLLS of each run here (32 deployed): 16 runs of 2 polls at 1.5 s are
21 polls/s, what this shared 2-core machine carries beside moto's server."""
WINDOW_SECONDS, QUICK_WINDOW_SECONDS = 20.0, 6.0
POLL_TIMEOUT_SECONDS = 2.0
"""HTTP_TOTAL_TIMEOUT_SECONDS here: a poll's worst case, so a run's reserve, stays short."""


def keeps_up_with(rate: float, window: float, interval: float, every: float) -> float:
    """The largest backlog a schedule keeps polling on time: a round polls for ``window`` s at
    ``rate`` every ``every`` s, and each job is due once per ``interval``; N jobs bring N x every
    / interval polls due a round, so it keeps up while N <= rate x window x interval / every."""
    return rate * window * interval / every


@dataclass(frozen=True)
class Row:
    runs: int
    seconds: float  # from the common start to the last run's end
    polled: int
    calls: Counter[str]
    shards: list[int]  # the shards the runs won (so claimed and released)

    @property
    def polled_per_second(self) -> float:
        return self.polled / self.seconds

    @property
    def lease_calls(self) -> int:
        """The leases table's: a claim per shard (``PutItem``), a release per shard won."""
        return self.calls["dynamodb.PutItem"] + len(self.shards)

    @property
    def calls_per_polled_job(self) -> float:
        return self.calls.total() / max(1, self.polled)  # DynamoDB's: the runs call nothing else

    @property
    def job_calls_per_polled_job(self) -> float:
        """The jobs table's calls (index pages, updates) per polled job, the leases apart."""
        return self.calls_per_polled_job - self.lease_calls / max(1, self.polled)

    def growth(self, one: Row) -> float:
        return self.polled_per_second / one.polled_per_second


def _finish(process: Any, timeout: float) -> dict[str, Any]:
    """The run's report; a run that printed none is an error saying why, not a row."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return h.last_json(done, "a poller run")


def measure_row(
    endpoint_url: str, runs: int, due: int, window: float, delay: float = DELAY_SECONDS
) -> Row:
    """One round over ``due`` due jobs in ``runs`` processes of 16 / ``runs`` shards each."""
    session = boto3.session.Session()
    # Sume delivers nothing here (no webhook URL is called): it only answers status URLs.
    with Sume("http://127.0.0.1:9/unused", ["unused"]) as sume:
        names = create_resources(session, prefix=f"cap-{runs}", endpoint_url=endpoint_url)
        now = int(time.time())
        table = session.resource("dynamodb", endpoint_url=endpoint_url).Table(names.table)
        # ``due`` awaiting jobs, due now, as ``JobsTable.register`` leaves them.
        with table.batch_writer() as batch:
            for n in range(due):
                job = sume.new_job(job_id=f"job_{n:06d}", finished=False, slow_seconds=delay)
                batch.put_item(
                    Item={
                        JobAttr.JOB_ID: job.job_id,
                        JobAttr.STATE: State.AWAITING.value,
                        JobAttr.STATUS_URL: job.status_url,
                        JobAttr.REGISTERED_AT: now - 60,
                        JobAttr.POLL_ATTEMPTS: 0,
                        JobAttr.DUE_SHARD: due_shard(job.job_id),
                        JobAttr.DUE_AT: now - 1,
                    }
                )
        env = {**os.environ, **environment(names), **h.LOCAL_URLS, "AWS_ENDPOINT_URL": endpoint_url}
        env[Env.MAX_PARALLEL_POLLS] = str(PARALLEL)
        env[Env.HTTP_TOTAL_TIMEOUT_SECONDS] = str(POLL_TIMEOUT_SECONDS)
        env[Env.TIME_BUDGET_MARGIN_SECONDS] = "0"
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
        seconds = time.monotonic() - started
    calls = sum((Counter(run["calls"]) for run in each), Counter())
    shards = sorted(shard for run in each for shard in run["shards"])
    return Row(runs, seconds, sum(run["polled"] for run in each), calls, shards)


def section(ctx: h.Context) -> None:
    items, window = ctx.pick((ITEMS, WINDOW_SECONDS), (QUICK_ITEMS, QUICK_WINDOW_SECONDS))
    with spawned("moto") as endpoint_url:  # one server, a row per count of parallel runs
        found = [measure_row(endpoint_url, runs, items, window) for runs in (1, 4, 16)]
    print(
        "## 7. Poller capacity (a round fanned out over 1, 4 and 16 runs, each a process "
        "working 16 / runs shards through `polling.compose.build_shard_run`; one moto server; "
        f"status URLs answering `running` after {DELAY_SECONDS * 1000:.0f} ms; "
        f"MAX_PARALLEL_POLLS {PARALLEL} a run)\n"
    )
    one = found[0]
    rows: list[tuple[object, ...]] = []
    for r in found:
        ran = (r.runs, items, f"{window:.0f}", f"{r.seconds:.1f}", r.polled)
        rates = (f"{r.polled_per_second:.1f}", f"{r.growth(one):.1f}")
        calls = (r.calls["dynamodb.Query"], r.calls["dynamodb.UpdateItem"], r.lease_calls)
        per_job = (f"{r.calls_per_polled_job:.3f}", f"{r.job_calls_per_polled_job:.3f}")
        rows.append((*ran, *rates, *calls, *per_job))
    headers = ["runs", "due", "window s", "ran s", "polled", "polled/s", "x one run", "Query"]
    headers += ["UpdateItem", "lease calls", "DynamoDB calls per polled job"]
    print(h.table([*headers, "jobs table's per polled job"], rows))
    most = PARALLEL / DELAY_SECONDS
    print(f"\nEach run polls at most MAX_PARALLEL_POLLS / latency = {most:.2f} jobs/s here.\n")
    for row in found[1:]:
        target = f"poller: {row.runs} parallel runs poll >= 0.7 x {row.runs} x one run's rate"
        versus = f"({row.polled_per_second:.1f} vs {one.polled_per_second:.1f} polls/s)"
        growth = row.growth(one)
        ctx.targets.add(target, f"{growth:.1f}x {versus}", growth >= 0.7 * row.runs)
    worst = max(row.job_calls_per_polled_job for row in found)
    target = "poller: the jobs table's DynamoDB calls per polled job stay about 1.02 (<= 1.05)"
    ctx.targets.add(target, f"{worst:.3f} at most", worst <= 1.05)
    # The deployed poller's: its polls at once, its budget and the polling window in it.
    deployed = PollerSettings.from_env({Env.JOBS_TABLE_NAME: "t", Env.JOBS_QUEUE_URL: "q"})
    policy, every = deployed.policy, DEFAULT_POLL_RATE_MINUTES * 60
    first, last = policy.initial_seconds, policy.max_interval_seconds
    budget = POLLER_TIMEOUT - policy.time_margin_seconds
    polling = budget - policy.poll_reserve_seconds
    per_run = deployed.max_parallel_polls / 0.5
    print(
        f"In AWS a round polls about S x P / L jobs/s (S runs, P = `MAX_PARALLEL_POLLS` "
        f"{deployed.max_parallel_polls}, L = Sume's answer time, 500 ms here), and a schedule "
        f"keeps up with N <= rate x W x I / R awaiting jobs (W = {polling:.0f} s of "
        f"polling in a run's budget of {budget:.0f} s, R = {every} s between "
        f"rounds, I = {first} s for fresh jobs, up to {last} s):\n"
    )
    aws = []
    for runs in (1, DUE_SHARDS, 64):
        rate = runs * per_run
        backlogs = (keeps_up_with(rate, polling, interval, every) for interval in (first, last))
        aws.append((runs, f"{rate:,.0f}", *(f"{n:,.0f}" for n in backlogs)))
    print(h.table(["runs S", "polls/s", f"N at I = {first} s", f"N at I = {last} s"], aws))
    print()


if __name__ == "__main__":  # one run of the round: ready, wait for go, work, report
    assignment = Assignment(int(sys.argv[1]), tuple(json.loads(sys.argv[2])))
    counter = CallCounter()
    with counter.installed():
        settings = PollerSettings.from_env()
        shard_run = build_shard_run(settings, FanOutSettings.from_env())
        print("ready", flush=True)
        sys.stdin.readline()
        # What Lambda would report as remaining: polls start for WINDOW seconds.
        ends = time.monotonic() + float(sys.argv[3]) + settings.policy.poll_reserve_seconds
        with h.silenced():
            summary = shard_run.work(assignment, lambda: ends - time.monotonic())
    print(json.dumps({"shards": summary.shards, "polled": summary.polled, "calls": counter.take()}))
