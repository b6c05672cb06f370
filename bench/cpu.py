"""Receiver CPU per delivery, in-process, with AWS answered by botocore's Stubber.

The Stubber answers at ``before-call``: request validation and serialisation
run as in AWS, the network and response parsing do not, for all three designs
alike. Responses are queued before each timed batch (the Stubber validates
them when queued), and after it the queue must be empty and every answer as
expected, so each design did exactly the calls it claims, no fewer, no more.
Batches of the three designs alternate within each round; the figure is the
median over rounds of CPU time (``process_time``) per delivery.
"""

from __future__ import annotations

import cProfile
import gc
import hashlib
import io
import json
import pstats
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from botocore.stub import Stubber

from bench import cost
from bench import deliveries as d
from bench.env import STUB_NAMES, environment
from bench.references import Handler, floor_handler, powertools_handler
from bench.report import Targets, paired_difference, paired_ratio, table
from bench.runtime import silenced
from devstack.lambda_context import LambdaContext
from infra.spec import RECEIVER_MEMORY_MB
from sume.core import runtime
from sume.core.names import Env
from sume.receiving.compose import build_signing_secrets, receiver_service
from sume.store.job import JobAttr, Source, State

KINDS = ("new", "duplicate", "rejected")
DESIGNS = ("ours", "floor", "powertools")
EXPECTED = {"new": (200, "new"), "duplicate": (200, "duplicate"), "rejected": (401, None)}
IDEMPOTENCY_TABLE = "sume-bench-idempotency"


@dataclass
class Design:
    name: str
    handler: Handler
    stubbers: list[Stubber]
    stage: Callable[[str, list[str], dict[str, bytes]], None]
    """Queue the AWS answers a batch of ``kind`` deliveries needs."""
    setting: Callable[[], AbstractContextManager[None]] = nullcontext
    """Entered around each timed batch."""


def _sent(job_id: str) -> dict[str, str]:
    return {
        "MessageId": str(uuid.uuid4()),
        "MD5OfMessageBody": hashlib.md5(job_id.encode(), usedforsecurity=False).hexdigest(),
    }


def _stored_item(job_id: str, raw: bytes, now: int) -> dict[str, Any]:
    """Our job item as DynamoDB hands it back (ALL_OLD) to a duplicate."""
    return {
        JobAttr.JOB_ID: {"S": job_id},
        JobAttr.STATE: {"S": State.RECEIVED.value},
        JobAttr.SOURCE: {"S": Source.WEBHOOK.value},
        JobAttr.EVENT: {"S": "job.completed"},
        JobAttr.STATUS: {"S": "OK"},
        JobAttr.BODY: {"S": raw.decode()},
        JobAttr.FIRST_SEEN: {"N": str(now)},
        JobAttr.RECEIVED_AT: {"N": str(now)},
        JobAttr.LAST_DELIVERY_AT: {"N": str(now)},
        JobAttr.DELIVERIES: {"N": "1"},
        JobAttr.DUE_SHARD: {"N": "3"},
        JobAttr.DUE_AT: {"N": str(now + 120)},
    }


def _failed_write(stub: Stubber, method: str, item: dict[str, Any] | None) -> None:
    stub.add_client_error(
        method,
        service_error_code="ConditionalCheckFailedException",
        service_message="The conditional request failed",
        modeled_fields={"Item": item} if item else None,
    )


def _ours() -> Design:
    import receiver
    from sume.core import aws

    runtime.reset()
    ddb, sqs, secrets = aws.client("dynamodb"), aws.client("sqs"), aws.client("secretsmanager")
    aws.client("s3")
    stubs = {name: Stubber(c) for name, c in (("ddb", ddb), ("sqs", sqs), ("sm", secrets))}
    for stub in stubs.values():
        stub.activate()
    stubs["sm"].add_response(
        "get_secret_value",
        {"ARN": STUB_NAMES[Env.SIGNING_SECRET_ARN], "Name": "sume-bench", "SecretString": d.SECRET},
    )

    def stage(kind: str, jobs: list[str], bodies: dict[str, bytes]) -> None:
        now = int(time.time())
        for job in jobs:
            if kind == "new":
                stubs["ddb"].add_response("update_item", {})
                stubs["sqs"].add_response("send_message", _sent(job))
            elif kind == "duplicate":
                _failed_write(stubs["ddb"], "update_item", _stored_item(job, bodies[job], now))
                stubs["ddb"].add_response("update_item", {})

    return Design("ours", receiver.handler, list(stubs.values()), stage)


