"""``sume-webhooks tail`` against moto's CloudWatch Logs: each function's job-event line
as the function writes it, and the follower's reads (time order across log groups,
each line once, lines made searchable late, long histories), output and exit codes."""

from __future__ import annotations

import argparse
import io
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

import poller
import receiver
import worker
from devstack.logs import invoking, ship
from sume.core.names import JOB_EVENT, Happened
from sume.polling.registration import Registration
from sume.receiving.webhook import Receipt, Rejected
from sume.working.errors import Parked
from sume.working.results import Action, JobResult
from sume_cli import OpsError, tailing
from sume_cli.commands.tail import INTERRUPTED, cmd_tail, local_groups, stage_log_groups
from sume_cli.stackinfo import local_log_groups
from sume_cli.tailing import DETAILS, Follower, parse
from sume_cli.times import iso
from tests.integration.conftest import Logs
from tests.integration.test_poller import Clock, register
from tests.rounds import poller_round

# An hour ago: CloudWatch Logs refuses lines from too far ahead or behind.
T0 = float(int(time.time()) - 3600)


def event_line(kind: str, job_id: str | None, **fields: Any) -> str:
    """A job event's line as Powertools writes it."""
    return json.dumps(
        {
            "level": "INFO",
            "location": "observe:70",
            "message": "some event",
            "service": "sume-webhooks",
            "function_name": "sume-local-worker",
            JOB_EVENT: kind,
            "job_id": job_id,
            **fields,
        }
    )


@pytest.fixture
def cloudwatch() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("logs", region_name="us-east-1")
        for group in ("/aws/lambda/a", "/aws/lambda/b"):
            client.create_log_group(logGroupName=group)
            client.create_log_stream(logGroupName=group, logStreamName="s")
        yield client


def put(logs: Any, group: str, at: float, message: str) -> None:
    logs.put_log_events(
        logGroupName=f"/aws/lambda/{group}",
        logStreamName="s",
        logEvents=[{"timestamp": int(at * 1000), "message": message}],
    )


def shown(lines: list[tailing.JobEventLine]) -> list[tuple[str, str | None]]:
    return [(found.kind, found.job_id) for found in lines]


GROUPS = ["/aws/lambda/a", "/aws/lambda/b"]


def test_lines_of_every_log_group_come_in_time_order_each_once(cloudwatch: Any) -> None:
    put(cloudwatch, "a", T0 + 1, event_line("received", "job_1", sume_event="job.completed"))
    put(cloudwatch, "b", T0 + 2, event_line("processed", "job_1", outcome="completed"))
    put(cloudwatch, "a", T0 + 3, event_line("received", "job_2", sume_event="job.failed"))
    # What is not a job event: another line, text, a job_event no function writes.
    put(cloudwatch, "a", T0 + 1.5, json.dumps({"level": "INFO", "message": "poller run"}))
    put(cloudwatch, "b", T0 + 1.6, "START RequestId: 1 Version: $LATEST")
    put(cloudwatch, "b", T0 + 1.7, event_line("exploded", "job_1"))
    put(cloudwatch, "a", T0 - 1, event_line("received", "job_0"))  # before --since
    follower = Follower(cloudwatch, GROUPS, since=T0, lag_seconds=60)

    first = follower.read(now=T0 + 10)
    assert shown(first) == [("received", "job_1"), ("processed", "job_1"), ("received", "job_2")]
    assert [found.at for found in first] == [T0 + 1, T0 + 2, T0 + 3]
    assert follower.read(now=T0 + 12) == []

    # Made searchable late: older than a line already shown, still within the lag.
    put(cloudwatch, "b", T0 + 2.5, event_line("retry", "job_3", error={"code": "http_503"}))
    assert shown(follower.read(now=T0 + 14)) == [("retry", "job_3")]
    assert follower.read(now=T0 + 16) == []


def test_a_line_searchable_only_after_the_lag_is_not_read(cloudwatch: Any) -> None:
    follower = Follower(cloudwatch, GROUPS, since=T0, lag_seconds=60)
    assert follower.read(now=T0 + 100) == []
    put(cloudwatch, "a", T0 + 30, event_line("received", "job_late"))
    # The read goes back 60 s, to T0 + 42: a line of T0 + 30 is past it.
    assert follower.read(now=T0 + 102) == []


def test_a_long_history_is_read_page_by_page_each_line_once(
    cloudwatch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tailing, "MAX_PAGES", 2)
    for n in range(25):
        put(cloudwatch, "a", T0 + n, event_line("received", f"job_{n:02d}"))
    follower = Follower(cloudwatch, GROUPS, since=T0, page_size=4)
    seen: list[tailing.JobEventLine] = []
    for read in range(5):
        seen += follower.read(now=T0 + 100 + read)
    assert [found.job_id for found in seen] == [f"job_{n:02d}" for n in range(25)]


def test_every_job_event_has_its_detail() -> None:
    assert set(DETAILS) == set(Happened)


def test_a_line_too_long_or_not_an_object_tells_no_event() -> None:
    assert parse("[1, 2]", T0) is None
    assert parse("{", T0) is None
    padded = event_line("received", "job_x", pad="x" * tailing.MAX_LINE_BYTES)
    assert parse(padded, T0) is None


