"""Section 5 of the report: cost per million deliveries, single region and two, priced by
``bench.cost`` from the calls (section 1) and the CPU (section 2) measured."""

from __future__ import annotations

import math

from bench import calls, cost, cpu
from bench.report import table
from infra.spec import RECEIVER_MEMORY_MB
from sume.store.sizing import item_size


def render(calls_report: calls.CallsReport, cpu_report: cpu.CpuReport) -> None:
    memory = RECEIVER_MEMORY_MB
    print(
        f"## 5. Cost per million deliveries (USD, us-east-1 list prices checked "
        f"{cost.PRICES_CHECKED}; receiver {memory} MB arm64)\n"
    )
    ours = {r.delivery: r for r in calls_report.rows if r.design == "ours"}
    powertools = {r.delivery: r for r in calls_report.rows if r.design == "powertools"}
    item = item_size(calls_report.job_item)
    record = item_size(calls_report.idempotency_record)
    event_bytes = len(calls_report.job_item.get("body", {}).get("S", "").encode())
    counted = item + 40  # the duplicate's counter update grows the item a little
    usages = {
        ("new", "ours"): cost.Usage(
            cpu_report.median_us("ours", "new"), tuple(ours["new"].calls), cost.wru(item), 1
        ),
        ("duplicate", "ours"): cost.Usage(
            cpu_report.median_us("ours", "duplicate"),
            tuple(ours["duplicate (retry)"].calls),
            cost.wru(item) + cost.wru(counted),
            0,
        ),
        ("rejected", "ours"): cost.Usage(cpu_report.median_us("ours", "rejected"), (), 0, 0),
        ("new", "powertools"): cost.Usage(
            cpu_report.median_us("powertools", "new"),
            tuple(powertools["new"].calls),
            2 * cost.wru(record),
            max(1, math.ceil(event_bytes / 65536)),
        ),
        ("duplicate", "powertools"): cost.Usage(
            cpu_report.median_us("powertools", "duplicate"),
            tuple(powertools["duplicate (retry)"].calls),
            cost.wru(record),
            0,
        ),
        ("rejected", "powertools"): cost.Usage(
            cpu_report.median_us("powertools", "rejected"), (), 0, 0
        ),
    }
    rows = []
    for kind in cpu.KINDS:
        for label, design, api in (
            ("ours (HTTP API)", "ours", cost.HTTP_API_PER_M),
            ("Powertools idempotency (HTTP API)", "powertools", cost.HTTP_API_PER_M),
            ("ours behind a REST API", "ours", cost.REST_API_PER_M),
        ):
            usage = usages[(kind, design)]
            c = cost.per_million(usage, memory, api)
            rows.append(
                (
                    kind,
                    label,
                    c.billed_ms,
                    usage.wru,
                    usage.sqs_requests,
                    f"{c.api:.2f}",
                    f"{c.lambda_requests + c.lambda_duration:.2f}",
                    f"{c.dynamodb:.2f}",
                    f"{c.sqs:.2f}",
                    f"**{c.total:.2f}**",
                )
            )
    print(
        table(
            [
                "delivery",
                "design",
                "billed ms",
                "WRU",
                "SQS req",
                "API",
                "Lambda",
                "DynamoDB",
                "SQS",
                "total",
            ],
            rows,
        )
    )
    latency = ", ".join(f"{k} {v:.0f} ms" for k, v in cost.LATENCY_MS.items())
    print(
        f"\nModel: billed ms = measured CPU x {cost.FULL_VCPU_MB}/{memory} (Lambda's CPU share at "
        f"{memory} MB) + per-call latency ({latency}), rounded up to 1 ms. Our job item is "
        f"{item} B ({cost.wru(item)} WRU per write; a duplicate pays the failed conditional write "
        f"and the counter update), the idempotency record {record} B. S3 ($5/M PUT) only for "
        "events over 256 KiB; Secrets Manager is read once per container per 5 minutes.\n"
    )
    render_regions(usages, memory)


def render_regions(usages: dict[tuple[str, str], cost.Usage], memory: int) -> None:
    """Single region against the multi-region deployment (MRSC table, failover)."""
    fixed = cost.failover_fixed_month(memory)
    rows = []
    for kind in cpu.KINDS:
        single = cost.per_million(usages[(kind, "ours")], memory)
        both = cost.mrsc(single)
        rows.append(
            (
                kind,
                f"{single.dynamodb:.2f}",
                f"{both.dynamodb:.2f}",
                f"**{single.total:.2f}**",
                f"**{both.total:.2f}**",
                f"{both.total - single.total:+.2f}",
            )
        )
    print(
        "Single region against two regions on an MRSC table (ours, HTTP API), per million:\n\n"
        + table(
            ["delivery", "DynamoDB 1 region", "DynamoDB MRSC", "total 1 region", "total MRSC", "+"],
            rows,
        )
    )
    per_m_at = {m: fixed.total / m for m in (1, 10, 100)}
    print(
        f"\nMRSC: each write unit is paid in both replicas ({cost.MRSC_REPLICAS}x DynamoDB; the "
        "witness modelled at no charge, an assumption). Fixed, whatever Sume delivers: "
        f"{fixed.total:.2f} USD a month = Route 53 health checks {fixed.health_checks:.2f} "
        f"(2 x HTTPS on an execute-api host, and their alarm), their probes "
        f"{fixed.health_probes:.2f} ({cost.HEALTH_CHECKERS} checkers every "
        f"{cost.HEALTH_CHECK_INTERVAL_S} s per region, an assumption; each a GET /health: API, "
        "Lambda, one strongly consistent read), the second region's alarms, dashboard and "
        f"secrets {fixed.second_region:.2f}. Per million deliveries that is "
        + ", ".join(f"{v:.2f} at {m} M a month" for m, v in per_m_at.items())
        + ". The worker's writes (claim, one per artifact, finish) double the same way.\n"
    )
