"""Section 1: AWS calls per delivery, per job for the worker, per round for the poller.

On ``bench.stack`` (moto in process) a duplicate really fails its conditional write and gets the
stored item back: each row is the true call sequence, each result read off what happened (the
answer, the item, the run's summary); worker and poller rows come from the paths 8 and 9 price.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import boto3

from bench import harness as h
from bench.references import floor_handler, powertools_handler
from bench.stack import COMPLETED, LARGE_EVENT_PAD_BYTES, Stack, account, paths
from devstack.counting import short
from sume.core import runtime
from sume.core.secrets import SigningSecrets
from sume.store.job import JobAttr, State

TARGETS = {"= 2": {2}, "1-2": {1, 2}, "= 3 (re-enqueue)": {3}, "= 3 (+ PutObject)": {3}, "= 0": {0}}
IDEMPOTENCY_TABLE = "sume-bench-idempotency"


@dataclass(frozen=True)
class Row:
    design: str
    delivery: str
    result: str
    calls: list[str]
    target: str = ""
    wru: int = 0  # DynamoDB write units the stack's meter booked for it; section 5 prices them

    @property
    def met(self) -> bool | None:
        return len(self.calls) in TARGETS[self.target] if self.target else None


@dataclass
class CallsReport:
    rows: list[Row] = field(default_factory=list)
    job_item: dict[str, Any] = field(default_factory=dict)  # ours after a new delivery, priced
    idempotency_record: dict[str, Any] = field(default_factory=dict)
    at_import: dict[str, dict[str, int] | str] = field(default_factory=dict)

    def row(self, design: str, delivery: str) -> Row:
        return next(r for r in self.rows if (r.design, r.delivery) == (design, delivery))

    def deliver(self, stack: Stack, design: str, label: str, event: Any, target: str = "") -> None:
        booked = stack.run.usage.wru
        answer = stack.invoke(design, event)
        body = json.loads(answer["body"])
        result = f"{answer['statusCode']} {body.get('result') or body.get('error')}"
        wru = round(stack.run.usage.wru - booked)
        shown = "ours" if design == "receiver" else design
        self.rows.append(Row(shown, label, result, stack.run.invocations[-1].calls, target, wru))


def _receiver_rows(report: CallsReport, stack: Stack) -> str:
    """Our receiver's rows; the id of the job they leave processed."""
    row = functools.partial(report.deliver, stack, "receiver")
    row("new, cold container (secret fetched)", h.delivery(h.job_body(h.new_job_id())))
    job = h.new_job_id()
    body = h.job_body(job)
    row("new", h.delivery(body), "= 2")
    report.job_item = stack.item(job)
    row("duplicate (retry)", h.delivery(body), "1-2")
    row("duplicate, conflicting event", h.delivery(h.job_body(job, "job.failed")), "1-2")
    # A crash between write and send leaves the job owed; a delivery after the grace resends it.
    stack.set(job, f"SET {JobAttr.RECEIVED_AT} = :a", int(time.time()) - 3600)
    row("duplicate while work owed", h.delivery(body), "= 3 (re-enqueue)")
    finished = f"SET #s = :a REMOVE {JobAttr.DUE_SHARD}, {JobAttr.DUE_AT}"
    stack.set(job, finished, State.PROCESSED.value, s=JobAttr.STATE)
    row("duplicate after processed (Redeliver)", h.delivery(body), "1-2")
    big = h.job_body(h.new_job_id(), pad_bytes=LARGE_EVENT_PAD_BYTES)
    row("new, 300 KiB event (body to S3)", h.delivery(big), "= 3 (+ PutObject)")
    ping = json.dumps({"event": "webhook.test", "request_id": h.new_job_id()}).encode()
    row("webhook.test", h.delivery(ping), "= 0")
    other = h.job_body(h.new_job_id())
    row("rejected: forged signature", h.forged(other), "= 0")
    row("rejected: stale timestamp", h.delivery(other, skew_seconds=3600), "= 0")
    oversize = h.job_body(h.new_job_id(), pad_bytes=1024 * 1024 + 1)  # MAX_BODY_BYTES' default
    row("rejected: oversize body", h.delivery(oversize), "= 0")
    row("rejected: signed, not JSON", h.delivery(b"{not json"), "= 0")
    runtime.reset()
    row("rejected: forged, cold container", h.forged(other))
    return job


def _reference_rows(report: CallsReport, stack: Stack) -> None:
    """The receivers of ``bench.references`` on the stack's table and queue, counted alike."""
    stack.reader.create_table(
        TableName=IDEMPOTENCY_TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )
    session = boto3.session.Session()  # made while the counter is installed: watched
    ddb, sqs, queue = session.client("dynamodb"), session.client("sqs"), stack.names.queue_url
    stack.handlers["floor"] = floor_handler(ddb, sqs, stack.table, queue, h.SECRET.encode())
    secrets = SigningSecrets(None, h.SECRET)
    stack.handlers["powertools"] = powertools_handler(ddb, sqs, IDEMPOTENCY_TABLE, queue, secrets)
    for design in ("floor", "powertools"):
        body = h.job_body(h.new_job_id())
        report.deliver(stack, design, "new", h.delivery(body))
        report.deliver(stack, design, "duplicate (retry)", h.delivery(body))
        report.deliver(stack, design, "rejected: forged signature", h.forged(body))
    report.idempotency_record = stack.reader.scan(TableName=IDEMPOTENCY_TABLE)["Items"][0]


