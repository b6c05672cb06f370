"""Property-based bad input: never a 5xx, never an AWS call for a rejected request,
and every job a signed event creates ends once, whatever JSON it carries.

Requests refused before any AWS client exists (forged ones) are drawn in
tests/unit/test_receiver_refusals.py; these need moto behind the handlers."""

import json
import os
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import receiver
import worker
from devstack.counting import CallCounter
from sume.contract.envelope import TERMINAL_EVENTS
from sume.core import runtime
from sume.core.ids import is_job_id
from sume.store.jobs import JobsTable
from tests.builders import (
    LambdaContext,
    apigw_event,
    signed_headers,
    sqs_event,
)

ROOT = Path(__file__).resolve().parents[2]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=st.binary(max_size=512))
def test_signed_garbage_is_never_5xx(aws, body):
    response = receiver.handler(
        apigw_event(body, signed_headers(body), base64_encoded=True), LambdaContext()
    )
    assert response["statusCode"] in {200, 400}


def nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


# Unicode with lone surrogates drawn often: json.dumps escapes them as \udXXX.
odd_text = st.text(st.one_of(st.characters(), st.characters(categories=["Cs", "Cc", "Cf"])))
finite_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(10**40), 10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    odd_text,
    st.integers(1_000, 300_000).map("é".__mul__),
)


def json_of(scalars: st.SearchStrategy[Any], max_depth: int) -> st.SearchStrategy[Any]:
    tree = st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(odd_text, children, max_size=4)
        ),
        max_leaves=12,
    )
    return st.one_of(tree, st.builds(nest, tree, st.integers(0, max_depth)))


# Past the depth limit (64) often: such bodies are refused before any AWS call.
any_json = json_of(st.one_of(finite_scalars, st.floats()), 100)  # NaN and Infinity too
# Around DynamoDB's 32 levels and up to our limit: such events are stored.
json_values = json_of(finite_scalars, 66)


@dataclass(frozen=True)
class FreshId:
    """A job id around a new uuid, made when the example runs: hypothesis
    repeats drawn values, and a repeated id would be a duplicate, not a new job."""

    before: str
    after: str

    def make(self) -> str:
        return f"{self.before}{uuid.uuid4().hex}{self.after}"


def with_fresh_ids(body: Any) -> Any:
    if isinstance(body, dict) and isinstance(body.get("job_id"), FreshId):
        return {**body, "job_id": body["job_id"].make()}
    return body


def mostly(usual: st.SearchStrategy[Any], *rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` three times in four (listing it twice in ``one_of`` weighs it no more)."""
    return st.integers(0, 3).flatmap(lambda n: usual if n else st.one_of(*rare))


id_text = st.text(st.characters(exclude_categories=["Cc", "Cs", "Cf", "Zl", "Zp"]), max_size=8)
job_ids = mostly(
    st.builds(FreshId, id_text, id_text).filter(lambda f: is_job_id(f.make())),
    st.builds(FreshId, st.sampled_from([" ", "job_", "\ud800"]), st.sampled_from(["\n", "\ud800"])),
    st.builds(FreshId, st.just(""), st.sampled_from(["\x00", "\u200b", " ", "é" * 120])),
    json_values,
)
events = mostly(
    st.sampled_from(sorted(TERMINAL_EVENTS)),
    st.sampled_from(["webhook.test", "job.progress"]),
    json_values,
)
payloads = st.one_of(
    json_values,
    st.fixed_dictionaries({"artifacts": st.lists(st.one_of(odd_text, json_values), max_size=3)}),
)
terminal_events = st.fixed_dictionaries(
    {"event": events, "job_id": job_ids, "error": json_values, "payload": payloads},
    optional={"status": json_values, "x": json_values},
)


def signed(body: Any, ascii_only: bool) -> dict[str, Any]:
    # Without ASCII escapes a lone surrogate becomes bytes that are not UTF-8.
    raw = json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    return apigw_event(raw, signed_headers(raw), base64_encoded=True)


PROPERTY_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture
def calls(aws):
    """The handlers' AWS calls. One container serves all of a property's examples,
    as a warm Lambda serves many deliveries; each example takes its own calls."""
    with CallCounter().installed() as counter:
        runtime.reset()
        yield counter
    runtime.reset()


@settings(PROPERTY_SETTINGS, max_examples=150)
@given(body=st.one_of(any_json, terminal_events), ascii_only=st.booleans())
def test_signed_arbitrary_json_is_never_5xx_and_a_4xx_costs_nothing(calls, body, ascii_only):
    delivery = signed(with_fresh_ids(body), ascii_only)
    calls.take()
    response = receiver.handler(delivery, LambdaContext())
    assert response["statusCode"] in {200, 400, 413}
    if response["statusCode"] != 200:
        assert calls.calls == []


@pytest.fixture
def jobs_queue(aws):
    sqs = boto3.client("sqs")

    def drain() -> list[str]:
        bodies = []
        while messages := sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10).get(
            "Messages"
        ):
            for message in messages:
                bodies.append(message["Body"])
                sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return bodies

    return drain


@pytest.fixture
def artifact_hosts(monkeypatch):
    # Artifact URLs drawn at random are refused by name, never looked up in DNS.
    monkeypatch.setenv("ARTIFACT_ALLOWED_HOSTS", "artifacts.invalid")


@settings(PROPERTY_SETTINGS, max_examples=100)
@given(body=terminal_events, ascii_only=st.booleans())
def test_every_job_a_signed_event_creates_ends_once(
    aws, calls, jobs_queue, artifact_hosts, body, ascii_only
):
    table = JobsTable(boto3.client("dynamodb"), aws.table, 16)
    body = with_fresh_ids(body)
    delivery = signed(body, ascii_only)
    calls.take()
    response = receiver.handler(delivery, LambdaContext())
    status = response["statusCode"]
    answer = json.loads(response["body"])
    event(f"{status} {answer.get('result') or answer.get('error')}")
    assert status in {200, 400, 413}
    if status != 200:
        assert calls.calls == []
        return
    if answer["result"] != "new":
        assert answer["result"] in {"test", "ignored"}
        assert jobs_queue() == []
        return

    job_id = body["job_id"]
    assert is_job_id(job_id)
    assert answer["job_id"] == job_id
    queued = jobs_queue()
    assert queued == [job_id]  # the id exactly as sent, never rewritten
    calls.take()
    # SQS delivers at least once: the same message, again and again.
    for _ in range(3):
        worker.handler(sqs_event(queued), LambdaContext())
    stored = table.get(job_id)
    assert stored is not None
    event(f"ended {stored.state}")
    assert stored.state in {"processed", "processing_error"}
    assert calls.calls.count("events.PutEvents") == 1


def test_importing_the_handlers_makes_no_aws_call():
    script = textwrap.dedent(
        """
        import sys
        sys.path[:0] = [{root!r}, {functions!r}]
        from devstack.counting import CallCounter
        with CallCounter().installed() as calls:
            import receiver
        print(sorted(set(calls.clients)), len(calls.calls))
        """
    ).format(root=str(ROOT), functions=str(ROOT / "functions"))
    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # a call would fail loudly
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    # The X-Ray SDK (behind Powertools' Tracer) builds its own sampling
    # client when imported; it makes no call. Ours are built on first use.
    assert out.stdout.strip() == "['xray'] 0"
