"""The capacity arithmetic every stage is sized by (docs/operations.md, "Capacity plan").

Plain Python, no CDK: the settings are checked before the CDK starts. Three
parts: Sume's arrival model (stated here: Sume's contract is not in this
repository), the figures ``make bench`` measures, and AWS's quotas; then the
plan, which derives every setting from ``sume_peak_jobs_per_second`` and finds
the peak at which the first quota (or fixed limit) binds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

# --- Sume's arrival model --------------------------------------------------------
# Sume finishes at most `sume_peak_jobs_per_second` (N) jobs a second for us and
# sends each job's end once, retrying any non-2xx (or no answer in 10 s) up to
# SUME_MAX_ATTEMPTS times at a fixed spacing (SUME_RETRY_SPACING_SECONDS, as
# this project assumes it). The worst legitimate load follows an outage longer
# than that retry window: each job finished in the window is being retried, one
# attempt per job per spacing, so every second brings one attempt for each of
# the jobs that finished 0, 1, ..., 9 spacings before it: 10 N distinct jobs a
# second, for as long as the outage's backlog lasts. The attempts are spread
# as the jobs' ends were (the spacing is fixed, so retries do not bunch up at
# the recovery), and any attempt may arrive twice at once (CONCURRENT_COPIES):
# 20 N requests a second, arriving independently (Poisson) within the second.
# The throttle must admit that, or our own 429s use up Sume's attempts; it adds
# a quarter of headroom and twice the rate as burst: 2 jobs/s -> 40 requests/s
# -> rate 50, burst 100. Junk held at that rate costs about 5 USD a day (1.21
# USD per million rejected requests, API Gateway included: bench section 5).
SUME_MAX_ATTEMPTS: Final = 10
SUME_RETRY_SPACING_SECONDS: Final = 60
CONCURRENT_COPIES: Final = 2
THROTTLE_HEADROOM: Final = 1.25
DEFAULT_PEAK_JOBS_PER_SECOND: Final = 2
# The highest peak the settings accept (and the plan searches up to).
MAX_PEAK_JOBS_PER_SECOND: Final = 1_000_000

# --- What `make bench` measures ---------------------------------------------------
# A warm delivery's billed duration at the receiver's 512 MB, new or duplicate
# (the worst case is half of each: a new job and its twin). Bench section 9
# ("Cost per million jobs, end to end, per path", `make bench ARGS="--only
# jobs"`) bills a new delivery 33-50 ms and a duplicate 84-150 ms across runs
# (its per-call latency model included); the plan takes the slower, rounded up.
RECEIVER_WARM_SECONDS: Final = 0.1
# A new receiver container restores from its SnapStart snapshot, then builds
# its clients and reads the signing secret on its first delivery. Bench section
# 3 ("Cold start against an honest floor", `--only cold`, the "as restored by
# SnapStart" line) measures that first use at 121 CPU ms on a full core: at 512
# MB Lambda gives 512 / 1769 of a vCPU, so about 0.42 s.
RECEIVER_FIRST_USE_CPU_SECONDS: Final = 0.121
LAMBDA_MB_PER_VCPU: Final = 1769
RECEIVER_MEMORY_MB: Final = 512
# The snapshot's restore itself is not measured here (AWS reports it per new
# container as `Restore Duration` in its REPORT line); planned at 0.3 s. Read
# the REPORT lines after a deploy and change this if they say more.
SNAPSTART_RESTORE_SECONDS: Final = 0.3
RECEIVER_COLD_SECONDS: Final = SNAPSTART_RESTORE_SECONDS + (
    RECEIVER_FIRST_USE_CPU_SECONDS * LAMBDA_MB_PER_VCPU / RECEIVER_MEMORY_MB
)
# A job's follow-up work at the worker's 1024 MB: bench section 9 bills 358-441
# ms for a job with two small artifacts (its calls and CPU); the artifacts' own
# bytes then dominate. Planned at 5 s a job: 100 MB of artifacts at the
# worker's planned copy rate of 20 MB/s (ARTIFACT_PLANNED_BYTES_PER_SECOND, the
# slowest copy planned for; bench section 6 measures 56-86 MB/s), which leaves
# the measured rest well inside the copy's margin.
WORKER_WARM_SECONDS_PER_JOB: Final = 0.45
WORKER_PLANNED_SECONDS_PER_JOB: Final = 5
# A registration is one conditional write (5 ms in the bench's model) and its
# logs: planned at 0.1 s.
REGISTRATION_PLANNED_SECONDS: Final = 0.1
# Write units the jobs table (and its due-work index) must take at once, from
# `make bench`'s call counts (bench section 1, "AWS calls per delivery"). Every
# request the throttle admits writes at most twice (a duplicate: the failed
# conditional write, then the counter update; a new job once), on an item
# under 1 KB (the bench's: 615 B), one unit each. Each job then costs the
# worker WORKER_WRITES_PER_JOB writes (claim, one per artifact, finish: the
# bench's job.completed with 2 artifacts), at up to 2 units once its artifact
# records take the item past 1 KB (about 1.5 KB for that job), at Sume's
# rate after an outage, SUME_MAX_ATTEMPTS jobs a second per peak job. The
# index sees no more than the throttle's rate plus 5 writes of 2 units a job
# (a failed conditional write does not reach it; a new due time is a delete
# and a put).
RECEIVER_WRITES_PER_REQUEST: Final = 2
WORKER_WRITES_PER_JOB: Final = 4
UNITS_PER_WORKER_WRITE: Final = 2
INDEX_WRITES_PER_JOB: Final = 5
# One announcement (PutEvents) per job, by the worker (a lost job's by the poller).
PUT_EVENTS_PER_JOB: Final = 1

# --- AWS's quotas and fixed limits ------------------------------------------------
# Busy receivers are Poisson-distributed around their mean (independent
# arrivals, any duration: an M/G/inf queue); the reservation holds the mean
# plus this many standard deviations (sqrt(mean)), a shortfall in under 1 of
# 10,000 instants.
BUSY_MARGIN_SIGMAS: Final = 4
DEFAULT_API_RATE_QUOTA: Final = 10_000
DEFAULT_API_BURST_QUOTA: Final = 5_000
DEFAULT_LAMBDA_CONCURRENCY_QUOTA: Final = 1000
LAMBDA_MIN_UNRESERVED: Final = 100
# Lambda starts at most 1,000 new environments of one function every 10 s
# (not a quota: nothing raises it).
LAMBDA_SCALING_PER_10_SECONDS: Final = 1000
# SQS event sources accept caps of 2..1000 (a fixed limit).
MIN_EVENT_SOURCE_CONCURRENCY: Final = 2
MAX_EVENT_SOURCE_CONCURRENCY: Final = 1000
# A new on-demand table serves this much at once without warm throughput;
# DynamoDB's per-table quota caps what can be asked for; a partition takes
# 1,000 write units a second (fixed), so the due-work index's shards do.
NEW_TABLE_WRITE_UNITS: Final = 4_000
NEW_TABLE_READ_UNITS: Final = 12_000
DEFAULT_DYNAMODB_TABLE_QUOTA: Final = 40_000
PARTITION_WRITE_UNITS: Final = 1_000
# EventBridge's PutEvents quota per region, for the whole account (EventBridge
# quotas, "PutEvents throttle limit in transactions per second"); a region not
# listed has 400. Where the region is chosen at deploy (a single-region stage),
# the plan takes the lowest, unless eventbridge_put_events_quota says better.
PUT_EVENTS_QUOTAS: Final = {
    "us-east-1": 10_000,
    "us-east-2": 2_400,
    "us-west-1": 1_200,
    "us-west-2": 10_000,
    "ap-east-1": 600,
    "ap-northeast-1": 1_200,
    "ap-northeast-2": 600,
    "ap-south-1": 600,
    "ap-southeast-1": 1_200,
    "ap-southeast-2": 1_200,
    "ca-central-1": 600,
    "eu-central-1": 2_400,
    "eu-north-1": 600,
    "eu-south-2": 2_400,
    "eu-west-1": 10_000,
    "eu-west-2": 1_200,
    "eu-west-3": 600,
    "sa-east-1": 600,
}
OTHER_REGIONS_PUT_EVENTS_QUOTA: Final = 400


def put_events_quota(region: str | None) -> int:
    """The default PutEvents quota of ``region``; None (chosen at deploy): the lowest."""
    if region is None:
        return OTHER_REGIONS_PUT_EVENTS_QUOTA
    return PUT_EVENTS_QUOTAS.get(region, OTHER_REGIONS_PUT_EVENTS_QUOTA)


@dataclass(frozen=True)
class Quota:
    """An AWS quota the plan checks: the context key that states it, and its request."""

    name: str
    key: str
    service_code: str
    quota_code: str

    def check(self, needed: int, available: int, region: str | None) -> Check:
        """This quota at one peak: ``needed`` of ``available``, and the request for it."""
        return Check(self.name, needed, available, self.request(needed, region))

    def request(self, value: int, region: str | None) -> str:
        where = f" --region {region}" if region else ""
        return (
            f"request {value} in Service Quotas (aws service-quotas "
            f"request-service-quota-increase{where} --service-code {self.service_code} "
            f"--quota-code {self.quota_code} --desired-value {value}), then set "
            f"-c {self.key}={value}"
        )


LAMBDA_CONCURRENCY: Final = Quota(
    "Lambda concurrent executions", "lambda_concurrency_quota", "lambda", "L-B99A9384"
)
API_RATE: Final = Quota("API Gateway throttle rate", "api_rate_quota", "apigateway", "L-8A5B8E43")
API_BURST: Final = Quota(
    "API Gateway throttle burst rate", "api_burst_quota", "apigateway", "L-CDF5615A"
)
DYNAMODB_TABLE: Final = Quota(
    "DynamoDB table-level write throughput", "dynamodb_table_quota", "dynamodb", "L-AB614373"
)
PUT_EVENTS: Final = Quota(
    "EventBridge PutEvents throttle limit",
    "eventbridge_put_events_quota",
    "events",
    "L-9B653E91",
)


def sume_worst_case_rate(peak_jobs_per_second: int) -> int:
    """Requests/s Sume may legitimately send at ``peak_jobs_per_second`` (see above)."""
    return peak_jobs_per_second * SUME_MAX_ATTEMPTS * CONCURRENT_COPIES


def default_throttle(
    peak_jobs_per_second: int,
    rate_quota: int = DEFAULT_API_RATE_QUOTA,
    burst_quota: int = DEFAULT_API_BURST_QUOTA,
) -> tuple[int, int]:
    """(rate, burst) sized from the capacity estimate: Sume's worst case plus headroom."""
    rate = math.ceil(sume_worst_case_rate(peak_jobs_per_second) * THROTTLE_HEADROOM)
    rate = min(rate, rate_quota)
    return rate, min(2 * rate, burst_quota)