def _finished_job_row(stack: Stack, job_id: str) -> Row:
    """A message for a job already finished, as SQS may deliver one twice: no path plays it."""
    sqs = stack.session.client("sqs")  # the bench's own, not counted
    # What the rows above queued (the references' messages among them) is not the worker's.
    sqs.purge_queue(QueueUrl=stack.names.queue_url)
    sqs.send_message(QueueUrl=stack.names.queue_url, MessageBody=job_id)
    before, first = stack.item(job_id), len(stack.run.invocations)
    stack.drain()
    [work] = stack.run.invocations[first:]
    after = stack.item(job_id)
    result = "skipped" if after == before else after["state"]["S"]
    return Row("worker", "message for a finished job", result, work.calls)


def _path_rows(finished: Row) -> list[Row]:
    runs, empty = paths()
    by_label = {run.label: run for run in runs}

    def worker(label: str, path: str) -> Row:
        run = by_label[path]
        work = [i for i in run.invocations if i.function == "worker"][-1]
        failed = work.answer.get("batchItemFailures")
        return Row("worker", label, "failed (retried)" if failed else run.state, work.calls)

    tick, idle, *_ = [i for i in empty.invocations if i.function == "poller"]
    found = by_label["registered, found by a status poll (2 artifacts)"].invocations
    runs_due = [i for i in found if i.function == "poller"][1:]
    busiest = max(runs_due, key=lambda run: run.answer["runs"][0]["polled"])
    return [
        worker("job.completed, 2 artifacts", COMPLETED),
        worker("job.failed", "webhook, job.failed"),
        finished,
        Row("poller", "a round's tick (gauge, fan-out)", f"{tick.answer['runs']} runs", tick.calls),
        Row("poller", "a run, nothing due", _run_result(idle), idle.calls),
        Row("poller", "the run whose shard holds 1 job due", _run_result(busiest), busiest.calls),
    ]


def _run_result(run: Any) -> str:
    summary = run.answer["runs"][0]  # ``RunSummary.as_dict``
    if not summary["complete"]:
        return "cut short: out of time"
    if summary["recovered"]:
        return f"recovered {summary['recovered']}"
    if summary["polled"] or summary["swept"]:
        return f"polled {summary['polled']}, swept {summary['swept']}"
    return "idle"


IMPORT_PROBE = """
import json, socket, sys
from unittest import mock
from devstack.counting import CallCounter
counter = CallCounter()
with mock.patch.object(socket.socket, "connect") as connect, counter.installed():
    __import__(sys.argv[1])
print(json.dumps({"calls": len(counter.calls), "clients": len(counter.clients),
                  "connects": connect.call_count}))
"""


def import_side_effects(module: str) -> dict[str, int] | str:
    """AWS calls, clients and sockets a fresh process makes by importing ``module``."""
    out = h.python("-c", IMPORT_PROBE, module, env=h.lambda_runtime_env())
    try:
        return dict(h.last_json(out, f"import {module}"))
    except RuntimeError as error:
        return str(error).splitlines()[-1]


def measure() -> CallsReport:
    report = CallsReport()
    with account() as stack:
        job = _receiver_rows(report, stack)
        _reference_rows(report, stack)
        finished = _finished_job_row(stack, job)
    report.rows += _path_rows(finished)
    report.at_import = {m: import_side_effects(m) for m in ("receiver", "worker", "poller")}
    return report


def section(ctx: h.Context) -> CallsReport:
    report = measure()
    print("## 1. AWS calls per delivery (moto in-process, counted on botocore `before-call`)\n")
    rows = []
    for r in report.rows:
        verdict = h.verdict(r.met) if r.target else ""
        rows.append(
            (r.design, r.delivery, r.result, len(r.calls), short(r.calls), r.target, verdict)
        )
    print(h.table(["design", "delivery", "answer", "AWS calls", "which", "target", ""], rows))
    print("\nAt import, in a fresh process with the Lambda environment:")
    for module, found in report.at_import.items():
        if isinstance(found, str):
            print(f"- `{module}`: import failed: {found}")
            measured, clean = "import failed", False
        else:
            print(
                f"- `{module}`: {found['calls']} AWS calls, {found['clients']} clients created, "
                f"{found['connects']} sockets connected"
            )
            measured = f"{found['calls']} calls, {found['clients']} clients"
            clean = found["calls"] == found["clients"] == 0
        ctx.targets.add(f"{module}: 0 AWS calls at import", measured, clean)
    for name, targets in (
        ("new delivery: exactly 2 AWS calls", ("= 2",)),
        ("duplicate: 1-2 AWS calls (3 only re-enqueueing)", ("1-2", "= 3 (re-enqueue)")),
        ("rejected: 0 AWS calls", ("= 0",)),
    ):
        judged = [r for r in report.rows if r.target in targets]
        counts = "/".join(str(n) for n in sorted({len(r.calls) for r in judged}))
        ctx.targets.add(name, counts, all(r.met for r in judged))
    print()
    return report
