"""Section 5: cost per million deliveries, single region and two, priced by ``bench.cost``
from the calls and write units (section 1) and the CPU (section 2) measured; then what two
regions add for large events and the expiry (modelled, no AWS account here)."""

from __future__ import annotations

from bench import cost
from bench import harness as h
from bench.cpu import KINDS
from infra.spec import RECEIVER_MEMORY_MB
from sume.store.sizing import item_size

NEEDS = ("calls", "cpu")
ROWS = {"new": "new", "duplicate": "duplicate (retry)", "rejected": "rejected: forged signature"}
"""The section 1 row whose calls and write units price each kind of delivery."""
DESIGNS = (
    ("ours (HTTP API)", "ours", cost.HTTP_API_PER_M),
    ("Powertools idempotency (HTTP API)", "powertools", cost.HTTP_API_PER_M),
    ("ours behind a REST API", "ours", cost.REST_API_PER_M),
)


def section(ctx: h.Context) -> None:
    calls, cpu = ctx.reports["calls"], ctx.reports["cpu"]
    memory = RECEIVER_MEMORY_MB
    print(
        f"## 5. Cost per million deliveries (USD, us-east-1 list prices checked "
        f"{cost.PRICES_CHECKED}; receiver {memory} MB arm64)\n"
    )
    rows = []
    ours: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        for label, design, api in DESIGNS:
            row = calls.row(design, ROWS[kind])
            sqs = sum(call.startswith("sqs.") for call in row.calls)
            used = cost.Usage(cpu.median_us(design, kind), tuple(row.calls), row.wru, sqs)
            ms, lines = cost.billed_ms(used, memory), cost.per_million(used, memory, api)
            ours.setdefault(kind, lines)  # the first design's: ours on the HTTP API
            money = [f"{v:.2f}" for v in lines.values()]
            rows.append((kind, label, ms, row.wru, sqs, *money, f"**{sum(lines.values()):.2f}**"))
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
    rows = []
    for kind, single in ours.items():
        both = cost.mrsc(single)
        one, two = sum(single.values()), sum(both.values())
        dynamodb = f"{single['DynamoDB']:.2f}", f"{both['DynamoDB']:.2f}"
        rows.append((kind, *dynamodb, f"**{one:.2f}**", f"**{two:.2f}**", f"{two - one:+.2f}"))
    print("Single region against two regions on an MRSC table (ours, HTTP API), per million:\n")
    headers = ["delivery", "DynamoDB 1 region", "DynamoDB MRSC", "total 1 region", "total MRSC"]
    print(h.table([*headers, "+"], rows))
    fixed = cost.failover_fixed_month(memory)
    total = sum(fixed.values())
    per_m = ", ".join(f"{total / m:.2f} at {m} M a month" for m in (1, 10, 100))
    print(
        f"\nFixed for two regions, whatever Sume delivers: {total:.2f} USD a month = "
        f"Route 53 health checks {fixed['health checks']:.2f}, their probes "
        f"{fixed['probes']:.2f} ({cost.HEALTH_CHECKERS} checkers every "
        f"{cost.HEALTH_CHECK_INTERVAL_S} s per region, modelled), the second region's alarms, "
        f"dashboard and secrets {fixed['second region']:.2f}; per million deliveries {per_m}.\n"
    )
    print("A large event's second copy in the other region, per million (model):\n")
    copies = {f"{kib} KiB": cost.second_copy(kib * 1024) for kib in (257, 512, 1024)}
    costs = [(size, *(f"{v:.2f}" for v in c.values())) for size, c in copies.items()]
    print(h.table(["large event", *copies["257 KiB"]], costs))
    print("\nThe MRSC table's expiry, per million ended jobs (model):\n")
    ended = cost.expiry()
    item_row = (f"{cost.ENDED_ITEM_BYTES} B item", *(f"{v:.2f}" for v in ended.values()))
    print(h.table(["item", *ended], [item_row]))
    print()
