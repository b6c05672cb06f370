"""Section 2: receiver CPU per delivery, ours against the floor and Powertools' idempotency.

In process, AWS answered by botocore's Stubber rather than moto, whose own CPU would be most of
what a delivery costs here and most of its noise. The Stubber answers at ``before-call``:
validation and serialisation run as in AWS; signing, the network and parsing do not, for every
design alike. Each batch must use exactly the answers queued for it and answer as expected, so
each design made the calls it claims (section 1 counts them on moto). A figure is the median
over interleaved rounds of CPU time (``process_time``) per delivery, a ratio the median of the
rounds' ratios (a noisy moment hits both sides of its round), shown with their range. Many
short rounds, as the median's error shrinks with the square root of their number: beside a
CPU-bound process the Powertools ratio's median moved from run to run by 0.04-0.12x (standard
deviation) over 9 rounds of 100, by 0.01-0.02x over 45 rounds of 20.
"""

from __future__ import annotations

import gc
import hashlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.stub import Stubber

from bench import cost
from bench import harness as h
from bench.references import Handler, floor_handler, powertools_handler
from devstack.lambda_context import LambdaContext
from infra.spec import RECEIVER_MEMORY_MB
from sume.core import runtime
from sume.core.names import Env
from sume.store.codec import attribute_value
from sume.store.job import JobAttr, Source, State

KINDS = ("new", "duplicate", "rejected")
EXPECTED = {"new": (200, "new"), "duplicate": (200, "duplicate"), "rejected": (401, None)}
POWERTOOLS_RATIO_TARGET = 1.5
# A design's AWS answers per delivery of a kind; "failed" is its first call refused by
# the condition, carrying what DynamoDB hands back (``stored``).
CALLS = {
    "ours": {"new": ["update_item", "send_message"], "duplicate": ["failed", "update_item"]},
    "floor": {"new": ["put_item", "send_message"], "duplicate": ["failed"]},
    "powertools": {"new": ["put_item", "send_message", "update_item"], "duplicate": ["failed"]},
}
LAYERS = {
    "floor": "floor",
    "domain": "ours: domain only (no Powertools layers)",
    "metrics": "ours: + EMF metrics line (Metrics.log_metrics; log line below the level)",
    "log": "ours: + JSON log line",
    "tracer": "ours: + Tracer.capture_lambda_handler (X-Ray off)",
    "ours": "ours: + Logger.inject_lambda_context (as deployed)",
}
"""Where a new delivery's CPU goes: the floor, then ours' handler with its Powertools
decorators peeled off (``__wrapped__``), measured with the designs, new deliveries only."""
TELEMETRY = {"EMF metrics line": ("domain", "metrics"), "JSON log line": ("metrics", "log")}


def stored(design: str, job: str, raw: bytes, now: int) -> dict[str, Any] | None:
    """A duplicate's refused write's modelled fields: ours' item (ALL_OLD), Powertools' record."""
    if design == "floor":
        return None
    if design == "powertools":
        key = hashlib.md5(job.encode(), usedforsecurity=False).hexdigest()
        values = {"id": f"sume-bench#{key}", "expiration": now + 3600}
        values |= {"status": "COMPLETED", "data": json.dumps({"job_id": job, "token": "first"})}
    else:
        values = {
            JobAttr.JOB_ID: job,
            JobAttr.STATE: State.RECEIVED.value,
            JobAttr.SOURCE: Source.WEBHOOK.value,
            JobAttr.EVENT: "job.completed",
            JobAttr.STATUS: "OK",
            JobAttr.BODY: raw.decode(),
            JobAttr.FIRST_SEEN: now,
            JobAttr.RECEIVED_AT: now,
            JobAttr.LAST_DELIVERY_AT: now,
            JobAttr.DELIVERIES: 1,
            JobAttr.DUE_SHARD: 3,
            JobAttr.DUE_AT: now + 120,
        }
    return {"Item": {name: attribute_value(value) for name, value in values.items()}}


@dataclass
class Design:
    handler: Handler
    stubs: dict[str, Stubber]  # by service name
    answers: str  # whose ``CALLS`` answer its batches: ``ours`` for each layer of ours
    setting: Callable[[], AbstractContextManager[Any]] = nullcontext  # around each batch


