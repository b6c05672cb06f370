"""Section 5: cost per million deliveries, single region and two, priced by ``bench.cost``
from the calls (section 1) and the CPU (section 2) measured; then what two regions add
for large events and the expiry (modelled, no AWS account here)."""

from __future__ import annotations

import math

from bench import cost
from bench import harness as h
from bench.calls import CallsReport
from bench.cpu import KINDS, CpuReport
from infra.spec import RECEIVER_MEMORY_MB
from sume.store.sizing import item_size

NEEDS = ("calls", "cpu")


def usages(calls: CallsReport, cpu: CpuReport) -> dict[tuple[str, str], cost.Usage]:
    """What each kind of delivery uses, per design."""
    item = item_size(calls.job_item)
    record = item_size(calls.idempotency_record)
    event_bytes = len(calls.job_item.get("body", {}).get("S", "").encode())
    counted = item + 40  # the duplicate's counter update grows the item a little

    def use(design: str, kind: str, wru: int, sqs: int, row: str = "") -> cost.Usage:
        shown = "powertools" if design == "powertools" else "ours"
        made = tuple(calls.row(shown, row).calls) if row else ()
        return cost.Usage(cpu.median_us(design, kind), made, wru, sqs)

    return {
        ("new", "ours"): use("ours", "new", cost.wru(item), 1, "new"),
        ("duplicate", "ours"): use(
            "ours", "duplicate", cost.wru(item) + cost.wru(counted), 0, "duplicate (retry)"
        ),
        ("rejected", "ours"): use("ours", "rejected", 0, 0),
        ("new", "powertools"): use(
            "powertools", "new", 2 * cost.wru(record), max(1, math.ceil(event_bytes / 65536)), "new"
        ),
        ("duplicate", "powertools"): use(
            "powertools", "duplicate", cost.wru(record), 0, "duplicate (retry)"
        ),
        ("rejected", "powertools"): use("powertools", "rejected", 0, 0),
    }


def section(ctx: h.Context) -> None:
    calls, cpu = ctx.reports["calls"], ctx.reports["cpu"]
    memory = RECEIVER_MEMORY_MB
    print(
        f"## 5. Cost per million deliveries (USD, us-east-1 list prices checked "
        f"{cost.PRICES_CHECKED}; receiver {memory} MB arm64)\n"
    )
    used = usages(calls, cpu)
    rows = []
    for kind in KINDS:
        for label, design, api in (
            ("ours (HTTP API)", "ours", cost.HTTP_API_PER_M),
            ("Powertools idempotency (HTTP API)", "powertools", cost.HTTP_API_PER_M),
            ("ours behind a REST API", "ours", cost.REST_API_PER_M),
        ):
            u = used[(kind, design)]
            c = cost.per_million(u, memory, api)
            lines = (c.api, c.lambda_requests + c.lambda_duration, c.dynamodb, c.sqs)
            money = [f"{v:.2f}" for v in lines]
            rows.append(
                (kind, label, c.billed_ms, u.wru, u.sqs_requests, *money, f"**{c.total:.2f}**")
            )
    headers = ["delivery", "design", "billed ms", "WRU", "SQS req", "API", "Lambda", "DynamoDB"]
    print(h.table([*headers, "SQS", "total"], rows))
    item, record = item_size(calls.job_item), item_size(calls.idempotency_record)
    latency = ", ".join(f"{k} {v:.0f} ms" for k, v in cost.LATENCY_MS.items())
    print(
        f"\nModel: billed ms = measured CPU x {cost.FULL_VCPU_MB}/{memory} + per-call latency "
        f"({latency}), rounded up to 1 ms. Our job item is {item} B ({cost.wru(item)} WRU a "
        f"write; a duplicate pays the failed conditional write and the counter update), the "
        f"idempotency record {record} B.\n"
    )
    fixed = cost.failover_fixed_month(memory)
    rows = []
    for kind in KINDS:
        single = cost.per_million(used[(kind, "ours")], memory)
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
    print("Single region against two regions on an MRSC table (ours, HTTP API), per million:\n")
    headers = ["delivery", "DynamoDB 1 region", "DynamoDB MRSC", "total 1 region", "total MRSC"]
    print(h.table([*headers, "+"], rows))
    per_m = ", ".join(f"{fixed.total / m:.2f} at {m} M a month" for m in (1, 10, 100))
    print(
        f"\nFixed for two regions, whatever Sume delivers: {fixed.total:.2f} USD a month = "
        f"Route 53 health checks {fixed.health_checks:.2f}, their probes "
        f"{fixed.health_probes:.2f} ({cost.HEALTH_CHECKERS} checkers every "
        f"{cost.HEALTH_CHECK_INTERVAL_S} s per region, modelled), the second region's alarms, "
        f"dashboard and secrets {fixed.second_region:.2f}; per million deliveries {per_m}.\n"
    )
    print("A large event's second copy in the other region, per million (model):\n")
    copies = {f"{kib} KiB": cost.second_copy(kib * 1024) for kib in (257, 512, 1024)}
    costs = [(size, *(f"{v:.2f}" for v in c.values())) for size, c in copies.items()]
    print(h.table(["large event", *copies["257 KiB"]], costs))
    print("\nThe MRSC table's expiry, per million ended jobs (model):\n")
    ended = cost.expiry()
    row = (f"{cost.ENDED_ITEM_BYTES} B item", *(f"{v:.2f}" for v in ended.values()))
    print(h.table(["item", *ended], [row]))
    print()