def receiver_busy(requests_per_second: float) -> float:
    """Receivers busy on average when ``requests_per_second`` all meet restoring containers.

    The worst second: after a failover (the other region's containers are cold)
    or a region's recovery, every delivery arriving within a restore starts a
    container, busy for the restore and the delivery. Warm, the same rate keeps
    ``requests_per_second x RECEIVER_WARM_SECONDS`` busy, a fraction of this.
    """
    return requests_per_second * (RECEIVER_COLD_SECONDS + RECEIVER_WARM_SECONDS)


def receiver_concurrency(peak_jobs_per_second: int) -> int:
    """The receiver's reservation: Sume's worst case at a cold start, with its margin."""
    busy = receiver_busy(sume_worst_case_rate(peak_jobs_per_second))
    return math.ceil(busy + BUSY_MARGIN_SIGMAS * math.sqrt(busy))


def event_source_cap(per_second: float, seconds_each: float) -> int:
    """Instances an SQS event source needs for ``per_second`` items of ``seconds_each``."""
    return max(math.ceil(per_second * seconds_each), MIN_EVENT_SOURCE_CONCURRENCY)


def planned_write_units(peak_jobs_per_second: int, throttle_rate: int) -> int:
    """Write units a second the table must take at Sume's worst case."""
    jobs = peak_jobs_per_second * SUME_MAX_ATTEMPTS
    receiver = throttle_rate * RECEIVER_WRITES_PER_REQUEST
    return receiver + jobs * WORKER_WRITES_PER_JOB * UNITS_PER_WORKER_WRITE