def _stubbed(*clients: Any) -> dict[str, Stubber]:
    stubs = {c.meta.service_model.service_name: Stubber(c) for c in clients}
    for stub in stubs.values():
        stub.activate()
    if "secretsmanager" in stubs:
        stubs["secretsmanager"].add_response("get_secret_value", {"SecretString": h.SECRET})
    return stubs


def _run(design: Design, kind: str, size: int) -> float:
    """CPU seconds per delivery for a batch of ``size``; checks every answer afterwards."""
    bodies = {job: h.job_body(job) for job in (h.new_job_id() for _ in range(size))}
    events = [(h.forged if kind == "rejected" else h.delivery)(b) for b in bodies.values()]
    now, calls, stubs = int(time.time()), CALLS[design.answers], design.stubs
    for job, body in bodies.items():
        for method in calls.get(kind, []):
            if method == "failed":
                stubs["dynamodb"].add_client_error(
                    calls["new"][0],
                    service_error_code="ConditionalCheckFailedException",
                    modeled_fields=stored(design.answers, job, body, now),
                )
            else:
                # No design reads a write's or a send's answer: an empty one will do.
                stubs["sqs" if method == "send_message" else "dynamodb"].add_response(method, {})
    context = LambdaContext()
    with h.silenced(), design.setting():
        gc.collect()
        start = time.process_time()
        answers = [design.handler(event, context) for event in events]
        elapsed = time.process_time() - start
    for stub in stubs.values():
        stub.assert_no_pending_responses()
    status, result = EXPECTED[kind]
    for answer in answers:
        if answer["statusCode"] != status or json.loads(answer["body"]).get("result") != result:
            raise AssertionError(f"{design.answers} answered {kind} with {answer}")
    return elapsed / size


@contextmanager
def _log_line_off() -> Iterator[None]:
    """The handler's ``logger.info`` returns at its level check; warnings still log."""
    from sume.core.observability import logger

    level = logger.log_level
    logger.setLevel("WARNING")
    try:
        yield
    finally:
        logger.setLevel(level)


@contextmanager
def designs() -> Iterator[dict[str, Design]]:
    """The designs and layers (``LAYERS``), stubbed and warm (secret cached, clients built)."""
    import receiver
    from sume.core import aws
    from sume.receiving.compose import build_signing_secrets, receiver_service
    from sume.receiving.settings import ReceiverSettings

    def domain_only(event: dict[str, Any], context: Any) -> dict[str, Any]:
        receipt = receiver_service().receive(receiver.request_from_event(event))
        body = {"result": receipt.result, "job_id": receipt.job_id}
        return receiver.to_event_response(receiver.HttpResponse(200, body))

    # The secret stays cached for the whole run, as in a warm container.
    with h.environment({**h.STUB_NAMES, Env.SECRET_CACHE_SECONDS: "3600"}):
        try:
            runtime.reset()
            ours = _stubbed(aws.client("dynamodb"), aws.client("sqs"), aws.client("secretsmanager"))
            table, queue = h.STUB_NAMES[Env.JOBS_TABLE_NAME], h.STUB_NAMES[Env.JOBS_QUEUE_URL]
            session = boto3.session.Session()
            fddb, fsqs = session.client("dynamodb"), session.client("sqs")
            ddb, sqs, sm = (session.client(s) for s in ("dynamodb", "sqs", "secretsmanager"))
            # The same secret handling as ours: Secrets Manager, cached by Powertools.
            settings = ReceiverSettings.from_env()
            secrets = build_signing_secrets(settings, lambda service, patient=False: sm)
            floor = floor_handler(fddb, fsqs, table, queue, h.SECRET.encode())
            rival = powertools_handler(ddb, sqs, "sume-bench-idempotency", queue, secrets)
            inner = receiver.handler.__wrapped__.__wrapped__
            built = {
                "ours": Design(receiver.handler, ours, "ours"),
                "powertools": Design(rival, _stubbed(ddb, sqs, sm), "powertools"),
                "floor": Design(floor, _stubbed(fddb, fsqs), "floor"),
                "domain": Design(domain_only, ours, "ours"),
                "metrics": Design(inner, ours, "ours", _log_line_off),
                "log": Design(inner, ours, "ours"),
                "tracer": Design(receiver.handler.__wrapped__, ours, "ours"),
            }
            for design in built.values():
                _run(design, "new", 2)
            # What is loaded so far (moto, the other sections' modules) is left out of
            # collection: each batch's gc.collect() then walks only what the batches made.
            gc.freeze()
            yield built
        finally:
            gc.unfreeze()
            # The stubbed clients must not outlive the run in the handler caches.
            runtime.reset()


