"""Section 9 of the report: what a million jobs cost end to end, per path, against the floor.

Ours is priced from what ``bench.jobpaths`` counted on each path; the floor
design (``bench.jobfloor``) from its written-down calls, with what no design
can choose apart measured on ours: each of its writes costs ours' mean write on
the path (the same item), its index writes are ours' images as a keys-only
index would take them, its reads and CPU are ours'. Prices: ``bench.cost``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench import cost, jobfloor
from bench.counting import short
from bench.jobpaths import ESM_BATCH, Invocation, PathRun
from bench.report import Targets, table
from infra import spec

MEMORY_MB = {
    "receiver": spec.RECEIVER_MEMORY_MB,
    "worker": spec.WORKER_MEMORY_MB,
    "poller": spec.POLLER_MEMORY_MB,
}
TARGET_RATIO = 1.15
ROUNDS_A_MONTH = 30 * 24 * 60 // spec.DEFAULT_POLL_RATE_MINUTES
S3_PUTS = ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")


@dataclass
class Bill:
    """What one job (or one round) uses of each priced thing."""

    api: int = 0
    requests: Counter[str] = field(default_factory=Counter)
    """Lambda requests per function."""
    billed_ms: dict[str, float] = field(default_factory=dict)
    """Billed Lambda ms per function."""
    wru: float = 0.0
    index_wru: float = 0.0
    rru: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)

    def lines(self) -> dict[str, float]:
        """USD per million of each line."""
        duration = sum(
            ms / 1000 * MEMORY_MB[f] / 1024 * cost.LAMBDA_GB_SECOND * 1e6
            for f, ms in self.billed_ms.items()
        )

        def count(service: str, operations: tuple[str, ...] = ()) -> int:
            return sum(
                n
                for call, n in self.calls.items()
                if call.split(".")[0] == service
                and (not operations or call.split(".")[1] in operations)
            )

        return {
            "API": self.api * cost.HTTP_API_PER_M,
            "Lambda requests": sum(self.requests.values()) * cost.LAMBDA_REQUEST_PER_M,
            "Lambda duration": duration,
            "DynamoDB writes": self.wru * cost.DDB_WRU_PER_M,
            "index writes": self.index_wru * cost.DDB_WRU_PER_M,
            "DynamoDB reads": self.rru * cost.DDB_RRU_PER_M,
            "SQS": count("sqs") * cost.SQS_REQUEST_PER_M,
            "EventBridge": count("events", ("PutEvents",)) * cost.EVENTS_PER_M,
            "S3": count("s3", S3_PUTS) * cost.S3_PUT_PER_M
            + count("s3", ("GetObject",)) * cost.S3_GET_PER_M,
            "Secrets Manager": count("secretsmanager") * cost.SECRETS_CALL_PER_M,
        }

    def total(self) -> float:
        return sum(self.lines().values())


def cpu_scale(function: str) -> float:
    return max(1.0, cost.FULL_VCPU_MB / MEMORY_MB[function])


def billed_ms(function: str, cpu_ms: float, calls: list[str], http_requests: int) -> float:
    wait = sum(cost.LATENCY_MS.get(c.split(".")[0], 10.0) for c in calls)
    return max(1, math.ceil(cpu_ms * cpu_scale(function) + wait + http_requests * HTTP_MS))


HTTP_MS = cost.HTTP_LATENCY_MS


def _per_function(invocations: list[Invocation]) -> tuple[dict[str, float], dict[str, float]]:
    """(billed ms, CPU ms) per function."""
    billed: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for i in invocations:
        ms = billed_ms(i.function, i.cpu_ms, i.calls, i.http_requests)
        billed[i.function] = billed.get(i.function, 0.0) + ms
        cpu[i.function] = cpu.get(i.function, 0.0) + i.cpu_ms
    return billed, cpu


def _less(mine: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    return {f: max(0.0, v - theirs.get(f, 0.0)) for f, v in mine.items()}


@dataclass
class Priced:
    run: PathRun
    ours: Bill
    floor: Bill
    cpu_ms: dict[str, float]
    writes: int
    """Ours' table writes on the path (the round's subtracted)."""

    @property
    def ratio(self) -> float:
        return self.ours.total() / self.floor.total()


def ours(run: PathRun) -> tuple[Bill, dict[str, float], int]:
    billed, cpu = _per_function(run.invocations)
    calls, requests = run.calls(), run.requests()
    units = run.units
    wru, rru, writes = float(units.wru), units.rru, units.writes
    index = float(sum(units.index_wru.values()))
    if run.round is not None:
        # The round is paid whether or not this job is due in it: its share is the difference.
        round_billed, round_cpu = _per_function(run.round.invocations)
        billed, cpu = _less(billed, round_billed), _less(cpu, round_cpu)
        calls -= run.round.calls()
        requests -= run.round.requests()
        wru -= run.round.units.wru
        rru = max(0.0, rru - run.round.units.rru)
        writes -= run.round.units.writes
        index -= sum(run.round.units.index_wru.values())
    bill = Bill(run.api_requests, requests, billed, wru, index, rru, calls)
    return bill, cpu, writes


def floor(run: PathRun, mine: Bill, cpu: dict[str, float], writes: int) -> Bill:
    steps = jobfloor.FLOORS[run.label]
    hand_offs = jobfloor.hand_offs(steps)
    requests: Counter[str] = Counter()
    if run.api_requests:
        requests["receiver"] = run.api_requests
    if hand_offs:
        requests["worker"] = hand_offs
    http = Counter[str]()
    for i in run.invocations:
        http[i.function] += i.http_requests
    if run.round is not None:
        for i in run.round.invocations:
            http[i.function] -= i.http_requests
    billed = {}
    for function in set(requests) | {s.function for s in steps if s.function in MEMORY_MB}:
        own = [s.call for s in steps if s.function == function]
        billed[function] = billed_ms(function, cpu.get(function, 0.0), own, http[function])
    calls = Counter(s.call for s in steps)
    for call in ESM_BATCH:
        calls[call] += hand_offs
    per_write = mine.wru / writes if writes else 1.0
    keys_only = sum(run.units.keys_only_wru.values())
    if run.round is not None:
        keys_only -= sum(run.round.units.keys_only_wru.values())
    return Bill(
        run.api_requests,
        requests,
        billed,
        jobfloor.table_writes(steps) * per_write,
        float(keys_only),
        mine.rru,
        calls,
    )


def price(run: PathRun) -> Priced:
    mine, cpu, writes = ours(run)
    return Priced(run, mine, floor(run, mine, cpu, writes), cpu, writes)


TEMPLATE = Path(__file__).resolve().parents[1] / "cdk.out" / "SumeWebhooks-dev.template.json"
COUNTED = {
    "alarms": "AWS::CloudWatch::Alarm",
    "dashboards": "AWS::CloudWatch::Dashboard",
    "secrets": "AWS::SecretsManager::Secret",
    "SQS event sources": "AWS::Lambda::EventSourceMapping",
}
# An SQS event source long-polls whether or not messages come: five pollers
# each asking every 20 s is the model's assumption (Lambda does not publish it).
IDLE_POLLERS = 5
IDLE_RECEIVES_A_MONTH = IDLE_POLLERS * 3 * 60 * 24 * 30


def stack_counts(template: Path = TEMPLATE) -> dict[str, int] | None:
    """What the synthesized stack (``make synth``) holds of each fixed-priced resource."""
    if not template.exists():
        return None
    resources = json.loads(template.read_text())["Resources"].values()
    found = Counter(r["Type"] for r in resources)
    return {name: found[cfn] for name, cfn in COUNTED.items()}


def fixed_month(empty_round: PathRun, counts: dict[str, int] | None) -> dict[str, float]:
    """USD a month whatever Sume delivers: the poller's rounds and what the stack keeps."""
    bill, _, _ = ours(empty_round)
    rounds = {k: v * ROUNDS_A_MONTH / 1e6 for k, v in bill.lines().items()}
    fixed = {f"poller rounds: {k}": v for k, v in rounds.items() if v}
    if counts is not None:
        fixed[f"{counts['alarms']} alarms"] = counts["alarms"] * cost.ALARM_MONTH
        fixed[f"{counts['dashboards']} dashboard"] = counts["dashboards"] * cost.DASHBOARD_MONTH
        fixed[f"{counts['secrets']} secrets"] = counts["secrets"] * cost.SECRET_MONTH
        idle = counts["SQS event sources"] * IDLE_RECEIVES_A_MONTH
        fixed[f"{counts['SQS event sources']} SQS event sources' empty receives (modelled)"] = (
            idle * cost.SQS_REQUEST_PER_M / 1e6
        )
    # A warm receiver reads its secret once per 5 minutes (the cache's age).
    fixed["secret reads, per warm receiver"] = ROUNDS_A_MONTH * cost.SECRETS_CALL_PER_M / 1e6
    if spec.RECEIVER_SNAPSTART:
        # One published version at a time (a deploy deletes the one it replaces);
        # each restore is priced per new container in section 3, not here.
        cached, _ = cost.snapstart(spec.RECEIVER_MEMORY_MB)
        fixed["receiver's SnapStart snapshot, 1 version cached"] = cached
    return fixed