def index_write_units(peak_jobs_per_second: int, throttle_rate: int) -> int:
    """Write units a second the due-work index takes at Sume's worst case."""
    jobs = peak_jobs_per_second * SUME_MAX_ATTEMPTS
    return throttle_rate + jobs * INDEX_WRITES_PER_JOB * UNITS_PER_WORKER_WRITE


def poller_runs(due_shards: int, previous: int | None, per_run: int) -> int:
    """The poller's parallel runs in a round: the shards it reads, ``per_run`` to a run.

    The shards queue's event source is capped there (at least SQS's minimum),
    so a round never takes more of the account's concurrency.
    """
    read = max(due_shards, previous or 0)
    return max(MIN_EVENT_SOURCE_CONCURRENCY, math.ceil(read / per_run))


@dataclass(frozen=True)
class Account:
    """One region's quotas, as the context states them (AWS's defaults unless raised)."""

    region: str | None
    """None: a single-region stage, whose region is chosen at deploy."""
    api_rate: int = DEFAULT_API_RATE_QUOTA
    api_burst: int = DEFAULT_API_BURST_QUOTA
    lambda_concurrency: int = DEFAULT_LAMBDA_CONCURRENCY_QUOTA
    dynamodb_table: int = DEFAULT_DYNAMODB_TABLE_QUOTA
    put_events: int = OTHER_REGIONS_PUT_EVENTS_QUOTA


