"""``python -m devtools.bench`` (``make bench``): every measurement, side by side."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from dataclasses import dataclass

from devtools.bench.env import forbid_network, use_fake_aws

use_fake_aws()
forbid_network()

from devtools.bench import calls, coldstart, cost, cpu, throughput  # noqa: E402
from devtools.bench.counting import short  # noqa: E402
from devtools.bench.report import (  # noqa: E402
    machine,
    paired_difference,
    paired_ratio,
    table,
    verdict,
)

CPU_RATIO_TARGET = 1.25
POWERTOOLS_RATIO_TARGET = 1.5
IMPORT_MARGIN_MS = 60.0


@dataclass(frozen=True)
class Size:
    cpu_rounds: int
    cpu_batch: int
    breakdown_rounds: int
    breakdown_batch: int
    import_runs: int
    deliveries: int


FULL = Size(9, 200, 7, 150, 5, 150)
QUICK = Size(3, 60, 3, 50, 1, 30)


@dataclass
class Targets:
    rows: list[tuple[str, str, bool | None]]

    def add(self, target: str, measured: str, met: bool | None) -> None:
        self.rows.append((target, measured, met))


def section_calls(report: calls.CallsReport, targets: Targets) -> None:
    print("## 1. AWS calls per delivery (moto in-process, counted on botocore `before-call`)\n")
    print(
        table(
            ["design", "delivery", "answer", "AWS calls", "which", "target", ""],
            [
                (
                    r.design,
                    r.delivery,
                    f"{r.status} {r.result}",
                    len(r.calls),
                    short(r.calls),
                    r.target.text if r.target else "",
                    verdict(r.met) if r.target else "",
                )
                for r in report.rows
            ],
        )
    )
    print("\nAt import, in a fresh process with the Lambda environment:")
    for module, found in report.at_import.items():
        if isinstance(found, str):
            print(f"- `{module}`: import failed: {found}")
            targets.add(f"{module}: 0 AWS calls at import", "import failed", False)
            continue
        print(
            f"- `{module}`: {found['calls']} AWS calls, {found['clients']} clients created, "
            f"{found['connects']} sockets connected"
        )
        targets.add(
            f"{module}: 0 AWS calls at import",
            f"{found['calls']} calls, {found['clients']} clients",
            found["calls"] == 0 and found["clients"] == 0,
        )
    missing = {"worker", "poller"} - set(calls.handler_modules())
    if missing:
        print(f"\nNot measured: {', '.join(sorted(missing))} (handler not present yet).")
    by_kind = {
        "new delivery: exactly 2 AWS calls": [
            r for r in report.rows if r.design == "ours" and r.delivery == "new"
        ],
        "duplicate: 1-2 AWS calls (3 only re-enqueueing)": [
            r for r in report.rows if r.design == "ours" and r.delivery.startswith("duplicate")
        ],
        "rejected: 0 AWS calls": [
            r for r in report.rows if r.design == "ours" and r.target is calls.ZERO
        ],
    }
    for name, rows in by_kind.items():
        counts = sorted({len(r.calls) for r in rows})
        targets.add(name, "/".join(map(str, counts)), all(r.met for r in rows))
    print()


def section_cpu(report: cpu.CpuReport, parts: dict[str, list[float]], targets: Targets) -> None:
    print(
        f"## 2. Receiver CPU per delivery (Stubber, no network; median of {report.rounds} "
        f"interleaved rounds x {report.batch} deliveries)\n"
    )
    rows = []
    for kind in cpu.KINDS:
        s = {name: report.seconds[(name, kind)] for name in cpu.DESIGNS}
        rows.append(
            (
                kind,
                f"{report.median_us('floor', kind):.0f}",
                f"{report.median_us('ours', kind):.0f}",
                f"{report.median_us('powertools', kind):.0f}",
                f"{paired_ratio(s['ours'], s['floor']):.2f}x",
                f"{paired_ratio(s['powertools'], s['ours']):.2f}x",
            )
        )
    print(
        table(
            [
                "delivery",
                "floor us",
                "ours us",
                "Powertools idempotency us",
                "ours / floor",
                "Powertools / ours",
            ],
            rows,
        )
    )
    new = {name: report.seconds[(name, "new")] for name in cpu.DESIGNS}
    ratio = paired_ratio(new["ours"], new["floor"])
    ahead = paired_ratio(new["powertools"], new["ours"])
    targets.add(
        f"CPU per new delivery <= {CPU_RATIO_TARGET}x floor",
        f"{ratio:.2f}x",
        ratio <= CPU_RATIO_TARGET,
    )
    targets.add(
        f"Powertools idempotency >= {POWERTOOLS_RATIO_TARGET}x ours (new)",
        f"{ahead:.2f}x",
        ahead >= POWERTOOLS_RATIO_TARGET,
    )
    print("\nWhere a new delivery's CPU goes (ours, peeled layer by layer; same method):\n")
    floor = parts["floor"]
    print(
        table(
            ["layer", "us", "x floor"],
            [
                (name, f"{statistics.median(v) * 1e6:.0f}", f"{paired_ratio(v, floor):.2f}x")
                for name, v in parts.items()
            ],
        )
    )
    print()


def section_cold(report: coldstart.ColdReport, targets: Targets) -> None:
    print(
        f"## 3. Cold-start proxy (fresh process, Lambda env, Tracer on; CPU ms, median of "
        f"{report.runs} runs)\n"
    )
    floor = report.ms[coldstart.FLOOR]
    print(
        table(
            ["import", "CPU ms", "wall ms", "vs floor (CPU)"],
            [
                (
                    name,
                    f"{report.median(name):.0f}",
                    f"{report.median_wall(name):.0f}",
                    f"{paired_difference(v, floor):+.0f}",
                )
                for name, v in report.ms.items()
            ],
        )
    )
    print("\nWith the Tracer off (`POWERTOOLS_TRACE_DISABLED=true`):")
    for name, v in report.tracer_off_ms.items():
        print(f"- {name}: {statistics.median(v):.0f} CPU ms")
    print(
        "\nHeaviest imports of `import receiver` (`python -X importtime`, own time per package):\n"
    )
    print(table(["package", "ms"], [(p, f"{ms:.0f}") for p, ms in report.heaviest]))
    print("\nHeaviest single modules (own ms / cumulative ms):\n")
    print(
        table(
            ["module", "own ms", "cumulative ms"],
            [(m, f"{a:.0f}", f"{b:.0f}") for m, a, b in report.heaviest_modules],
        )
    )
    gap = paired_difference(report.ms[coldstart.RECEIVER_FIRST_USE], floor)
    alone = paired_difference(report.ms["import receiver"], floor)
    targets.add(
        f"receiver cold start within {IMPORT_MARGIN_MS:.0f} ms of floor (import + first-use build)",
        f"{gap:+.0f} ms CPU (import alone {alone:+.0f} ms)",
        gap <= IMPORT_MARGIN_MS,
    )
    print()


def section_throughput(report: throughput.ThroughputReport) -> None:
    print(
        "## 4. Local stack throughput (HTTP -> receiver -> moto server, "
        f"{report.concurrency} client threads). BOUNDED BY MOTO, not by AWS\n"
    )
    if report.skipped:
        print(f"Not measured: {report.skipped}\n")
        return
    print(
        table(
            ["mix", "deliveries", "per second", "p50 ms", "p99 ms", "answers"],
            [
                (
                    m.name,
                    m.deliveries,
                    f"{m.per_second:.1f}",
                    f"{throughput.median_ms(m):.0f}",
                    f"{m.percentile(99):.0f}",
                    ", ".join(f"{k} {v}" for k, v in sorted(m.answers.items())),
                )
                for m in report.mixes
            ],
        )
    )
    print()


def section_cost(calls_report: calls.CallsReport, cpu_report: cpu.CpuReport) -> None:
    memory = cost.receiver_memory_mb()
    print(
        f"## 5. Cost per million deliveries (USD, us-east-1 list prices checked "
        f"{cost.PRICES_CHECKED}; receiver {memory} MB arm64)\n"
    )
    ours = {r.delivery: r for r in calls_report.rows if r.design == "ours"}
    powertools = {r.delivery: r for r in calls_report.rows if r.design == "powertools"}
    item = cost.item_bytes(calls_report.job_item)
    record = cost.item_bytes(calls_report.idempotency_record)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run in ~1 min")
    parser.add_argument(
        "--skip", default="", help="comma-separated sections to skip: calls,cpu,cold,throughput"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of ours on new deliveries"
    )
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    skip = set(filter(None, args.skip.split(",")))
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    started = time.time()
    print(f"# make bench{' --quick' if args.quick else ''}\n")
    print(f"Machine: {machine()}\n")
    targets = Targets([])
    # CPU first: nothing else (moto, servers, threads) is loaded or running yet.
    cpu_report = cpu.measure(size.cpu_rounds, size.cpu_batch) if "cpu" not in skip else None
    parts = cpu.breakdown(size.breakdown_rounds, size.breakdown_batch) if cpu_report else {}
    calls_report = calls.measure() if "calls" not in skip else None
    if calls_report:
        section_calls(calls_report, targets)
    if cpu_report:
        section_cpu(cpu_report, parts, targets)
    if "cold" not in skip:
        section_cold(coldstart.measure(size.import_runs), targets)
    if "throughput" not in skip:
        section_throughput(throughput.measure(size.deliveries))
    if calls_report and cpu_report:
        section_cost(calls_report, cpu_report)
    if args.profile:
        print("## cProfile: ours, new deliveries (own time)\n\n```")
        print(cpu.profile("ours", "new", size.cpu_batch))
        print("```\n")
    print("## Targets\n")
    print(table(["target", "measured", ""], [(t, m, verdict(met)) for t, m, met in targets.rows]))
    missed = [t for t, _, met in targets.rows if met is False]
    met = len(targets.rows) - len(missed)
    print(f"\n{met} of {len(targets.rows)} targets met in {time.time() - started:.0f} s.")
    if missed:
        print("Missed: " + "; ".join(missed) + ". See the README's bench section for why.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