LINES = (
    "API",
    "Lambda requests",
    "Lambda duration",
    "DynamoDB writes",
    "index writes",
    "DynamoDB reads",
    "SQS",
    "EventBridge",
    "S3",
    "Secrets Manager",
)


DYNAMODB_WRITES = ("dynamodb.PutItem", "dynamodb.UpdateItem", "dynamodb.DeleteItem")


def as_writes(calls: Counter[str]) -> Counter[str]:
    """``calls`` with every DynamoDB write as one name: a write is a write, whatever its verb."""
    return Counter("dynamodb.write" if c in DYNAMODB_WRITES else c for c in calls.elements())


def beyond(p: Priced) -> Counter[str]:
    """Ours' calls on the path that the floor does not make."""
    return as_writes(p.ours.calls) - as_writes(p.floor.calls)


def _beyond(p: Priced) -> str:
    extra = beyond(p)
    return short(sorted(extra.elements())) if extra else "-"


def render(
    priced: list[Priced], fixed: dict[str, float], counted_from: str, targets: Targets
) -> None:
    print(
        "## 9. Cost per million jobs, end to end, per path (USD, us-east-1 list prices checked "
        f"{cost.PRICES_CHECKED}; every call counted on moto through the real handlers)\n"
    )
    rows = []
    for p in priced:
        rows.append(
            (
                p.run.label,
                p.run.ending,
                f"**{p.ours.total():.2f}**",
                f"{p.floor.total():.2f}",
                f"{p.ratio:.2f}x",
                _beyond(p),
            )
        )
    print(table(["path", "ending", "ours", "floor", "ours / floor", "ours' calls beyond"], rows))
    print("\nBy line, ours / floor (USD per million jobs):\n")
    line_rows = []
    for p in priced:
        mine, least = p.ours.lines(), p.floor.lines()
        line_rows.append((p.run.label, *(f"{mine[k]:.2f} / {least[k]:.2f}" for k in LINES)))
    print(table(["path", *LINES], line_rows))
    print("\nWhat was counted on ours (per job):\n")
    count_rows = []
    for p in priced:
        b = p.ours
        count_rows.append(
            (
                p.run.label,
                b.api,
                ", ".join(f"{f} {n}" for f, n in sorted(b.requests.items())) or "-",
                ", ".join(
                    f"{f} {b.billed_ms[f]:.0f} ms ({p.cpu_ms.get(f, 0):.0f} CPU)"
                    for f in sorted(b.billed_ms)
                )
                or "-",
                p.writes,
                f"{b.wru:.0f}",
                f"{b.index_wru:.0f}",
                f"{b.rru:.1f}",
                short(sorted(b.calls.elements())),
            )
        )
    print(
        table(
            [
                "path",
                "API",
                "Lambda requests",
                "billed ms (CPU ms)",
                "table writes",
                "WRU",
                "index WRU",
                "RRU",
                "AWS requests",
            ],
            count_rows,
        )
    )
    latency = ", ".join(f"{k} {v:.0f} ms" for k, v in cost.LATENCY_MS.items())
    print(
        f"\nModel: billed ms per invocation = CPU (the handler's process time less moto's "
        f"answering) x {cost.FULL_VCPU_MB} / memory + per-call latency ({latency}) + "
        f"{HTTP_MS:.0f} ms a request to Sume, rounded up to 1 ms; memory "
        + ", ".join(f"{f} {m} MB" for f, m in MEMORY_MB.items())
        + ". The event sources' SQS requests are one receive and one batch delete per batch. "
        "A poller round's calls with the job less an empty round's are the job's share. "
        "Containers warm: the cold start is section 3.\n"
    )
    total = sum(fixed.values())
    print(
        f"Fixed, a month, whatever Sume delivers ({total:.2f} USD; "
        f"{ROUNDS_A_MONTH} rounds, one per {spec.DEFAULT_POLL_RATE_MINUTES} minutes; "
        f"stack resources counted in {counted_from}):\n"
    )
    print(table(["what", "USD a month"], [(k, f"{v:.2f}") for k, v in fixed.items()]))
    print()
    worst = max(priced, key=lambda p: p.ratio)
    over = [p.run.label for p in priced if p.ratio > TARGET_RATIO]
    targets.add(
        f"every job path within {TARGET_RATIO:.2f}x of its floor",
        f"worst {worst.ratio:.2f}x ({worst.run.label})"
        + (f"; over: {', '.join(over)}" if over else ""),
        not over,
    )


def render_section(runs: list[PathRun], empty_round: PathRun, targets: Targets) -> None:
    counts = stack_counts()
    where = "nothing: run make synth first"
    if counts:
        where = f"`{TEMPLATE.relative_to(TEMPLATE.parents[1])}`"
    render([price(r) for r in runs], fixed_month(empty_round, counts), where, targets)
    render_floors()


def render_floors() -> None:
    """The floor design, call by call, with why each is needed."""
    print("### The floor design, per path\n")
    for label, steps in jobfloor.FLOORS.items():
        print(f"- **{label}**: " + "; ".join(f"{s.function} `{s.call}` ({s.why})" for s in steps))
    print()