@dataclass(frozen=True)
class Fixed:
    """What the stage fixes whatever the peak: explicit settings (None: derived) and shards."""

    poller_runs: int
    due_shards: int
    throttle_rate: int | None = None
    throttle_burst: int | None = None
    worker_max_concurrency: int | None = None
    registrations_max_concurrency: int | None = None
    receiver_reserved_concurrency: int | None = None
    """None: derived; 0: none reserved."""


@dataclass(frozen=True)
class Check:
    """One limit at one peak: what the plan needs of it, what there is, how to raise it."""

    name: str
    needed: int
    available: int
    remedy: str

    @property
    def fits(self) -> bool:
        return self.needed <= self.available


@dataclass(frozen=True)
class Capacity:
    jobs_per_second: int
    """The most Sume jobs a second whose worst case the stage takes (0: none)."""
    binds: Check
    """The first limit past it: what binds at ``jobs_per_second + 1``."""
    region: str | None

    @property
    def requests_per_second(self) -> int:
        return sume_worst_case_rate(self.jobs_per_second)

    def bound_by(self) -> str:
        where = f" in {self.region}" if self.region else ""
        return f"{self.binds.name} ({self.binds.available}){where}"

    def summary(self) -> str:
        """One line: what the stage takes and what binds first."""
        return (
            f"{self.jobs_per_second} Sume jobs/s at the worst case "
            f"({self.requests_per_second} requests/s); binds first: {self.bound_by()}"
        )