# What each function writes, read back as tail reads it.


@pytest.fixture
def function_lines(logs: Logs) -> Iterator[Callable[[], list[tailing.JobEventLine]]]:
    """The functions' job events since the test began, at INFO as deployed."""
    from sume.core.observability import logger

    python_logger = logging.getLogger(logger.name)
    level = python_logger.level
    python_logger.setLevel(logging.INFO)

    def read() -> list[tailing.JobEventLine]:
        found = (parse(line, T0) for line in logs.text.splitlines())
        return [line for line in found if line is not None]

    yield read
    python_logger.setLevel(level)


def details(lines: list[tailing.JobEventLine]) -> list[tuple[str, str | None, str]]:
    return [(found.kind, found.job_id, found.detail) for found in lines]


def test_the_receiver_writes_one_job_event_per_delivery(
    function_lines: Callable[[], list[tailing.JobEventLine]],
) -> None:
    for result, state in (("new", "received"), ("duplicate", "processed"), ("test", None)):
        receiver.accepted(Receipt(result, 0, "job_r", "job.completed", result == "new", state))
    receiver.accepted(Receipt("conflict", 0, "job_r", "job.failed", False, "processed"))
    receiver.rejected(Rejected(401, "signature_mismatch"))
    assert details(function_lines()) == [
        ("received", "job_r", "job.completed: stored, work queued"),
        ("duplicate", "job_r", "job.completed: delivery counted; the job is processed"),
        ("conflict", "job_r", "job.failed: delivery counted; the job is processed"),
        ("rejected", None, "401 signature_mismatch"),
    ]


def test_the_worker_writes_one_job_event_per_ending(
    function_lines: Callable[[], list[tailing.JobEventLine]],
) -> None:
    artifacts = [{"key": "a"}, {"key": "b"}]
    worker.observe(
        JobResult("job_w", Action.PROCESSED, "completed", "completed", artifacts, sequence=1)
    )
    worker.observe(
        JobResult("job_w", Action.PROCESSED, "completed", "completed", replay=True, sequence=2)
    )
    worker.observe(JobResult("job_e", Action.PROCESSING_ERROR, "http_404", "completed", sequence=1))
    worker.observe(JobResult("job_s", Action.LEFT_TO_SWEEPER, "OutOfTime", attempts=2))
    worker.observe(JobResult("job_k", Action.SKIPPED, "finished", "completed"))
    assert details(function_lines()) == [
        ("processed", "job_w", "completed, 2 artifact(s) stored"),
        ("replayed", "job_w", "completed (announcement #2)"),
        ("processing_error", "job_e", "http_404 (Sume said completed)"),
        ("sweeper", "job_s", "OutOfTime; last receive: acknowledged, left to the sweeper"),
    ]


class Failing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def process(self, *args: Any) -> JobResult:
        raise self.error


def test_the_worker_writes_a_retry_and_a_park(
    function_lines: Callable[[], list[tailing.JobEventLine]], monkeypatch: pytest.MonkeyPatch
) -> None:
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "Put")
    for error, receives in ((throttled, "2"), (Parked("parked"), "5")):
        monkeypatch.setattr(worker.compose, "worker_service", lambda e=error: Failing(e))
        attributes = {"ApproximateReceiveCount": receives}
        record = {"messageId": "m", "body": "job_f", "attributes": attributes}
        with pytest.raises(type(error)):
            worker.record_handler(worker.SQSRecord(record))
    lines = function_lines()
    assert [(found.kind, found.job_id) for found in lines] == [
        ("retry", "job_f"),
        ("dlq", "job_f"),
    ]
    assert lines[0].detail.startswith("ClientError: An error occurred (ThrottlingException)")
    assert lines[0].detail.endswith("; receive 2, SQS retries it")
    assert lines[1].detail.endswith("; receive 5: parked, to the DLQ")


def test_the_poller_writes_registrations_recoveries_and_losses(
    aws: Any,
    sume: Any,
    monkeypatch: pytest.MonkeyPatch,
    function_lines: Callable[[], list[tailing.JobEventLine]],
) -> None:
    poller.observe_registration(Registration("job_g", "event", new=True))
    poller.observe_registration(
        Registration(None, "event", refused="invalid_job_id", message="no job_id")
    )
    monkeypatch.setenv("MAX_POLL_AGE_SECONDS", "3600")
    sume.answer("job_unknown", {"message": "no such job"}, 404)
    register(aws, Clock(time.time() - 4000), "job_unknown", sume.job_url("job_unknown"))
    assert poller_round(60)["lost"] == 1
    assert details(function_lines()) == [
        ("registered", "job_g", "for status polls, by event"),
        ("refused", None, "registration invalid_job_id: no job_id; in the registrations DLQ"),
        ("lost", "job_unknown", "no answer after 1 poll(s), last poll error http_404"),
    ]


