"""The capacity arithmetic every stage is sized by (docs/operations.md, "Capacity plan").

Plain Python, no CDK: the settings are checked before the CDK starts.
"""

from __future__ import annotations

import math

# Capacity estimate behind the API's throttle (docs/operations.md, "Junk traffic";
# every other capacity setting derives from it too: "Capacity plan").
# Sume finishes at most `sume_peak_jobs_per_second` jobs a second for us. The
# worst legitimate load follows an outage longer than Sume's retry window:
# every job finished in that window is then being retried, one attempt per
# job per spacing, so Sume sends up to SUME_MAX_ATTEMPTS (10) times the
# finishing rate, and a delivery may arrive twice at once (concurrent
# duplicates: CONCURRENT_COPIES). The throttle must admit that, or our own
# 429s use up Sume's attempts. The default adds a quarter of headroom and
# twice the rate as burst: 2 jobs/s -> 40 requests/s -> rate 50, burst 100. The
# receiver's cost as `make bench` measures and models it (about 17 billed ms
# for a new job, 1 ms for a rejection, at 512 MB) makes 50 requests/s one warm
# instance, and junk held at that rate costs about 5 USD a day (1.21 USD per
# million rejected requests, API Gateway included).
SUME_MAX_ATTEMPTS = 10
CONCURRENT_COPIES = 2
THROTTLE_HEADROOM = 1.25
DEFAULT_PEAK_JOBS_PER_SECOND = 2
# API Gateway's default account quotas (requests/s, burst), shared by every API
# of the account in the region; raising them is a quota request to AWS, then
# api_rate_quota / api_burst_quota tell the synth.
DEFAULT_API_RATE_QUOTA = 10_000
DEFAULT_API_BURST_QUOTA = 5_000


# Concurrency the receiver keeps for itself (docs/operations.md, "Concurrency").
# The API admits throttle_burst requests at once and throttle_rate a second
# after; each planned at up to RECEIVER_PLANNED_SECONDS (a cold start; a warm
# delivery takes about 17 ms), that is the most receivers ever run at once.
# Lambda's quota is 1,000 per account and region by default, of which
# reservations must leave 100.
RECEIVER_PLANNED_SECONDS = 1
DEFAULT_LAMBDA_CONCURRENCY_QUOTA = 1000
LAMBDA_MIN_UNRESERVED = 100

# The event sources' caps: instances = jobs (or registrations) a second x the
# seconds each takes. A job's follow-up work is planned at 5 s: 100 MB of
# artifacts at the worker's planned copy rate of 20 MB/s
# (ARTIFACT_PLANNED_BYTES_PER_SECOND, the slowest copy planned for). A
# registration is one conditional write (5 ms in the bench's model) and its
# logs: planned at 0.1 s. SQS event sources accept caps of 2..1000.
WORKER_PLANNED_SECONDS_PER_JOB = 5
REGISTRATION_PLANNED_SECONDS = 0.1
MIN_EVENT_SOURCE_CONCURRENCY = 2
MAX_EVENT_SOURCE_CONCURRENCY = 1000
# The due-work index's shards (MAX_DUE_SHARDS, sume.core.names, the functions'
# range too): each is one partition key of the index, and a round runs at most
# one poller per shard, within one event source's cap.

# Write units the jobs table (and its due-work index) must take at once, from
# `make bench`'s call counts (docs/bench.md, "AWS calls per delivery"). Every
# request the throttle admits writes at most twice (a duplicate: the failed
# conditional write, then the counter update; a new job once), on an item
# under 1 KB (the bench's: 615 B), one unit each. Each job then costs the
# worker WORKER_WRITES_PER_JOB writes (claim, one per artifact, finish: the
# bench's job.completed with 2 artifacts), at up to 2 units once its artifact
# records take the item past 1 KB (about 1.5 KB for that job), at Sume's
# rate after an outage, SUME_MAX_ATTEMPTS jobs a second per peak job. The
# index sees no more: a failed conditional write does not reach it, the
# others at most once (a new due time twice: a delete and a put), which the
# throttle's floor of Sume's worst case guarantees (see planned_write_units).
RECEIVER_WRITES_PER_REQUEST = 2
WORKER_WRITES_PER_JOB = 4
UNITS_PER_WORKER_WRITE = 2
# A new on-demand table serves this much at once without warm
# throughput; DynamoDB's per-table quota caps what can be asked for.
NEW_TABLE_WRITE_UNITS = 4_000
NEW_TABLE_READ_UNITS = 12_000
DEFAULT_DYNAMODB_TABLE_QUOTA = 40_000


def receiver_concurrency(throttle_rate: int, throttle_burst: int) -> int:
    """Receivers running at once when Sume (or junk) uses all the API throttle admits."""
    return throttle_burst + math.ceil(throttle_rate * RECEIVER_PLANNED_SECONDS)


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


def event_source_cap(per_second: float, seconds_each: float) -> int:
    """Instances an SQS event source needs for ``per_second`` items of ``seconds_each``."""
    return max(math.ceil(per_second * seconds_each), MIN_EVENT_SOURCE_CONCURRENCY)


def planned_write_units(peak_jobs_per_second: int, throttle_rate: int) -> int:
    """Write units a second the table and its index must take at Sume's worst case.

    The index's share, ``throttle_rate + 5 writes x 2 units x the jobs``, stays
    below the table's as long as ``throttle_rate`` covers Sume's worst case.
    """
    jobs = peak_jobs_per_second * SUME_MAX_ATTEMPTS
    receiver = throttle_rate * RECEIVER_WRITES_PER_REQUEST
    return receiver + jobs * WORKER_WRITES_PER_JOB * UNITS_PER_WORKER_WRITE


def poller_runs(due_shards: int, previous: int | None, per_run: int) -> int:
    """The poller's parallel runs in a round: the shards it reads, ``per_run`` to a run.

    The shards queue's event source is capped there (at least SQS's minimum),
    so a round never takes more of the account's concurrency.
    """
    read = max(due_shards, previous or 0)
    return max(MIN_EVENT_SOURCE_CONCURRENCY, math.ceil(read / per_run))