def checks(peak: int, account: Account, fixed: Fixed) -> list[Check]:
    """Every limit the plan meets at ``peak``, in the order they are reported."""
    region = account.region
    worst = sume_worst_case_rate(peak)
    derived_rate, _ = default_throttle(peak, account.api_rate, account.api_burst)
    rate = fixed.throttle_rate or derived_rate
    found: list[Check] = []
    # The API: Sume's worst case must pass the stage throttle and the account's.
    for quota, limit, setting, key in (
        (API_BURST, account.api_burst, fixed.throttle_burst, "throttle_burst"),
        (API_RATE, account.api_rate, fixed.throttle_rate, "throttle_rate"),
    ):
        if setting is None:
            found.append(quota.check(worst, limit, region))
        else:
            found.append(Check(key, worst, setting, f"set -c {key}={worst} or more"))
    # Lambda: the receiver's reservation, the event sources' caps, the poller's tick.
    receiver = receiver_concurrency(peak)
    worker = fixed.worker_max_concurrency or event_source_cap(peak, WORKER_PLANNED_SECONDS_PER_JOB)
    registrations = fixed.registrations_max_concurrency or event_source_cap(
        peak, REGISTRATION_PLANNED_SECONDS
    )
    # An event source's cap derived from the peak must fit SQS's 1,000; a cap set
    # by hand says each item takes less than planned, so it binds nothing here.
    for key, cap, seconds in (
        ("worker_max_concurrency", fixed.worker_max_concurrency, WORKER_PLANNED_SECONDS_PER_JOB),
        (
            "registrations_max_concurrency",
            fixed.registrations_max_concurrency,
            REGISTRATION_PLANNED_SECONDS,
        ),
    ):
        if cap is None:
            found.append(
                Check(
                    f"an SQS event source's {MAX_EVENT_SOURCE_CONCURRENCY} instances ({key})",
                    event_source_cap(peak, seconds),
                    MAX_EVENT_SOURCE_CONCURRENCY,
                    f"no quota raises it: set -c {key} (at most {MAX_EVENT_SOURCE_CONCURRENCY})"
                    f" if each takes less than the {seconds} s planned",
                )
            )
    reserved = fixed.receiver_reserved_concurrency
    if reserved is None:
        reserved = receiver
    elif reserved:
        key = "receiver_reserved_concurrency"
        found.append(Check(key, receiver, reserved, f"set -c {key}={receiver} or more"))
    others = worker + registrations + fixed.poller_runs + 1
    # With nothing reserved (0, a new account's small quota) the receiver shares what
    # the caps leave, unplanned: only the caps must fit.
    pool = reserved + max(others, LAMBDA_MIN_UNRESERVED) if reserved else others
    found.append(LAMBDA_CONCURRENCY.check(pool, account.lambda_concurrency, region))
    # DynamoDB: the table's write units, and the index's over its shards.
    writes = planned_write_units(peak, rate)
    found.append(DYNAMODB_TABLE.check(writes, account.dynamodb_table, region))
    index = index_write_units(peak, rate)
    shards = math.ceil(index / PARTITION_WRITE_UNITS)
    found.append(
        Check(
            f"the due-work index's {fixed.due_shards} shards",
            index,
            fixed.due_shards * PARTITION_WRITE_UNITS,
            f"no quota raises a partition's {PARTITION_WRITE_UNITS} write units/s: set "
            f'-c due_shards={shards} (docs/operations.md, "Changing the shard count")',
        )
    )
    # EventBridge: one announcement a job, at the worker's pace (the peak).
    puts = peak * PUT_EVENTS_PER_JOB
    found.append(PUT_EVENTS.check(puts, account.put_events, region))
    return found


def capacity(account: Account, fixed: Fixed) -> Capacity:
    """The most jobs a second the stage takes in ``account``, and what binds next."""

    def fits(peak: int) -> bool:
        return all(check.fits for check in checks(peak, account, fixed))

    low, high = 0, MAX_PEAK_JOBS_PER_SECOND + 1
    while high - low > 1:  # every need grows with the peak: fits(low), not fits(high)
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    binds = next((c for c in checks(high, account, fixed) if not c.fits), None)
    if binds is None:  # nothing binds within the settings' range
        binds = Check("sume_peak_jobs_per_second's range", high, low, "")
    return Capacity(low, binds, account.region)


def weakest(capacities: Sequence[Capacity]) -> Capacity:
    """The stage's capacity across its regions: each must take the whole load alone."""
    return min(capacities, key=lambda c: c.jobs_per_second)


def refusal(peak: int, found: Capacity, account: Account, fixed: Fixed) -> str:
    """The one line a synth past the capacity stops with: the quota and how to raise it."""
    failing = [c for c in checks(peak, account, fixed) if not c.fits]
    # The limit that binds first, as it stands at this peak; raising it shows the next.
    check = next((c for c in failing if c.name == found.binds.name), failing[0])
    where = f" in {found.region}" if found.region else ""
    return (
        f"context sume_peak_jobs_per_second={peak} is past what this stage takes{where}, "
        f"{found.jobs_per_second} jobs/s ({found.requests_per_second} requests/s at Sume's "
        f"worst case): {check.name} binds ({check.needed} needed, {check.available} "
        f"available): {check.remedy}"
    )