def _floor() -> Design:
    import boto3

    session = boto3.session.Session()
    ddb, sqs = session.client("dynamodb"), session.client("sqs")
    stubs = {"ddb": Stubber(ddb), "sqs": Stubber(sqs)}
    for stub in stubs.values():
        stub.activate()
    handler = floor_handler(
        ddb, sqs, STUB_NAMES[Env.JOBS_TABLE_NAME], STUB_NAMES[Env.JOBS_QUEUE_URL], d.SECRET.encode()
    )

    def stage(kind: str, jobs: list[str], bodies: dict[str, bytes]) -> None:
        for job in jobs:
            if kind == "new":
                stubs["ddb"].add_response("put_item", {})
                stubs["sqs"].add_response("send_message", _sent(job))
            elif kind == "duplicate":
                _failed_write(stubs["ddb"], "put_item", None)

    return Design("floor", handler, list(stubs.values()), stage)


def _powertools() -> Design:
    import boto3

    from sume.receiving.settings import ReceiverSettings

    session = boto3.session.Session()
    ddb, sqs, sm = (
        session.client("dynamodb"),
        session.client("sqs"),
        session.client("secretsmanager"),
    )
    stubs = {"ddb": Stubber(ddb), "sqs": Stubber(sqs), "sm": Stubber(sm)}
    for stub in stubs.values():
        stub.activate()
    stubs["sm"].add_response(
        "get_secret_value",
        {"ARN": STUB_NAMES[Env.SIGNING_SECRET_ARN], "Name": "sume-bench", "SecretString": d.SECRET},
    )
    # The same secret handling as ours: Secrets Manager, cached by Powertools.
    secrets = build_signing_secrets(ReceiverSettings.from_env(), lambda service, patient=False: sm)
    handler = powertools_handler(
        ddb, sqs, IDEMPOTENCY_TABLE, STUB_NAMES[Env.JOBS_QUEUE_URL], secrets
    )

    def stage(kind: str, jobs: list[str], bodies: dict[str, bytes]) -> None:
        now = int(time.time())
        for job in jobs:
            if kind == "new":
                stubs["ddb"].add_response("put_item", {})
                stubs["sqs"].add_response("send_message", _sent(job))
                stubs["ddb"].add_response("update_item", {})
            elif kind == "duplicate":
                key = hashlib.md5(job.encode(), usedforsecurity=False).hexdigest()
                record = {
                    "id": {"S": f"sume-bench#{key}"},
                    "expiration": {"N": str(now + 3600)},
                    "status": {"S": "COMPLETED"},
                    "data": {"S": json.dumps({"job_id": job, "token": "first"})},
                }
                _failed_write(stubs["ddb"], "put_item", record)

    return Design("powertools", handler, list(stubs.values()), stage)


@dataclass
class Batch:
    events: list[dict[str, Any]]
    jobs: list[str]
    bodies: dict[str, bytes] = field(default_factory=dict)


def _batch(kind: str, size: int) -> Batch:
    jobs = [d.new_job_id() for _ in range(size)]
    bodies = {job: d.job_body(job) for job in jobs}
    make = d.forged if kind == "rejected" else d.delivery
    return Batch([make(bodies[job]) for job in jobs], jobs, bodies)


def _run(design: Design, kind: str, batch: Batch) -> float:
    """CPU seconds per delivery for one batch; checks every answer afterwards."""
    design.stage(kind, batch.jobs, batch.bodies)
    context = LambdaContext()
    handler = design.handler
    answers = []
    with silenced(), design.setting():
        gc.collect()
        start = time.process_time()
        for event in batch.events:
            answers.append(handler(event, context))
        elapsed = time.process_time() - start
    for stub in design.stubbers:
        stub.assert_no_pending_responses()
    status, result = EXPECTED[kind]
    for answer in answers:
        body = json.loads(answer["body"])
        if answer["statusCode"] != status or (result and body.get("result") != result):
            raise AssertionError(f"{design.name} answered {kind} with {answer}")
    return elapsed / len(batch.events)


@dataclass
class CpuReport:
    rounds: int
    batch: int
    seconds: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def median_us(self, design: str, kind: str) -> float:
        return statistics.median(self.seconds[(design, kind)]) * 1e6


