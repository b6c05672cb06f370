"""AWS calls per delivery, counted on moto (in-process) with botocore event hooks.

moto gives real conditional-write semantics (a duplicate really fails its
write and gets the stored item back), so each scenario is the true call
sequence, not a script of what we expect.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import deliveries as d
from bench import rounds
from bench.counting import CallCounter, short
from bench.env import STUB_NAMES, environment
from bench.references import Handler, floor_handler, powertools_handler
from bench.report import Targets, table, verdict
from bench.runtime import python, silenced
from devstack.lambda_context import LambdaContext
from sume.core import runtime
from sume.core.names import Env
from sume.store.job import JobAttr, State

FUNCTIONS = Path(__file__).resolve().parents[1] / "functions"
IDEMPOTENCY_TABLE = "sume-bench-idempotency"
LARGE_EVENT_BYTES = 300 * 1024
MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Target:
    text: str
    test: Callable[[int], bool]


EXACTLY_2 = Target("= 2", lambda n: n == 2)
ONE_OR_TWO = Target("1-2", lambda n: 1 <= n <= 2)
THREE = Target("= 3 (re-enqueue)", lambda n: n == 3)
OFFLOADED = Target("= 3 (+ PutObject)", lambda n: n == 3)
ZERO = Target("= 0", lambda n: n == 0)


@dataclass(frozen=True)
class Row:
    design: str
    delivery: str
    status: int
    result: str
    calls: list[str]
    target: Target | None = None

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.test(len(self.calls))


@dataclass
class CallsReport:
    rows: list[Row] = field(default_factory=list)
    job_item: dict[str, Any] = field(default_factory=dict)
    """Our stored item after one new delivery (DynamoDB JSON), for the cost model."""
    idempotency_record: dict[str, Any] = field(default_factory=dict)
    at_import: dict[str, dict[str, int] | str] = field(default_factory=dict)
    """Per handler module: what importing it did in a fresh process, or why it failed."""


def _deliver(handler: Handler, event: dict[str, Any]) -> tuple[int, str]:
    with silenced():
        out = handler(event, LambdaContext())
    body = json.loads(out["body"])
    return out["statusCode"], str(body.get("result") or body.get("error"))


def _scenario(
    report: CallsReport,
    counter: CallCounter,
    design: str,
    handler: Handler,
    delivery: str,
    event: dict[str, Any],
    target: Target | None = None,
) -> None:
    counter.take()
    status, result = _deliver(handler, event)
    report.rows.append(Row(design, delivery, status, result, counter.take(), target))


def _receiver_rows(
    report: CallsReport, counter: CallCounter, session: Any, env: dict[str, str]
) -> None:
    import receiver

    ddb = session.client("dynamodb")
    table = env[Env.JOBS_TABLE_NAME]
    runtime.reset()
    h = receiver.handler
    job = d.new_job_id()
    body = d.job_body(job)
    _scenario(report, counter, "ours", h, "new, cold container (secret fetched)", d.delivery(body))
    job = d.new_job_id()
    body = d.job_body(job)
    _scenario(report, counter, "ours", h, "new", d.delivery(body), EXACTLY_2)
    report.job_item = ddb.get_item(TableName=table, Key={JobAttr.JOB_ID: {"S": job}})["Item"]
    _scenario(report, counter, "ours", h, "duplicate (retry)", d.delivery(body), ONE_OR_TWO)
    failed = d.job_body(job, event="job.failed")
    _scenario(
        report, counter, "ours", h, "duplicate, conflicting event", d.delivery(failed), ONE_OR_TWO
    )

    # A crash between the write and the send leaves the job owed; the next
    # delivery after the grace period sends it again.
    ddb.update_item(
        TableName=table,
        Key={JobAttr.JOB_ID: {"S": job}},
        UpdateExpression=f"SET {JobAttr.RECEIVED_AT} = :old",
        ExpressionAttributeValues={":old": {"N": str(int(time.time()) - 3600)}},
    )
    _scenario(report, counter, "ours", h, "duplicate while work owed", d.delivery(body), THREE)
    ddb.update_item(
        TableName=table,
        Key={JobAttr.JOB_ID: {"S": job}},
        UpdateExpression=f"SET #s = :done REMOVE {JobAttr.DUE_SHARD}, {JobAttr.DUE_AT}",
        ExpressionAttributeNames={"#s": JobAttr.STATE},
        ExpressionAttributeValues={":done": {"S": State.PROCESSED.value}},
    )
    _scenario(
        report,
        counter,
        "ours",
        h,
        "duplicate after processed (Redeliver)",
        d.delivery(body),
        ONE_OR_TWO,
    )

    big = d.job_body(d.new_job_id(), pad_bytes=LARGE_EVENT_BYTES)
    _scenario(
        report, counter, "ours", h, "new, 300 KiB event (body to S3)", d.delivery(big), OFFLOADED
    )
    _scenario(report, counter, "ours", h, "webhook.test", d.delivery(d.test_ping_body()), ZERO)
    other = d.job_body(d.new_job_id())
    _scenario(report, counter, "ours", h, "rejected: forged signature", d.forged(other), ZERO)
    _scenario(report, counter, "ours", h, "rejected: stale timestamp", d.stale(other), ZERO)
    _scenario(
        report, counter, "ours", h, "rejected: oversize body", d.oversize(MAX_BODY_BYTES), ZERO
    )
    _scenario(
        report, counter, "ours", h, "rejected: signed, not JSON", d.delivery(b"{not json"), ZERO
    )
    runtime.reset()
    _scenario(report, counter, "ours", h, "rejected: forged, cold container", d.forged(other))


def _reference_rows(
    report: CallsReport, counter: CallCounter, session: Any, env: dict[str, str]
) -> None:
    from sume.core.secrets import SigningSecrets

    ddb = session.client("dynamodb")
    sqs = session.client("sqs")
    ddb.create_table(
        TableName=IDEMPOTENCY_TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )
    floor = floor_handler(
        ddb, sqs, env[Env.JOBS_TABLE_NAME], env[Env.JOBS_QUEUE_URL], d.SECRET.encode()
    )
    powertools = powertools_handler(
        ddb, sqs, IDEMPOTENCY_TABLE, env[Env.JOBS_QUEUE_URL], SigningSecrets(None, d.SECRET)
    )
    for design, handler in (("floor", floor), ("powertools", powertools)):
        body = d.job_body(d.new_job_id())
        _scenario(report, counter, design, handler, "new", d.delivery(body))
        _scenario(report, counter, design, handler, "duplicate (retry)", d.delivery(body))
        _scenario(report, counter, design, handler, "rejected: forged signature", d.forged(body))
    items = ddb.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    report.idempotency_record = items[0] if items else {}


def _sqs_event(job_id: str) -> dict[str, Any]:
    now_ms = str(int(time.time() * 1000))
    return {
        "Records": [
            {
                "messageId": f"msg-{job_id}",
                "receiptHandle": f"rh-{job_id}",
                "body": job_id,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": now_ms,
                    "SenderId": "AIDA",
                    "ApproximateFirstReceiveTimestamp": now_ms,
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:sume-bench-jobs",
                "awsRegion": "us-east-1",
            }
        ]
    }


def worker_poller_rows(
    report: CallsReport, counter: CallCounter, session: Any, env: dict[str, str]
) -> None:
    """Per job: the worker archiving and announcing it; the poller's round, and its run
    that finds one by poll. Each result is read off what happened, never written in."""
    runtime.reset()
    # Only here may artifact and status URLs be http on loopback: the simulator serves them.
    local = {Env.ALLOW_HTTP_URLS: "true", Env.ALLOW_PRIVATE_HOSTS: "true"}
    with environment({**env, **local}):
        _worker_poller_rows(report, counter, session, env)


def _worker_poller_rows(
    report: CallsReport, counter: CallCounter, session: Any, env: dict[str, str]
) -> None:
    import receiver
    import worker
    from devstack.simulator import Sume

    ddb = session.client("dynamodb")
    table = env[Env.JOBS_TABLE_NAME]

    def item(job_id: str) -> dict[str, Any]:
        key = {JobAttr.JOB_ID: {"S": job_id}}
        return dict(ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item", {}))

    def work(label: str, job_id: str) -> None:
        before = item(job_id)
        counter.take()
        with silenced():
            answer = worker.handler(_sqs_event(job_id), LambdaContext())
        calls = counter.take()
        after = item(job_id)
        if answer.get("batchItemFailures"):
            result = "failed (retried)"
        elif after == before:
            result = "skipped"
        else:
            result = after[JobAttr.STATE]["S"]
        report.rows.append(Row("worker", label, 200, result, calls))

    with Sume("http://127.0.0.1:9/unused", [d.SECRET], attempts=1) as sume:
        for label, job in (
            ("job.completed, 2 artifacts", sume.new_job(artifacts=2)),
            ("job.failed", sume.new_job(event="job.failed")),
        ):
            _deliver(receiver.handler, d.delivery(job.body))
            work(label, job.job_id)
        work("message for a finished job", job.job_id)
        _poller_rows(report, counter, session, env, sume)


def _poller_rows(
    report: CallsReport, counter: CallCounter, session: Any, env: dict[str, str], sume: Any
) -> None:
    import poller
    from devstack.resources import queue_arn
    from sume.polling import registry

    ddb, sqs = session.client("dynamodb"), session.client("sqs")
    table, shards_url = env[Env.JOBS_TABLE_NAME], env[Env.POLL_SHARDS_QUEUE_URL]
    shards_arn = queue_arn(sqs, shards_url)
    invocations: list[tuple[dict[str, Any], list[str]]] = []

    def invoke(event: dict[str, Any], context: Any) -> Any:
        # Each invocation's calls alone: the bench's receives of the assignments
        # (which Lambda's event source makes) fall between two of them.
        counter.take()
        with silenced():
            answer = poller.handler(event, context)
        invocations.append((answer, counter.take()))
        return answer

    def round_(
        after: int,
    ) -> tuple[dict[str, Any], list[str], list[tuple[dict[str, Any], list[str]]]]:
        """The tick and its calls, then each run's summary and calls."""
        invocations.clear()
        rounds.play(invoke, sqs, shards_url, shards_arn, after)
        (tick, tick_calls), *runs = invocations
        return tick, tick_calls, [(answer["runs"][0], calls) for answer, calls in runs]

    tick, tick_calls, runs = round_(0)
    report.rows.append(
        Row("poller", "a round's tick (gauge, fan-out)", 200, f"{tick['runs']} runs", tick_calls)
    )
    summary, calls = runs[0]
    report.rows.append(Row("poller", "a run, nothing due", 200, _run_result(summary), calls))
    silent = sume.new_job()
    registry.expect(silent.job_id, silent.status_url, table_name=table, dynamodb=ddb)
    ddb.update_item(
        TableName=table,
        Key={JobAttr.JOB_ID: {"S": silent.job_id}},
        UpdateExpression=f"SET {JobAttr.DUE_AT} = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    _, _, runs = round_(tick["round"])
    summary, calls = max(runs, key=lambda run: run[0]["polled"])
    report.rows.append(
        Row("poller", "the run whose shard holds 1 job due", 200, _run_result(summary), calls)
    )


def _run_result(summary: dict[str, Any]) -> str:
    """What a run's summary (``RunSummary.as_dict``) says it did, in a word or two."""
    if not summary["complete"]:
        return "cut short: out of time"
    if summary["recovered"]:
        return f"recovered {summary['recovered']}"
    if summary["polled"] or summary["swept"]:
        return f"polled {summary['polled']}, swept {summary['swept']}"
    return "idle"


@contextmanager
def account(counter: CallCounter) -> Iterator[tuple[Any, dict[str, str]]]:
    """A fresh moto account with the stack's resources, every call counted by ``counter``:
    a session on it and the functions' environment (not yet set)."""
    import boto3
    from moto import mock_aws

    from devstack.resources import create_resources
    from devstack.resources import environment as lambda_env

    with mock_aws(), counter.installed():
        session = boto3.session.Session()
        names = create_resources(session, prefix="sume-bench", signing_secret=d.SECRET)
        try:
            yield session, lambda_env(names)
        finally:
            runtime.reset()


def measure() -> CallsReport:
    """Every receiver scenario on moto, the two references for comparison, the worker's
    and the poller's rows."""
    report = CallsReport()
    counter = CallCounter()
    with account(counter) as (session, env):
        with environment(env):
            _receiver_rows(report, counter, session, env)
            _reference_rows(report, counter, session, env)
        worker_poller_rows(report, counter, session, env)
    report.at_import = {m: import_side_effects(m) for m in handler_modules()}
    return report


def handler_modules() -> list[str]:
    """The functions' handler modules, as the stack deploys them."""
    return ["receiver", "worker", "poller"]


IMPORT_PROBE = """
import json, socket, sys
from bench.env import use_fake_aws
use_fake_aws()
from bench.counting import CallCounter
connects = []
real_connect = socket.socket.connect
def connect(self, address):
    connects.append(address)
    return real_connect(self, address)
socket.socket.connect = connect
counter = CallCounter()
with counter.installed():
    __import__(sys.argv[1])
print(json.dumps({"calls": len(counter.calls), "clients": len(counter.clients),
                  "connects": len(connects)}))
"""


def import_side_effects(module: str) -> dict[str, int] | str:
    """AWS calls, clients and sockets a fresh process makes by importing ``module``."""
    env = {**lambda_runtime_env(), **STUB_NAMES}
    out = python("-c", IMPORT_PROBE, module, env=env)
    if out.returncode:
        return out.stderr.strip().splitlines()[-1]
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def lambda_runtime_env() -> dict[str, str]:
    """A subprocess environment that looks like a Lambda container to Powertools."""
    import os

    from bench.env import FAKE_AWS, UNSET

    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(FAKE_AWS)
    env.update(
        {
            "LAMBDA_TASK_ROOT": str(FUNCTIONS),
            "AWS_LAMBDA_FUNCTION_NAME": "sume-bench",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
            "PYTHONPATH": os.pathsep.join([str(FUNCTIONS), str(FUNCTIONS.parent)]),
        }
    )
    # Powertools traces only inside Lambda; as deployed it is on, so the
    # import cost of X-Ray and its patching is part of a real cold start.
    env.pop("POWERTOOLS_TRACE_DISABLED", None)
    # The Lambda runtime's boto3 is compiled; compiling every module on each
    # import would dwarf what is measured. The bytecode goes to .cache/, never
    # into .venv.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(FUNCTIONS.parent / ".cache" / "bench-pycache")
    return env


def render(report: CallsReport, targets: Targets) -> None:
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
    by_kind = {
        "new delivery: exactly 2 AWS calls": [
            r for r in report.rows if r.design == "ours" and r.delivery == "new"
        ],
        "duplicate: 1-2 AWS calls (3 only re-enqueueing)": [
            r for r in report.rows if r.design == "ours" and r.delivery.startswith("duplicate")
        ],
        "rejected: 0 AWS calls": [
            r for r in report.rows if r.design == "ours" and r.target is ZERO
        ],
    }
    for name, rows in by_kind.items():
        counts = sorted({len(r.calls) for r in rows})
        targets.add(name, "/".join(map(str, counts)), all(r.met for r in rows))
    print()
