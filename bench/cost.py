"""The price model: what the bench's counted calls and measured CPU cost, per million.

Prices: AWS list prices, us-east-1, on-demand, no free tier, first volume
tier, as published on the AWS pricing pages and checked on 2026-11-29:
API Gateway HTTP API $1.00 per million requests (first 300 M; metered per
512 KB), REST API $3.50 per million (first 333 M); Lambda arm64 $0.20 per
million requests and $0.0000133334 per GB-second, billed per 1 ms; DynamoDB
on-demand $0.625 per million write request units (after the November 2024
halving; one WRU per started KB of the larger of the item before and after
the write, and a failed conditional write still consumes WRUs for the size of
the existing item, at least one); SQS standard $0.40 per million requests
(one per started 64 KB); S3 PUT $0.005 per thousand, GET $0.0004 per thousand;
EventBridge custom events $1.00 per million (one per started 64 KB);
Secrets Manager $0.05 per 10,000 API calls; DynamoDB on-demand $0.125 per
million read request units (one per started 4 KB strongly consistent, half
eventually consistent); S3 Standard storage $0.023 per GB-month; transfer between
two US regions $0.02 per GB; S3 Replication Time Control $0.015 per GB. Lambda
SnapStart (Python 3.12+), as the Lambda pricing page lists it for us-east-1:
$0.0000015046 per GB-second a published version's snapshot is cached (at least 3
hours), $0.0001397998 per GB restored.

Lambda duration is modelled, not measured in AWS: the CPU time measured here
scaled by the CPU share Lambda grants at the configured memory (a full vCPU
at 1,769 MB), plus a typical in-region latency per AWS call. Both are
assumptions, printed with the table; the request-priced lines (API Gateway,
Lambda requests, DynamoDB, SQS) do not depend on them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Final

from infra.spec import RECEIVER_MEMORY_MB

PRICES_CHECKED = "2026-11-29"
HTTP_API_PER_M = 1.00
REST_API_PER_M = 3.50
LAMBDA_REQUEST_PER_M = 0.20
LAMBDA_GB_SECOND = 0.0000133334
DDB_WRU_PER_M = 0.625
SQS_REQUEST_PER_M = 0.40
S3_PUT_PER_M = 5.00
S3_GET_PER_M = 0.40
EVENTS_PER_M = 1.00
SECRETS_CALL_PER_M = 5.00
SNAPSTART_CACHE_GB_SECOND = 0.0000015046
SNAPSTART_RESTORE_GB = 0.0001397998

FULL_VCPU_MB = 1769
LATENCY_MS = {"dynamodb": 5.0, "sqs": 8.0, "s3": 25.0, "secretsmanager": 15.0, "events": 10.0}
"""Typical in-region round trip per call, an assumption of the model."""
HTTP_LATENCY_MS = 100.0
"""One request to Sume (a status poll, a small artifact's download): an assumption."""


def wru(size_bytes: int) -> int:
    return max(1, math.ceil(size_bytes / 1024))


@dataclass(frozen=True)
class Usage:
    """What one delivery uses of each priced thing."""

    cpu_us: float
    calls: tuple[str, ...]
    """``service.Operation`` per AWS call."""
    wru: int
    sqs_requests: int
    s3_puts: int = 0


@dataclass(frozen=True)
class Cost:
    billed_ms: int
    api: float
    lambda_requests: float
    lambda_duration: float
    dynamodb: float
    sqs: float
    s3: float

    @property
    def total(self) -> float:
        return sum(dataclasses.astuple(self)[1:])


def billed_ms(usage: Usage, memory_mb: int) -> int:
    cpu_ms = usage.cpu_us / 1000 * max(1.0, FULL_VCPU_MB / memory_mb)
    wait_ms = sum(LATENCY_MS.get(call.split(".")[0], 10.0) for call in usage.calls)
    return max(1, math.ceil(cpu_ms + wait_ms))


def per_million(usage: Usage, memory_mb: int, api_per_m: float = HTTP_API_PER_M) -> Cost:
    ms = billed_ms(usage, memory_mb)
    return Cost(
        billed_ms=ms,
        api=api_per_m,
        lambda_requests=LAMBDA_REQUEST_PER_M,
        lambda_duration=ms / 1000 * memory_mb / 1024 * LAMBDA_GB_SECOND * 1e6,
        dynamodb=usage.wru * DDB_WRU_PER_M,
        sqs=usage.sqs_requests * SQS_REQUEST_PER_M,
        s3=usage.s3_puts * S3_PUT_PER_M,
    )


def cpu_per_million(cpu_us: float, memory_mb: int) -> float:
    """USD per million deliveries for ``cpu_us`` of CPU each, before the 1 ms rounding."""
    seconds = cpu_us / 1e6 * max(1.0, FULL_VCPU_MB / memory_mb)
    return seconds * memory_mb / 1024 * LAMBDA_GB_SECOND * 1e6


# The multi-region deployment (infra/regions.py; docs/operations.md, "Two
# regions"), same price list. A write to an MRSC global table is billed in
# each replica's region: one write request unit where it was made and one
# replicated write unit in the other replica, priced as a write unit since
# the November 2024 global tables price cut. The witness holds no table and is
# modelled at no charge (an assumption, printed with the table). Storage is
# left out: under 2 KB a job, it is cents a million jobs a month.
MRSC_REPLICAS = 2
DDB_RRU_PER_M = 0.125
"""One strongly consistent read under 4 KB: the health route's probe."""
# Route 53 prices a health check of an endpoint outside the account's AWS
# resources (an execute-api host) at $0.75 a month, and HTTPS at $2.00 more;
# alias queries to API Gateway are free. CloudWatch: $0.10 an alarm, $3.00 a
# dashboard a month; Secrets Manager $0.40 a secret a month.
HEALTH_CHECK_MONTH = 0.75 + 2.00
ALARM_MONTH = 0.10
DASHBOARD_MONTH = 3.00
SECRET_MONTH = 0.40
# What the second region adds of those, as the stack is built (two secrets,
# its dashboard, 17 alarms), plus the health check alarm of the us-east-1 one.
REGION_ALARMS = 17
REGION_SECRETS = 2
# Route 53 asks from several checkers at once; 16 answers every 30 s per
# region is the model's assumption (its count is not priced, their requests
# are): API, one Lambda request of a few ms, one strongly consistent read.
HEALTH_CHECKERS = 16
HEALTH_CHECK_INTERVAL_S = 30
MONTH_S = 30 * 24 * 3600


def mrsc(single: Cost) -> Cost:
    """``single``'s delivery on the MRSC table: every write unit paid in both replicas."""
    return dataclasses.replace(single, dynamodb=single.dynamodb * MRSC_REPLICAS)


@dataclass(frozen=True)
class FixedMonth:
    """USD a month the multi-region deployment costs whether or not Sume delivers."""

    health_checks: float
    health_probes: float
    second_region: float

    @property
    def total(self) -> float:
        return self.health_checks + self.health_probes + self.second_region


def failover_fixed_month(memory_mb: int, probe_cpu_us: float = 1000.0) -> FixedMonth:
    probe = per_million(Usage(probe_cpu_us, ("dynamodb.GetItem",), 0, 0), memory_mb)
    probe_per_m = probe.api + probe.lambda_requests + probe.lambda_duration + DDB_RRU_PER_M
    probes = MRSC_REPLICAS * HEALTH_CHECKERS * MONTH_S / HEALTH_CHECK_INTERVAL_S
    return FixedMonth(
        health_checks=MRSC_REPLICAS * HEALTH_CHECK_MONTH + ALARM_MONTH,
        health_probes=probes / 1e6 * probe_per_m,
        second_region=REGION_ALARMS * ALARM_MONTH + DASHBOARD_MONTH + REGION_SECRETS * SECRET_MONTH,
    )


def snapstart(memory_mb: int) -> tuple[float, float]:
    """(USD a month one published version's snapshot is cached, USD per million restores)."""
    gb = memory_mb / 1024
    return gb * MONTH_S * SNAPSTART_CACHE_GB_SECOND, gb * SNAPSTART_RESTORE_GB * 1e6


# What a region's outage no longer holds back costs (two regions): a large event's
# second copy, and the MRSC table's expiry. A model, not a measurement.
S3_GB_MONTH: Final = 0.023
INTER_REGION_GB: Final = 0.02
S3_RTC_GB: Final = 0.015
GIB: Final = 1024**3
# The receiver waits for the other region's PUT alongside its own: what it adds
# to the invocation is the cross-region PUT's extra round trip, an assumption.
PEER_PUT_EXTRA_MS: Final = 60
# Days a large body stays in a payloads bucket: the stage's default payloads_expire_days.
PAYLOADS_DAYS: Final = 90
# An ended job's item (docs/operations.md: about 1.5 KB a job).
ENDED_ITEM_BYTES: Final = 1536


def second_copy(size: int) -> dict[str, float]:
    """A million large events of ``size`` bytes written to the other region's bucket too,
    by line; and S3 replication with RTC instead (asynchronous: it lags the failover)."""
    gb = size * 1_000_000 / GIB
    found = {
        "2nd PUT": S3_PUT_PER_M,
        "transfer": gb * INTER_REGION_GB,
        f"storage ({PAYLOADS_DAYS} days)": gb * S3_GB_MONTH * PAYLOADS_DAYS / 30,
        "receiver's wait": RECEIVER_MEMORY_MB / 1024 * PEER_PUT_EXTRA_MS * LAMBDA_GB_SECOND * 1e3,
    }
    found["**total**"] = sum(found.values())
    rtc = found["2nd PUT"] + found["transfer"] + found[f"storage ({PAYLOADS_DAYS} days)"]
    return {**found, "S3 replication + RTC instead": rtc + gb * S3_RTC_GB}


def expiry(item: int = ENDED_ITEM_BYTES) -> dict[str, float]:
    """A million ended jobs of ``item`` bytes deleted by the expiry from the MRSC table:
    read by BatchGetItem (eventually consistent: half a unit per started 4 KB), deleted
    in both replicas (a delete is charged by the deleted item's size)."""
    read = 0.5 * math.ceil(item / 4096) * DDB_RRU_PER_M
    delete = wru(item) * MRSC_REPLICAS * DDB_WRU_PER_M
    return {
        "read (BatchGetItem)": read,
        "delete (both replicas)": delete,
        "**total**": read + delete,
    }