@contextmanager
def designs() -> Iterator[dict[str, Design]]:
    """The three receivers, stubbed and warmed up (secret cached, clients built)."""
    # The secret stays cached for the whole run, as in a warm container.
    with environment({**STUB_NAMES, Env.SECRET_CACHE_SECONDS: "3600"}):
        try:
            built = {"ours": _ours(), "floor": _floor(), "powertools": _powertools()}
            for design in built.values():
                _run(design, "new", _batch("new", 2))
            yield built
        finally:
            # The stubbed clients must not outlive the run in the handler caches.
            runtime.reset()


def measure(rounds: int, batch: int) -> CpuReport:
    report = CpuReport(rounds, batch)
    with designs() as built:
        for n in range(rounds):
            for kind in KINDS:
                order = DESIGNS[n % 3 :] + DESIGNS[: n % 3]
                for name in order:
                    seconds = _run(built[name], kind, _batch(kind, batch))
                    report.seconds.setdefault((name, kind), []).append(seconds)
    return report


def profile(design: str, kind: str, batch: int, top: int = 25) -> str:
    """cProfile of one batch, by own time: where the CPU of a delivery goes."""
    with designs() as built:
        chosen = built[design]
        work = _batch(kind, batch)
        chosen.stage(kind, work.jobs, work.bodies)
        profiler = cProfile.Profile()
        with silenced():
            profiler.enable()
            for event in work.events:
                chosen.handler(event, LambdaContext())
            profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


BREAKDOWN = (
    "floor",
    "ours: domain only (no Powertools layers)",
    "ours: + EMF metrics line (Metrics.log_metrics; log line below the level)",
    "ours: + JSON log line",
    "ours: + Tracer.capture_lambda_handler (X-Ray off)",
    "ours: + Logger.inject_lambda_context (as deployed)",
)
TELEMETRY = {
    "EMF metrics line": (BREAKDOWN[1], BREAKDOWN[2]),
    "JSON log line": (BREAKDOWN[2], BREAKDOWN[3]),
}
"""Per-delivery telemetry: each part is the difference between two layers."""


@contextmanager
def _log_line_off() -> Iterator[None]:
    """The handler's ``logger.info`` returns at its level check; warnings still log."""
    import logging

    from sume.core.observability import logger

    level = logger.log_level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _domain_only(webhook: Any) -> Handler:
    """Our receiver without the handler's Powertools layers, logs or metrics."""
    from sume.receiving.http import HttpResponse, request_from_event, to_event_response

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        receipt = webhook.receive(request_from_event(event))
        body = {"result": receipt.result, "job_id": receipt.job_id}
        return to_event_response(HttpResponse(200, body))

    return handler


def breakdown(rounds: int, batch: int) -> dict[str, list[float]]:
    """Where the CPU of a new delivery goes: the floor, then ours layer by layer."""
    import receiver

    seconds: dict[str, list[float]] = {}
    with designs() as built:
        ours = built["ours"]
        full = receiver.handler
        innermost = full.__wrapped__.__wrapped__
        layers = [
            built["floor"],
            Design(BREAKDOWN[1], _domain_only(receiver_service()), ours.stubbers, ours.stage),
            Design(BREAKDOWN[2], innermost, ours.stubbers, ours.stage, _log_line_off),
            Design(BREAKDOWN[3], innermost, ours.stubbers, ours.stage),
            Design(BREAKDOWN[4], full.__wrapped__, ours.stubbers, ours.stage),
            Design(BREAKDOWN[5], full, ours.stubbers, ours.stage),
        ]
        for n in range(rounds):
            for i in range(len(layers)):
                layer = layers[(i + n) % len(layers)]
                name = BREAKDOWN[(i + n) % len(layers)]
                seconds.setdefault(name, []).append(_run(layer, "new", _batch("new", batch)))
    return seconds


POWERTOOLS_RATIO_TARGET = 1.5


def render(report: CpuReport, parts: dict[str, list[float]], targets: Targets) -> None:
    print(
        f"## 2. Receiver CPU per delivery (Stubber, no network; median of {report.rounds} "
        f"interleaved rounds x {report.batch} deliveries)\n"
    )
    rows = []
    for kind in KINDS:
        s = {name: report.seconds[(name, kind)] for name in DESIGNS}
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
    new = {name: report.seconds[(name, "new")] for name in DESIGNS}
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
    for part, (below, above) in TELEMETRY.items():
        us = paired_difference(parts[above], parts[below]) * 1e6
        telemetry.append((part, f"{us:.0f}", f"{cost.cpu_per_million(us, memory):.4f}"))
    print(table(["telemetry", "us", f"USD per million at {memory} MB"], telemetry))
    print()
