"""The price model: what the bench's counted calls and measured CPU cost, per million.

Prices are AWS list prices, us-east-1, on-demand, no free tier, first volume tier, as
the AWS pricing pages published them on ``PRICES_CHECKED``; each is written once below,
with its unit.

Lambda duration is modelled, not measured in AWS: the CPU time measured here
scaled by the CPU share Lambda grants at the configured memory (a full vCPU
at 1,769 MB), plus a typical in-region latency per AWS call. Both are
assumptions, printed with the table; the request-priced lines (API Gateway,
Lambda requests, DynamoDB, SQS) do not depend on them.

Two regions (infra/regions.py; docs/operations.md, "Two regions") use the same prices.
A write to an MRSC global table is billed in each replica's region: one write request
unit where it was made and one replicated write unit in the other replica, priced as a
write unit since the November 2024 global tables price cut. The witness holds no table
and is modelled at no charge (an assumption, printed with the table). Storage is left
out: under 2 KB a job, it is cents a million jobs a month. What a region's outage no
longer holds back costs (a large event's second copy, the MRSC table's expiry) is a
model, not a measurement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.spec import RECEIVER_MEMORY_MB

PRICES_CHECKED = "2026-11-29"
HTTP_API_PER_M = 1.00  # API Gateway HTTP API, first 300 M requests, metered per 512 KB
REST_API_PER_M = 3.50  # API Gateway REST API, first 333 M
LAMBDA_REQUEST_PER_M = 0.20  # arm64
LAMBDA_GB_SECOND = 0.0000133334  # arm64, billed per 1 ms
# DynamoDB on-demand, after the November 2024 halving: one write unit per started KB
# of the larger of the item before and after the write; a failed conditional write
# still consumes units for the size of the existing item, at least one.
DDB_WRU_PER_M = 0.625
DDB_RRU_PER_M = 0.125  # one per started 4 KB strongly consistent, half eventually
SQS_REQUEST_PER_M = 0.40  # standard queue, one request per started 64 KB
S3_PUT_PER_M = 5.00  # $0.005 per thousand
S3_GET_PER_M = 0.40  # $0.0004 per thousand
EVENTS_PER_M = 1.00  # EventBridge custom events, one per started 64 KB
SECRETS_CALL_PER_M = 5.00  # Secrets Manager, $0.05 per 10,000 API calls
S3_GB_MONTH = 0.023  # S3 Standard storage
INTER_REGION_GB = 0.02  # transfer between two US regions
S3_RTC_GB = 0.015  # S3 Replication Time Control
# Lambda SnapStart (Python 3.12+), as the Lambda pricing page lists it for us-east-1:
# per GB-second a published version's snapshot is cached (at least 3 hours), per GB restored.
SNAPSTART_CACHE_GB_SECOND = 0.0000015046
SNAPSTART_RESTORE_GB = 0.0001397998
# A month: Route 53 prices a health check of an endpoint outside the account's AWS
# resources (an execute-api host) at $0.75, and HTTPS at $2.00 more; alias queries to
# API Gateway are free. CloudWatch $0.10 an alarm, $3.00 a dashboard; Secrets Manager
# $0.40 a secret.
HEALTH_CHECK_MONTH = 0.75 + 2.00
ALARM_MONTH = 0.10
DASHBOARD_MONTH = 3.00
SECRET_MONTH = 0.40

FULL_VCPU_MB = 1769
LATENCY_MS = {"dynamodb": 5.0, "sqs": 8.0, "s3": 25.0, "secretsmanager": 15.0, "events": 10.0}
"""Typical in-region round trip per call, an assumption of the model."""
HTTP_LATENCY_MS = 100.0
"""One request to Sume (a status poll, a small artifact's download): an assumption."""
MONTH_S = 30 * 24 * 3600
MRSC_REPLICAS = 2
# What the second region adds, as the stack is built (two secrets, its dashboard, 17
# alarms), plus the health check alarm of the us-east-1 one.
REGION_ALARMS = 17
REGION_SECRETS = 2
# Route 53 asks from several checkers at once; 16 answers every 30 s per region is the
# model's assumption (its count is not priced, their requests are): API, one Lambda
# request of a few ms, one strongly consistent read (under 4 KB) by the health route.
HEALTH_CHECKERS = 16
HEALTH_CHECK_INTERVAL_S = 30
# The receiver waits for the other region's PUT of a large event alongside its own:
# what it adds to the invocation is the cross-region PUT's extra round trip, an assumption.
PEER_PUT_EXTRA_MS = 60
PAYLOADS_DAYS = 90  # days a large body stays in a payloads bucket (payloads_expire_days)
ENDED_ITEM_BYTES = 1536  # an ended job's item (docs/operations.md: about 1.5 KB a job)


def wru(size_bytes: int) -> int:
    return max(1, math.ceil(size_bytes / 1024))


def rru(size_bytes: int, consistent: bool = True) -> float:
    units = max(1, math.ceil(size_bytes / 4096))
    return float(units) if consistent else units / 2


@dataclass(frozen=True)
class Usage:
    """What one invocation uses of each priced thing."""

    cpu_us: float
    calls: tuple[str, ...]  # service.Operation per AWS call
    wru: int
    sqs_requests: int


def billed_ms(usage: Usage, memory_mb: int) -> int:
    """The CPU at the memory's share of a vCPU, plus each call's latency, rounded up."""
    cpu_ms = usage.cpu_us / 1000 * max(1.0, FULL_VCPU_MB / memory_mb)
    wait_ms = sum(LATENCY_MS.get(call.split(".")[0], 10.0) for call in usage.calls)
    return max(1, math.ceil(cpu_ms + wait_ms))


def duration_per_million(ms: float, memory_mb: int) -> float:
    return ms / 1000 * memory_mb / 1024 * LAMBDA_GB_SECOND * 1e6


def cpu_per_million(cpu_us: float, memory_mb: int) -> float:
    """USD per million deliveries for ``cpu_us`` of CPU each, before the 1 ms rounding."""
    return duration_per_million(cpu_us / 1000 * max(1.0, FULL_VCPU_MB / memory_mb), memory_mb)


def per_million(
    usage: Usage, memory_mb: int, api_per_m: float = HTTP_API_PER_M
) -> dict[str, float]:
    """USD per million invocations like ``usage``, by line."""
    return {
        "API": api_per_m,
        "Lambda": LAMBDA_REQUEST_PER_M
        + duration_per_million(billed_ms(usage, memory_mb), memory_mb),
        "DynamoDB": usage.wru * DDB_WRU_PER_M,
        "SQS": usage.sqs_requests * SQS_REQUEST_PER_M,
    }


def mrsc(single: dict[str, float]) -> dict[str, float]:
    """``single``'s delivery on the MRSC table: every write unit paid in both replicas."""
    return {**single, "DynamoDB": single["DynamoDB"] * MRSC_REPLICAS}


def failover_fixed_month(memory_mb: int, probe_cpu_us: float = 1000.0) -> dict[str, float]:
    """USD a month the two-region deployment costs whether or not Sume delivers."""
    probe = per_million(Usage(probe_cpu_us, ("dynamodb.GetItem",), 0, 0), memory_mb)
    probes = MRSC_REPLICAS * HEALTH_CHECKERS * MONTH_S / HEALTH_CHECK_INTERVAL_S
    return {
        "health checks": MRSC_REPLICAS * HEALTH_CHECK_MONTH + ALARM_MONTH,
        "probes": probes / 1e6 * (sum(probe.values()) + DDB_RRU_PER_M),
        "second region": REGION_ALARMS * ALARM_MONTH
        + DASHBOARD_MONTH
        + REGION_SECRETS * SECRET_MONTH,
    }


def snapstart(memory_mb: int) -> tuple[float, float]:
    """(USD a month one published version's snapshot is cached, USD per million restores)."""
    gb = memory_mb / 1024
    return gb * MONTH_S * SNAPSTART_CACHE_GB_SECOND, gb * SNAPSTART_RESTORE_GB * 1e6


def second_copy(size: int) -> dict[str, float]:
    """A million large events of ``size`` bytes written to the other region's bucket too,
    by line; and S3 replication with RTC instead (asynchronous: it lags the failover)."""
    gb = size * 1_000_000 / 1024**3
    found = {
        "2nd PUT": S3_PUT_PER_M,
        "transfer": gb * INTER_REGION_GB,
        f"storage ({PAYLOADS_DAYS} days)": gb * S3_GB_MONTH * PAYLOADS_DAYS / 30,
        "receiver's wait": duration_per_million(PEER_PUT_EXTRA_MS, RECEIVER_MEMORY_MB),
    }
    found["**total**"] = sum(found.values())
    rtc = found["2nd PUT"] + found["transfer"] + found[f"storage ({PAYLOADS_DAYS} days)"]
    return {**found, "S3 replication + RTC instead": rtc + gb * S3_RTC_GB}


def expiry(item: int = ENDED_ITEM_BYTES) -> dict[str, float]:
    """A million ended jobs of ``item`` bytes deleted by the expiry from the MRSC table:
    read by BatchGetItem (eventually consistent: half a unit per started 4 KB), deleted
    in both replicas (a delete is charged by the deleted item's size)."""
    read = rru(item, consistent=False) * DDB_RRU_PER_M
    delete = wru(item) * MRSC_REPLICAS * DDB_WRU_PER_M
    return {
        "read (BatchGetItem)": read,
        "delete (both replicas)": delete,
        "**total**": read + delete,
    }