@dataclass
class CpuReport:
    seconds: dict[tuple[str, str], list[float]]  # per (design or layer, kind), one per round

    def median_us(self, design: str, kind: str = "new") -> float:
        return statistics.median(self.seconds[(design, kind)]) * 1e6

    def ratios(self, top: str, bottom: str, kind: str = "new") -> list[float]:
        return h.paired_ratios(self.seconds[(top, kind)], self.seconds[(bottom, kind)])


def measure(rounds: int, batch: int) -> CpuReport:
    """A batch of each design and kind (each layer: new only) per round, in ``designs()``'s
    order; each round starts one design further on, so none is always first."""
    seconds: dict[tuple[str, str], list[float]] = {}
    with designs() as built:
        for n in range(rounds):
            for kind in KINDS:
                names = [name for name in built if kind == "new" or name in CALLS]
                for name in names[n % len(names) :] + names[: n % len(names)]:
                    seconds.setdefault((name, kind), []).append(_run(built[name], kind, batch))
    return CpuReport(seconds)


def section(ctx: h.Context) -> CpuReport:
    rounds, batch = ctx.pick((45, 20), (12, 10))
    report, memory = measure(rounds, batch), RECEIVER_MEMORY_MB
    print(
        f"## 2. Receiver CPU per delivery (Stubber, no network; median of {rounds} "
        f"interleaved rounds x {batch} deliveries)\n"
    )
    rows = []
    for kind in KINDS:
        us = [f"{report.median_us(d, kind):.0f}" for d in ("floor", "ours", "powertools")]
        over = statistics.median(report.ratios("ours", "floor", kind))
        rival = h.spread(report.ratios("powertools", "ours", kind))
        rows.append((kind, *us, f"{over:.2f}x", rival))
    headers = ["delivery", "floor us", "ours us", "Powertools idempotency us", "ours / floor"]
    print(h.table([*headers, "Powertools / ours (median, rounds' range)"], rows))
    print(
        f"\nNot a target: a new delivery's CPU "
        f"({statistics.median(report.ratios('ours', 'floor')):.2f}x the floor) is worth "
        f"${cost.cpu_per_million(report.median_us('ours'), memory):.3f} per million "
        f"deliveries at {memory} MB."
    )
    ahead = report.ratios("powertools", "ours")
    ctx.targets.add(
        f"Powertools idempotency >= {POWERTOOLS_RATIO_TARGET}x ours (new; median of rounds)",
        h.spread(ahead),
        statistics.median(ahead) >= POWERTOOLS_RATIO_TARGET,
    )
    print("\nWhere a new delivery's CPU goes (ours, peeled layer by layer; same method):\n")
    rows = []
    for name, label in LAYERS.items():
        over = statistics.median(report.ratios(name, "floor"))
        rows.append((label, f"{report.median_us(name):.0f}", f"{over:.2f}x"))
    print(h.table(["layer", "us", "x floor"], rows))
    print("\nPer-delivery telemetry, each the paired difference of two layers above:\n")
    rows, new = [], {name: s for (name, kind), s in report.seconds.items() if kind == "new"}
    for part, (below, above) in TELEMETRY.items():
        each_us = h.paired_difference(new[above], new[below]) * 1e6
        rows.append((part, f"{each_us:.0f}", f"{cost.cpu_per_million(each_us, memory):.4f}"))
    print(h.table(["telemetry", "us", f"USD per million at {memory} MB"], rows))
    print()
    return report
