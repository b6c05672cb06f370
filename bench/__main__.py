"""``python -m bench`` (``make bench``): every measurement, side by side.

Progress goes to stderr, section by section, so stdout is the markdown report.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from dataclasses import dataclass

from bench.env import forbid_network, use_fake_aws

use_fake_aws()
forbid_network()

from bench import (  # noqa: E402
    artifacts,
    calls,
    capacity,
    coldstart,
    cost,
    cpu,
    indexes,
    throughput,
)
from bench.counting import short  # noqa: E402
from bench.report import (  # noqa: E402
    machine,
    paired_difference,
    paired_ratio,
    table,
    verdict,
)
from infra.spec import RECEIVER_MEMORY_MB  # noqa: E402
from sume.store.sizing import item_size  # noqa: E402

POWERTOOLS_RATIO_TARGET = 1.5
IMPORT_MARGIN_MS = 60.0
MiB = 1024 * 1024


@dataclass(frozen=True)
class Size:
    cpu_rounds: int
    cpu_batch: int
    breakdown_rounds: int
    breakdown_batch: int
    import_runs: int
    deliveries: int
    artifact_bytes: int
    artifact_rounds: int
    poller_items: int
    poller_window: float
    """Seconds each poller run of the round may start polls in."""


FULL = Size(9, 200, 7, 150, 5, 150, artifacts.SIZE, 2, capacity.ITEMS, capacity.WINDOW_SECONDS)
QUICK = Size(
    3,
    60,
    3,
    50,
    1,
    30,
    artifacts.QUICK_SIZE,
    1,
    capacity.QUICK_ITEMS,
    capacity.QUICK_WINDOW_SECONDS,
)
SECTIONS = ("calls", "cpu", "cold", "throughput", "artifacts", "poller", "indexes")


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
    memory = RECEIVER_MEMORY_MB
    worth = cost.cpu_per_million(report.median_us("ours", "new"), memory)
    print(
        f"\nNot a target: a new delivery's CPU ({ratio:.2f}x the floor) is worth "
        f"${worth:.3f} per million deliveries at {memory} MB; it stays here to catch "
        "regressions."
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
    print("\nPer-delivery telemetry, each part the difference of two layers above (paired):\n")
    telemetry = []
    for part, (below, above) in cpu.TELEMETRY.items():
        us = paired_difference(parts[above], parts[below]) * 1e6
        telemetry.append((part, f"{us:.0f}", f"{cost.cpu_per_million(us, memory):.4f}"))
    print(table(["telemetry", "us", f"USD per million at {memory} MB"], telemetry))
    print()


def section_cold(report: coldstart.ColdReport, targets: Targets) -> None:
    print(
        f"## 3. Cold start against an honest floor (fresh process, Lambda env, Tracer on; "
        f"CPU ms, median of {report.runs} runs)\n"
    )
    print(
        "Floor: what any correct receiver does before its first answer: `import boto3`, "
        "the DynamoDB, SQS and Secrets Manager clients, one secret read (kept). The read is "
        "answered at botocore's `before-send` (serialisation, signing and parsing run, the "
        "round trip does not), for the floor and the receiver alike.\n"
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
    print("\nWith the Tracer off (`POWERTOOLS_TRACE_DISABLED=true`; the X-Ray SDK not patched in):")
    for name, v in report.tracer_off_ms.items():
        print(
            f"- {name}: {statistics.median(v):.0f} CPU ms, "
            f"{paired_difference(v, floor):+.0f} vs floor"
        )
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
    off = paired_difference(report.tracer_off_ms[coldstart.RECEIVER_FIRST_USE], floor)
    targets.add(
        f"receiver cold start within {IMPORT_MARGIN_MS:.0f} ms of floor (import + first use)",
        f"{gap:+.0f} ms CPU with the Tracer ({off:+.0f} ms without)",
        gap <= IMPORT_MARGIN_MS,
    )
    print()


def section_throughput(report: throughput.ThroughputReport) -> None:
    print(
        f"## 4. Bursts on the local stack ({report.burst} deliveries from {report.senders} "
        f"senders at once, {report.rounds} rounds, ours and the floor taking turns; HTTP -> "
        "handler -> moto server, one process). BOUNDED BY MOTO, not by AWS\n"
    )
    if report.skipped:
        print(f"Not measured: {report.skipped}\n")
        return
    print(
        table(
            ["design", "mix", "deliveries", "per second", "p50 ms", "p99 ms", "answers"],
            [
                (
                    m.design,
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
    ratios = ", ".join(f"{name} {report.floor_ratio(name):.2f}x" for name in throughput.MIXES)
    print(
        f"\nFloor deliveries/s over ours under the same burst (median of the rounds' ratios; "
        f"1.00x: as fast as the floor): {ratios}.\n"
    )


def section_cost(calls_report: calls.CallsReport, cpu_report: cpu.CpuReport) -> None:
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
    section_cost_regions(usages, memory)


def section_cost_regions(usages: dict[tuple[str, str], cost.Usage], memory: int) -> None:
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


def _artifact_row(
    report: artifacts.ArtifactsReport, label: str, seconds: float, row: artifacts.Row | None
) -> tuple[object, ...]:
    copies = (artifacts.Role.OURS, artifacts.Role.ALTERNATIVE)
    ratio = report.over_limit(row) if row and row.case.role in copies else None
    best = row.best if row else None
    python_peak = row.traced.python_peak if row else None
    return (
        label,
        f"{seconds:.2f}",
        f"{artifacts.mb_per_second(report.size, seconds):.0f}",
        "" if ratio is None else f"{ratio:.2f}x",
        "" if best is None else f"{best.cpu_seconds:.2f}",
        "" if python_peak is None else f"{python_peak / MiB:.1f}",
        "" if best is None else f"{best.rss_before / MiB:.0f}",
        "" if best is None else f"{best.rss_peak / MiB:.0f}",
    )


def section_artifacts(report: artifacts.ArtifactsReport, targets: Targets) -> None:
    part_mib = report.part_size / MiB
    print(
        f"## 6. Artifact copies ({report.size / MiB:.0f} MiB from a loopback origin into S3 on "
        f"moto's server; each run a fresh process, fastest of {report.rounds}). "
        "BOUNDED BY MOTO on the upload side\n"
    )
    upload = report.find(artifacts.Role.UPLOAD_FLOOR, None)
    rows: list[tuple[object, ...]] = []
    for speed in (artifacts.FULL, artifacts.CAPPED):
        download = report.find(artifacts.Role.DOWNLOAD_FLOOR, speed)
        limit = report.limit(speed)
        if download is None or upload is None or limit is None:
            continue
        rows.append((f"**{speed.name}**", "", "", "", "", "", "", ""))
        rows.append(_artifact_row(report, download.case.label, download.seconds, download))
        rows.append(_artifact_row(report, upload.case.label, upload.seconds, upload))
        rows.append(_artifact_row(report, "limit: max(download, upload)", limit, None))
        for row in report.rows:
            copies = (artifacts.Role.OURS, artifacts.Role.ALTERNATIVE)
            if row.case.role in copies and row.case.speed == speed:
                rows.append(_artifact_row(report, row.case.label, row.seconds, row))
    print(
        table(
            [
                "transfer",
                "s",
                "MB/s",
                "x limit",
                "CPU s",
                "Python peak MiB",
                "RSS at start MiB",
                "peak RSS MiB",
            ],
            rows,
        )
    )
    print(
        "\nAn overlapped copy cannot beat the slower of download only and upload only for the "
        "same bytes, so that is its limit. Upload only is s3transfer's managed upload (up to 10 "
        "threads) from memory; the receiving end is moto, one Python process, which bounds "
        "every copy at full speed here. Python peak: tracemalloc, in a run of its own. Peak "
        "RSS: the copy's own high-water mark (VmHWM, reset just before the copy). Parts are "
        f"the worker's {part_mib:.0f} MiB. Under the cap the limit is one connection's, so a "
        "ranged copy has no x limit there: its measure is the speed-up over one stream."
    )
    from infra.spec import WORKER_MEMORY_MB, WORKER_TIMEOUT

    ours = [r for r in report.rows if r.case.role is artifacts.Role.OURS]
    if ours:
        seconds = report.fetch_seconds
        largest = ", ".join(
            f"{report.size / r.seconds * seconds / 1e9:.1f} GB ({r.case.label.split(': ')[-1]}, "
            f"{r.case.speed.name if r.case.speed else ''})"
            for r in ours
        )
        planned = report.planned_rate * seconds
        deployed = report.find(artifacts.Role.OURS, artifacts.FULL, report.connections) or ours[0]
        cpu = deployed.best.cpu_seconds / report.size * 1e9
        share = WORKER_MEMORY_MB / cost.FULL_VCPU_MB
        print(
            f"\nTimeout math (`infra/spec.py`): one artifact's copy may take {seconds:.0f} s "
            f"(`HTTP_TOTAL_TIMEOUT_SECONDS`) of the worker's {WORKER_TIMEOUT} s; at ours' rates "
            f"above that is {largest}. The worker plans at "
            f"{report.planned_rate / 1e6:.0f} MB/s (`ARTIFACT_PLANNED_BYTES_PER_SECOND`): "
            f"{planned / 1e9:.1f} GB per invocation, and `MAX_ARTIFACT_BYTES` is "
            f"{report.max_bytes / 1e9:.2f} GB ({report.max_bytes / 2**30:.0f} GiB). Ours as "
            f"deployed costs {cpu:.1f} CPU s per GB at full speed here, so the worker's "
            f"{WORKER_MEMORY_MB} MB ({share:.2f} of a vCPU) carries about "
            f"{share / cpu * 1e3:.0f} MB/s."
        )
    print()
    full = report.find(artifacts.Role.OURS, artifacts.FULL, report.connections)
    ratio = report.over_limit(full) if full else None
    targets.add(
        f"artifact copy at full speed: ours <= {artifacts.FULL_SPEED_TARGET}x the overlapped limit",
        "not measured" if ratio is None else f"{ratio:.2f}x",
        None if ratio is None else ratio <= artifacts.FULL_SPEED_TARGET,
    )
    speedup = report.ranged_speedup(artifacts.CAPPED)
    targets.add(
        f"artifact copy {artifacts.CAPPED.name}: ranged >= {artifacts.RANGED_TARGET}x one stream",
        "not measured" if speedup is None else f"{speedup:.2f}x",
        None if speedup is None else speedup >= artifacts.RANGED_TARGET,
    )
    peak = report.python_peak()
    targets.add(
        f"artifact copy memory: ours' Python peak <= {report.bound_bytes / MiB:.0f} MiB "
        f"({report.bound_parts} parts, ARTIFACT_CONNECTIONS + ARTIFACT_UPLOADS, and "
        f"{artifacts.FRAMING_PER_UPLOAD // MiB} MiB per upload)",
        f"{peak / MiB:.1f} MiB ({peak / report.part_size:.1f} parts)",
        peak <= report.bound_bytes,
    )


def section_poller(report: capacity.CapacityReport, targets: Targets) -> None:
    print(
        "## 7. Poller capacity (a round fanned out: 1, 4 and 16 runs, each a process working "
        "16 / runs shards through `polling.compose.build_shard_run`; one moto server; status "
        f"URLs on loopback answering `running` after {report.delay * 1000:.0f} ms, so every "
        f"poll reschedules; MAX_PARALLEL_POLLS {report.parallel} a run)\n"
    )
    one = report.rows[0]
    print(
        table(
            [
                "runs",
                "due",
                "window s",
                "ran s",
                "polled",
                "polled/s",
                "x one run",
                "Query",
                "UpdateItem",
                "lease calls",
                "DynamoDB calls per polled job",
                "jobs table's per polled job",
            ],
            [
                (
                    row.runs,
                    row.due,
                    f"{row.window:.0f}",
                    f"{row.seconds:.1f}",
                    row.polled,
                    f"{row.polled_per_second:.1f}",
                    f"{report.growth(row):.1f}",
                    row.calls["dynamodb.Query"],
                    row.calls["dynamodb.UpdateItem"],
                    row.lease_calls,
                    f"{row.calls_per_polled_job:.3f}",
                    f"{row.job_calls_per_polled_job:.3f}",
                )
                for row in report.rows
            ],
        )
    )
    bound = report.parallel / report.delay
    print(
        f"\nEach run polls at most MAX_PARALLEL_POLLS / latency = {bound:.2f} jobs/s here. "
        "Lease calls are a claim (`PutItem`) and a release (`UpdateItem`) per shard per round, "
        "whatever the backlog; the jobs table's calls are an `UpdateItem` per poll and a "
        "`Query` per page of 50. Every process shares this machine's 2 cores with moto's "
        "server, so the last row is bound by CPU, not by the design.\n"
    )
    for row in report.rows[1:]:
        targets.add(
            f"poller: {row.runs} parallel runs poll >= 0.7 x {row.runs} x one run's rate",
            f"{report.growth(row):.1f}x ({row.polled_per_second:.1f} vs "
            f"{one.polled_per_second:.1f} polls/s)",
            report.growth(row) >= 0.7 * row.runs,
        )
    worst = max(row.job_calls_per_polled_job for row in report.rows)
    targets.add(
        "poller: the jobs table's DynamoDB calls per polled job stay about 1.02 (<= 1.05)",
        f"{worst:.3f} at most",
        worst <= 1.05,
    )
    first, last = report.intervals
    runs_deployed = capacity.DUE_SHARDS
    per_run = report.deployed_parallel / 0.5
    aws_rate = runs_deployed * per_run
    print(
        "In AWS a round polls about S x P / L jobs a second: S parallel runs (one per shard "
        f"group: {runs_deployed} at the default `due_shards` {capacity.DUE_SHARDS} and "
        "`poller_shards_per_run` 1), P = `MAX_PARALLEL_POLLS` "
        f"({report.deployed_parallel}) and L Sume's answer time, as long as each run's CPU "
        "share carries P / L (about 64 polls/s at 512 MB, docs/poller.md). Each run has its own "
        "invocation, CPU and deadline, so the rows above grow with S until this machine's "
        f"cores are used up. At L = 500 ms: {runs_deployed} x {report.deployed_parallel} / "
        f"0.5 = {aws_rate:,.0f} polls/s. A schedule keeps up with N <= rate x W x I / R "
        f"outstanding jobs: W = {report.window:.0f} s in which a run starts polls (budget "
        f"{report.budget:.0f} s, the function's timeout less the handler's margin, less one "
        f"poll's worst case of {report.reserve:.0f} s), R = {report.every} s between rounds, "
        f"I the interval at which each job is due: {first} s for fresh jobs, up to {last} s.\n"
    )
    print(
        table(
            ["runs S", "polls/s (S x P / L)", f"N at I = {first} s", f"N at I = {last} s"],
            [
                (
                    runs,
                    f"{runs * per_run:,.0f}",
                    f"{report.backlog(runs * per_run, first):,.0f}",
                    f"{report.backlog(runs * per_run, last):,.0f}",
                )
                for runs in (1, 16, 64)
            ],
        )
    )
    print()


def section_indexes(report: indexes.IndexReport, targets: Targets) -> None:
    print(
        "## 8. Index writes per job (the real handlers on moto in-process; every write's "
        "item read before and after, each index's entry compared)\n"
    )
    rows = []
    for life in report.lives:
        cells: list[object] = [life.label, sum(t.writes for t in life.phases.values())]
        for index in report.indexes:
            writes, units = life.total(index)
            cells.append(f"{writes} ({units} WRU)")
        by = ", ".join(
            f"{phase} {tally.index_units.get(indexes.REPORT_INDEX, 0)}"
            for phase, tally in life.phases.items()
        )
        rows.append((*cells, by, life.ending))
    headers = ["job's life", "table writes"]
    headers += [
        f"`{index}` writes (WRU)"
        + (" as it was (ALL), not deployed" if index == report.before else "")
        for index in report.indexes
    ]
    headers += [f"`{indexes.REPORT_INDEX}` WRU by writer", "ending written"]
    print(table(headers, rows))
    due_units = indexes.completed_due_units(report)
    targets.add(
        f"`{indexes.DUE_INDEX}`: at most 3 write units for a job completed with 2 artifacts",
        str(due_units),
        due_units <= 3,
    )
    unended = [life.label for life in report.lives if not life.ended]
    targets.add(
        "every index scenario runs to its ending",
        f"{len(report.lives) - len(unended)} of {len(report.lives)}",
        not unended,
    )
    per_job = max(life.total(indexes.REPORT_INDEX)[1] for life in report.lives)
    by_receiver = indexes.report_index_writes_by_receiver(report)
    usd = per_job * cost.DDB_WRU_PER_M
    print(
        f"\nThe report index's keys add {report.report_key_bytes} B to the item. At most "
        f"{per_job} write unit per job goes to `{indexes.REPORT_INDEX}` (${usd:.3f} "
        "per million jobs at on-demand prices), from the write that ends it; "
        f"the receiver's writes make {by_receiver} of them.\n"
    )
    targets.add(
        f"receiver: 0 writes of the `{indexes.REPORT_INDEX}` index",
        str(by_receiver),
        by_receiver == 0,
    )
    targets.add(
        f"`{indexes.REPORT_INDEX}`: at most 1 write unit per job", str(per_job), per_job <= 1
    )


def progress(started: float, what: str) -> None:
    """Where the bench is, on stderr, so stdout stays the markdown report."""
    print(f"[bench +{time.time() - started:.0f} s] {what}", file=sys.stderr, flush=True)


def _sections(parser: argparse.ArgumentParser, only: str, skip: str) -> set[str]:
    named = {s for s in f"{only},{skip}".split(",") if s}
    if unknown := named - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; known: {','.join(SECTIONS)}")
    chosen = set(filter(None, only.split(","))) or set(SECTIONS)
    return chosen - set(skip.split(","))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="fewer rounds, smaller artifact, shorter poller runs"
    )
    parser.add_argument("--only", default="", help=f"comma-separated: {','.join(SECTIONS)}")
    parser.add_argument("--skip", default="", help="comma-separated sections to leave out")
    parser.add_argument(
        "--artifact-mib", type=int, default=None, help="artifact size (default 256, --quick 32)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of ours on new deliveries"
    )
    return parser


def _summary(targets: Targets, seconds: float) -> None:
    print("## Targets\n")
    print(table(["target", "measured", ""], [(t, m, verdict(met)) for t, m, met in targets.rows]))
    missed = [t for t, _, met in targets.rows if met is False]
    unmeasured = [t for t, _, met in targets.rows if met is None]
    met = sum(1 for _, _, m in targets.rows if m)
    print(f"\n{met} of {len(targets.rows)} targets met in {seconds:.0f} s.")
    if missed:
        print("Missed: " + "; ".join(missed) + ". See docs/bench.md for why.")
    if unmeasured:
        print("Not measurable yet: " + "; ".join(unmeasured) + ".")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    chosen = _sections(parser, args.only, args.skip)
    artifact_bytes = args.artifact_mib * MiB if args.artifact_mib else size.artifact_bytes
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    started = time.time()
    print(f"# make bench{' --quick' if args.quick else ''}\n")
    print(f"Machine: {machine()}\n")
    targets = Targets([])
    cpu_report: cpu.CpuReport | None = None
    parts: dict[str, list[float]] = {}
    # CPU first: nothing else (moto, servers, threads) is loaded or running yet.
    if "cpu" in chosen:
        progress(started, "2. receiver CPU per delivery (Stubber) and its breakdown")
        cpu_report = cpu.measure(size.cpu_rounds, size.cpu_batch)
        parts = cpu.breakdown(size.breakdown_rounds, size.breakdown_batch)
    calls_report: calls.CallsReport | None = None
    if "calls" in chosen:
        progress(started, "1. AWS calls per delivery (moto in-process)")
        calls_report = calls.measure()
        section_calls(calls_report, targets)
    if cpu_report:
        section_cpu(cpu_report, parts, targets)
    if "cold" in chosen:
        progress(started, "3. cold start against the floor (fresh processes)")
        section_cold(coldstart.measure(size.import_runs), targets)
    if "throughput" in chosen:
        progress(started, "4. local stack throughput")
        section_throughput(throughput.measure(size.deliveries))
    if calls_report and cpu_report:
        section_cost(calls_report, cpu_report)
    if "artifacts" in chosen:
        progress(started, f"6. artifact copies ({artifact_bytes / MiB:.0f} MiB, fresh processes)")
        section_artifacts(artifacts.measure(artifact_bytes, size.artifact_rounds), targets)
    if "poller" in chosen:
        progress(started, "7. poller capacity (a round in 1, 4 and 16 processes)")
        section_poller(capacity.measure(size.poller_items, size.poller_window), targets)
    if "indexes" in chosen:
        progress(started, "8. index writes per job (moto in-process)")
        section_indexes(indexes.measure(), targets)
    if args.profile:
        print("## cProfile: ours, new deliveries (own time)\n\n```")
        print(cpu.profile("ours", "new", size.cpu_batch))
        print("```\n")
    _summary(targets, time.time() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