def test_the_local_stack_ships_job_events_and_warnings_to_each_function_s_log_group(
    cloudwatch: Any,
) -> None:
    """What the local stack puts in moto's CloudWatch Logs (devstack.logs)."""
    logger = logging.getLogger("tail-shipping-test")
    console = logging.StreamHandler(io.StringIO())
    logger.addHandler(console)
    groups = {"fn-a": "/aws/lambda/a", "fn-b": "/aws/lambda/b"}
    unship = ship(cloudwatch, groups, logger, "ERROR")
    with invoking("/aws/lambda/a"):
        logger.info("round done")  # no job event: stays out
        logger.info("job processed", extra={JOB_EVENT: "processed", "job_id": "job_a"})
        logger.warning("job will be retried")
    with invoking("/aws/lambda/b"):
        logger.error("job lost")
    logger.error("outside any invocation, naming none")
    unship()
    messages = {
        group: [e["message"] for e in cloudwatch.filter_log_events(logGroupName=group)["events"]]
        for group in GROUPS
    }
    assert messages == {
        "/aws/lambda/a": ["job processed", "job will be retried"],
        "/aws/lambda/b": ["job lost"],
    }
    # The console kept its level, and has it back once shipping stops.
    assert console.stream.getvalue().splitlines() == [
        "job lost",
        "outside any invocation, naming none",
    ]
    assert (logger.level, console.level) == (logging.NOTSET, logging.NOTSET)


# Finding the log groups, and the command's output.


def test_a_stage_s_log_groups_are_its_functions_ones() -> None:
    template = {
        "Resources": {
            logical: {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": name}}
            for logical, name in (
                ("FunctionsReceiverLogs1A2B3C4D", "receiver-logs"),
                ("FunctionsWorkerLogs5E6F7A8B", "worker-logs"),
                ("WebhookApiAccessLogs9C0D1E2F", "access-logs"),
            )
        }
    }
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        cloudformation.create_stack(
            StackName="SumeWebhooks-prod", TemplateBody=json.dumps(template)
        )
        groups = stage_log_groups(cloudformation, "SumeWebhooks-prod")
    assert groups == ["receiver-logs", "worker-logs"]


def test_a_stage_not_deployed_is_named() -> None:
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="eu-west-1")
        with pytest.raises(OpsError, match=r"^no stack SumeWebhooks-nope in eu-west-1: is"):
            stage_log_groups(cloudformation, "SumeWebhooks-nope")


def test_a_local_stack_without_its_log_groups_is_named(cloudwatch: Any) -> None:
    for group in sorted(local_log_groups("sume-x").values())[:2]:
        cloudwatch.create_log_group(logGroupName=group)
    with pytest.raises(OpsError, match="no log group /aws/lambda/sume-x-worker on the local"):
        local_groups(cloudwatch, "sume-x")


class Ops:
    """The CLI's deployment, reduced to what ``tail`` asks of it."""

    endpoint_url = None
    stage = "prod"

    def __init__(self, logs: Any, cloudformation: Any) -> None:
        self._clients = {"logs": logs, "cloudformation": cloudformation}

    def require_deployment(self) -> None:
        pass

    def client(self, service: str) -> Any:
        return self._clients[service]


@pytest.mark.parametrize("output", ["table", "json"])
def test_the_command_prints_each_event_once_and_ctrl_c_exits_130(
    output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with mock_aws():
        logs = boto3.client("logs", region_name="us-east-1")
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        template = {
            "Resources": {
                "FunctionsWorkerLogsAB12": {
                    "Type": "AWS::Logs::LogGroup",
                    "Properties": {"LogGroupName": "/aws/lambda/a"},
                }
            }
        }
        cloudformation.create_stack(
            StackName="SumeWebhooks-prod", TemplateBody=json.dumps(template)
        )
        logs.create_log_stream(logGroupName="/aws/lambda/a", logStreamName="s")
        put(logs, "a", T0 - 30, event_line("received", "job_1", sume_event="job.completed"))
        put(logs, "a", T0 - 20, event_line("processed", "job_1", outcome="completed", sequence=1))
        reads = iter(range(3))

        def sleep(seconds: float) -> None:
            if next(reads) == 2:
                raise KeyboardInterrupt

        args = argparse.Namespace(since="10m", output=output)
        ops: Any = Ops(logs, cloudformation)
        code = cmd_tail(ops, args, clock=lambda: T0, sleep=sleep)
    assert code == INTERRUPTED
    out, err = capsys.readouterr()
    assert err.splitlines()[-1] == "stopped (Ctrl-C)"
    if output == "json":
        records = [json.loads(line) for line in out.splitlines()]
        assert [(r["event"], r["job_id"], r["detail"]) for r in records] == [
            ("received", "job_1", "job.completed: stored"),
            ("processed", "job_1", "completed"),
        ]
        assert records[0]["at"] == iso(T0 - 30)
        assert records[1]["fields"] == {"job_id": "job_1", "outcome": "completed", "sequence": 1}
    else:
        clock = time.strftime("%H:%M:%S", time.localtime(T0 - 30))
        assert out.splitlines()[0] == (
            # The widest kind (processing_error) sets the column, as in make run's journal.
            f"{clock} received         job_1                    job.completed: stored"
        )
        assert len(out.splitlines()) == 2
