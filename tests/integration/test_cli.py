"""The ops CLI against moto's server over real HTTP, invoked in-process as an operator would."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import boto3
import pytest

from devtools.cli import main
from devtools.ops.context import new_session
from devtools.resources import create_resources
from infra import spec
from infra.spec import ResourceNames
from sume.envelope import JobEvent, parse
from sume.jobs import JobsTable, Source, State
from sume.signature import SignatureError, verify
from tests.builders import SECRET, job_body, raw_of

ISO_UTC = "%Y-%m-%dT%H:%M:%SZ"


def reset(endpoint: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(request, timeout=10).close()


@pytest.fixture
def endpoint(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A clean moto; the CLI must not pick up a secret or endpoint from the environment."""
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    reset(moto_server)
    yield moto_server
    reset(moto_server)


@pytest.fixture
def names(endpoint: str) -> ResourceNames:
    return create_resources(new_session(), endpoint_url=endpoint, signing_secret=SECRET)


@pytest.fixture
def table(endpoint: str, names: ResourceNames) -> JobsTable:
    return JobsTable(boto3.client("dynamodb", endpoint_url=endpoint), names.table, 16)


@pytest.fixture
def cli(endpoint: str, capsys: pytest.CaptureFixture[str]):
    """Run ``sume-webhooks --endpoint-url <moto> ARGS``; returns (exit code, stdout, stderr)."""

    def run(*argv: str, local: bool = True) -> tuple[int, str, str]:
        capsys.readouterr()
        args = ["--endpoint-url", endpoint, *argv] if local else list(argv)
        code = main(args)
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return code, captured.out, captured.err

    return run


def received(table: JobsTable, job_id: str, event: str = "job.completed", **extra) -> None:
    event_ = parse(raw_of(job_body(job_id, event=event, **extra)))
    assert isinstance(event_, JobEvent)
    now = int(time.time())
    assert table.record(event_, Source.WEBHOOK, now, sweep_at=now + 120).new


def processed(table: JobsTable, job_id: str, event: str = "job.completed") -> None:
    received(table, job_id, event)
    now = int(time.time())
    item, _ = table.claim(job_id, now, lease_seconds=300)
    assert item is not None
    outcome = {"job.completed": "completed", "job.failed": "failed"}[event]
    details = {
        "outcome": outcome,
        "artifacts": [
            {
                "source_url": "https://cdn.example/clip.mp4",
                "bucket": "a",
                "key": "jobs/clip.mp4",
                "uri": "s3://a/jobs/clip.mp4",
                "size": 1234,
                "stored_at": 1764460800,
            }
        ],
    }
    assert table.finish(job_id, item["claim_id"], State.PROCESSED, now, now + 3600, details)


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("sume-webhooks: ")
    return lines[0]


# --help, everywhere, and the installed console script


HELP_PATHS = [
    [],
    ["status"],
    ["list"],
    ["expect"],
    ["replay"],
    ["dlq"],
    ["dlq", "peek"],
    ["dlq", "redrive"],
    ["send-test"],
    ["secrets"],
    ["secrets", "rotate"],
    ["secrets", "retire"],
    ["secrets", "status"],
]


@pytest.mark.parametrize("path", HELP_PATHS, ids=lambda p: " ".join(p) or "top")
def test_help_everywhere(path, capsys):
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: sume-webhooks {' '.join(path)}".rstrip())


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "sume-webhooks"
    result = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    for command in ("status", "list", "expect", "replay", "dlq", "send-test", "secrets"):
        assert command in result.stdout


def test_usage_errors_exit_2(capsys):
    assert main(["status"]) == 2
    assert "JOB_ID" in capsys.readouterr().err
    assert main(["status", "job_x"]) == 2
    assert "--stage STAGE" in one_line_error(capsys.readouterr().err)
    assert main(["--stage", "a", "--endpoint-url", "http://127.0.0.1:1", "status", "j"]) == 2
    assert "not both" in capsys.readouterr().err


# status


def test_status_tells_the_whole_story(cli, table, names, endpoint):
    table_name = names.table
    processed(table, "job_story")
    table.count_delivery("job_story", int(time.time()), conflict=True)
    # An attribute this view has no line for yet (another component's) still shows.
    boto3.client("dynamodb", endpoint_url=endpoint).update_item(
        TableName=table_name,
        Key={"job_id": {"S": "job_story"}},
        UpdateExpression="SET announced_at = :t",
        ExpressionAttributeValues={":t": {"N": "1764460800"}},
    )

    code, out, _ = cli("status", "job_story")
    assert code == 0
    assert "processed (follow-up work done)" in out
    assert "job.completed  status=OK" in out
    assert "deliveries" in out and "2  conflicts=1" in out
    assert (
        "s3://a/jobs/clip.mp4  1234 bytes  from https://cdn.example/clip.mp4  "
        "stored 2025-11-30T00:00:00Z"
    ) in out
    assert any(line.split() == ["source", "webhook"] for line in out.splitlines())
    assert any(
        line.split() == ["announced_at", "2025-11-30T00:00:00Z"] for line in out.splitlines()
    )

    code, out, _ = cli("status", "job_story", "--json")
    story = json.loads(out)
    assert code == 0
    assert story["state"] == "processed"
    assert story["deliveries"] == 2
    assert story["conflicts"] == 1
    assert json.loads(story["body"])["job_id"] == "job_story"
    assert story["announced_at"] == "2025-11-30T00:00:00Z"
    assert story["artifacts"][0]["stored_at"] == "2025-11-30T00:00:00Z"
    for attribute in ("first_seen", "received_at", "processed_at", "expires_at"):
        datetime.strptime(story[attribute], ISO_UTC).replace(tzinfo=UTC)
    assert "due_at" not in story


def test_status_of_a_job_owed_work_shows_its_due_time(cli, table):
    received(table, "job_owed")
    code, out, _ = cli("status", "job_owed")
    assert code == 0
    assert "received (terminal event stored; follow-up work owed)" in out
    assert "due " in out and "shard=" in out


def test_status_of_a_missing_job_is_a_one_line_error(cli, names):
    code, out, err = cli("status", "job_nobody")
    assert code == 1
    assert out == ""
    assert "no job 'job_nobody'" in one_line_error(err)


def test_missing_local_stack_is_a_one_line_error(cli, endpoint):
    code, _, err = cli("status", "job_x")
    assert code == 1
    assert f"no table sume-local-jobs at {endpoint}" in one_line_error(err)


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (["status", " job_x"], "must not start or end with whitespace"),
        (["replay", "job\tx"], "must not contain U+0009, a control character"),
        (
            ["expect", "job_\u200b", "https://sume.example/jobs/1"],
            "must not contain U+200B, an invisible format character",
        ),
        (["status", "é" * 129], "must be at most 256 UTF-8 bytes"),
    ],
)
def test_an_invalid_job_id_is_a_usage_error_before_any_call(argv, rule, capsys):
    # Nothing listens on port 9: any AWS call would end in "cannot reach".
    assert main(["--endpoint-url", "http://127.0.0.1:9", *argv]) == 2
    assert one_line_error(capsys.readouterr().err) == f"sume-webhooks: JOB_ID: job_id {rule}"


def test_unreachable_endpoint_is_a_one_line_error(capsys):
    assert main(["--endpoint-url", "http://127.0.0.1:9", "status", "job_x"]) == 1
    assert "cannot reach" in one_line_error(capsys.readouterr().err)


# expect, list


def test_expect_registers_once_and_validates(cli, table):
    url = "https://api.sume.example/jobs/job_w/status"
    code, out, _ = cli("expect", "job_w", url, "--metadata", "order=42", "--metadata", "u=a=b")
    assert code == 0
    assert out.startswith("registered job_w: first status poll at ")
    item = table.get("job_w")
    assert item is not None
    assert item["state"] == "awaiting"
    assert item["status_url"] == url
    assert item["metadata"] == {"order": "42", "u": "a=b"}

    code, out, _ = cli("expect", "job_w", url)
    assert code == 0
    assert "already known (state awaiting); nothing changed" in out

    code, _, err = cli("expect", "job_v", "ftp://x/status")
    assert code == 2
    assert "http(s)" in one_line_error(err)
    code, _, err = cli("expect", "job_v", url, "--metadata", "novalue")
    assert code == 2
    assert "KEY=VALUE" in one_line_error(err)
    assert table.get("job_v") is None


def test_list_awaiting_and_owed_from_the_due_index(cli, table):
    for job in ("job_a1", "job_a2"):
        assert cli("expect", job, f"https://api.sume.example/jobs/{job}")[0] == 0
    received(table, "job_r1")
    received(table, "job_p1")
    table.claim("job_p1", int(time.time()), lease_seconds=300)
    processed(table, "job_done")

    code, out, err = cli("list", "--state", "awaiting")
    assert code == 0
    assert out.splitlines()[0].split() == ["JOB_ID", "STATE", "EVENT", "REGISTERED_AT", "DUE_AT"]
    assert sorted(line.split()[0] for line in out.splitlines()[1:]) == ["job_a1", "job_a2"]
    assert "from the due-work index" in err

    code, out, _ = cli("list", "--state", "owed", "--json")
    listing = json.loads(out)
    assert code == 0
    assert listing["source"] == "index"
    assert {(j["job_id"], j["state"]) for j in listing["jobs"]} == {
        ("job_r1", "received"),
        ("job_p1", "processing"),
    }
    assert "body" not in listing["jobs"][0]

    code, out, err = cli("list", "--state", "owed", "--limit", "1")
    assert code == 0
    assert len(out.splitlines()) == 2
    assert "stopped early" in err

    code, out, _ = cli("list", "--state", "awaiting", "--since", "2099-01-01")
    assert (code, out.strip()) == (0, "no awaiting jobs")
    code, out, _ = cli("list", "--state", "awaiting", "--since", "1h")
    assert code == 0 and "job_a1" in out


def test_list_of_finished_states_needs_an_explicit_bounded_scan(cli, table):
    processed(table, "job_ok")
    processed(table, "job_bad", event="job.failed")
    received(table, "job_new_failure", event="job.failed")

    code, out, err = cli("list", "--state", "processed")
    assert code == 2
    assert "--scan" in one_line_error(err)

    code, out, err = cli("list", "--state", "processed", "--scan")
    assert code == 0
    assert sorted(line.split()[0] for line in out.splitlines()[1:]) == ["job_bad", "job_ok"]
    assert "by a bounded Scan" in err

    code, out, _ = cli("list", "--state", "failed", "--scan", "--json")
    assert code == 0
    assert sorted(j["job_id"] for j in json.loads(out)["jobs"]) == ["job_bad", "job_new_failure"]

    code, out, err = cli("list", "--state", "lost", "--scan", "--scan-budget", "1")
    assert code == 0
    assert "read 1 item(s) by a bounded Scan" in err
    assert "stopped early" in err

    code, _, err = cli("list", "--state", "processed", "--since", "yesterday-ish")
    assert code == 2
    assert "--since" in one_line_error(err)


# replay


def test_replay_makes_a_finished_job_owed_and_queues_it(cli, table, names, endpoint):
    processed(table, "job_again")
    code, out, _ = cli("replay", "job_again")
    assert code == 0
    assert "replay queued for job_again" in out
    item = table.get("job_again")
    assert item is not None
    assert (item["state"], item["replay"]) == ("received", True)
    assert "expires_at" not in item
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    messages = sqs.receive_message(QueueUrl=names.queue_url, MaxNumberOfMessages=10)
    assert [m["Body"] for m in messages["Messages"]] == ["job_again"]

    code, _, err = cli("replay", "job_again")
    assert code == 1
    assert "is received: only processed or processing_error jobs" in one_line_error(err)
    code, _, err = cli("replay", "job_ghost")
    assert code == 1
    assert "no job 'job_ghost'" in one_line_error(err)


# dlq


def test_dlq_peek_shows_jobs_and_leaves_messages_then_redrive_moves_them(
    cli, table, names, endpoint
):
    processed(table, "job_dead_done")
    received(table, "job_dead_owed")
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    for body in ("job_dead_done", "job_dead_owed", "job_unknown"):
        sqs.send_message(QueueUrl=names.dlq_url, MessageBody=body)

    code, out, err = cli("dlq", "peek", "--json")
    letters = {row["job_id"]: row for row in json.loads(out)}
    assert code == 0
    assert set(letters) == {"job_dead_done", "job_dead_owed", "job_unknown"}
    assert letters["job_dead_done"]["state"] == "processed"
    assert letters["job_dead_owed"]["state"] == "received"
    assert letters["job_unknown"]["found"] is False
    assert "3 shown" in err

    code, out, _ = cli("dlq", "peek")
    assert code == 0
    assert "(no such job)" in out
    assert len(out.splitlines()) == 4

    code, out, err = cli("dlq", "redrive")
    assert code == 0
    assert "moved 3 message(s) back to the jobs queue" in out
    assert "job_dead_done is processed" in err and "replay job_dead_done" in err
    moved = sqs.receive_message(QueueUrl=names.queue_url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in moved) == ["job_dead_done", "job_dead_owed", "job_unknown"]

    code, out, _ = cli("dlq", "peek")
    assert (code, out.strip()) == (0, "the DLQ is empty")


def test_dlq_shows_each_body_exactly_as_sent(cli, table, names, endpoint):
    received(table, "job_padded")
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    sqs.send_message(QueueUrl=names.dlq_url, MessageBody=" job_padded ")
    code, out, _ = cli("dlq", "peek", "--json")
    assert code == 0
    [letter] = json.loads(out)
    assert (letter["job_id"], letter["found"]) == (" job_padded ", False)


def test_dlq_redrive_is_bounded(cli, names, endpoint):
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    for i in range(3):
        sqs.send_message(QueueUrl=names.dlq_url, MessageBody=f"job_{i}")
    code, out, _ = cli("dlq", "redrive", "--limit", "2")
    assert code == 0
    assert "moved 2 message(s)" in out
    left = sqs.receive_message(QueueUrl=names.dlq_url, MaxNumberOfMessages=10)["Messages"]
    assert len(left) == 1


# send-test


class _Verifying(BaseHTTPRequestHandler):
    """A receiver stand-in that checks the signature the way the receiver does."""

    secrets: ClassVar[tuple[bytes, ...]] = (SECRET.encode(),)
    seen: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["content-length"]))
        try:
            position = verify(
                raw,
                self.headers.get("x-sume-webhook-timestamp"),
                self.headers.get("x-sume-webhook-signature"),
                self.secrets,
                time.time(),
            )
            status, body = 200, {"result": "test", "position": position}
        except SignatureError as exc:
            status, body = 401, {"error": exc.reason}
        self.seen.append(json.loads(raw))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def verifying_url() -> Iterator[str]:
    _Verifying.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Verifying)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/webhooks/sume"
    server.shutdown()
    server.server_close()


def test_send_test_signs_with_the_given_secret(cli, verifying_url):
    code, out, _ = cli("send-test", verifying_url, "--secret", SECRET, local=False)
    assert code == 0
    assert out.startswith("webhook.test -> 200 ")
    assert _Verifying.seen[0]["event"] == "webhook.test"
    assert "job_id" not in _Verifying.seen[0]

    code, out, err = cli("send-test", verifying_url, "--secret", "whsec_wrong", local=False)
    assert code == 3
    assert "401" in out and "signature_mismatch" in out
    assert "not accepted: webhook.test" in err


def test_send_test_with_a_job_reads_the_secret_from_secrets_manager(cli, names, verifying_url):
    code, out, _ = cli("send-test", verifying_url, "--job", "job_probe", "--event", "job.failed")
    assert code == 0
    assert [line.split(" -> ")[1][:3] for line in out.splitlines()] == ["200", "200"]
    event = _Verifying.seen[1]
    assert (event["event"], event["job_id"], event["status"]) == (
        "job.failed",
        "job_probe",
        "ERROR",
    )


def test_send_test_secret_from_environment(cli, verifying_url, monkeypatch):
    monkeypatch.setenv("SUME_COM_WEBHOOK_SIGNING_SECRET", json.dumps(["whsec_other", SECRET]))
    code, out, _ = cli("send-test", verifying_url, local=False)
    assert code == 0
    assert '"position": 0' in out


def test_send_test_errors(cli):
    code, _, err = cli(
        "send-test", "http://127.0.0.1:9/webhooks/sume", "--secret", "s", local=False
    )
    assert code == 1
    assert "cannot reach http://127.0.0.1:9/webhooks/sume" in one_line_error(err)
    code, _, err = cli("send-test", "http://127.0.0.1:9/x", local=False)
    assert code == 2
    assert "no signing secret" in one_line_error(err)
    code, _, err = cli("send-test", local=False)
    assert code == 2
    assert "no URL" in one_line_error(err)


# secrets


def stored(endpoint: str, arn: str) -> str:
    sm = boto3.client("secretsmanager", endpoint_url=endpoint)
    return sm.get_secret_value(SecretId=arn)["SecretString"]


def test_secrets_rotate_then_retire_never_the_last(cli, names, endpoint, monkeypatch):
    arn = names.signing_secret_arn
    assert arn
    code, out, _ = cli("secrets", "rotate", "--new-secret", "whsec_new")
    assert code == 0
    assert json.loads(stored(endpoint, arn)) == ["whsec_new", SECRET]
    assert "SignatureSecret1" in out
    assert "secrets retire" in out
    assert "whsec_new" not in out and SECRET not in out

    code, _, err = cli("secrets", "rotate", "--new-secret", SECRET)
    assert code == 1
    assert "already active at position 1" in one_line_error(err)

    code, out, _ = cli("secrets", "retire")
    assert code == 0
    assert json.loads(stored(endpoint, arn)) == ["whsec_new"]

    code, _, err = cli("secrets", "retire")
    assert code == 1
    assert "refusing to retire the last signing secret" in one_line_error(err)
    assert json.loads(stored(endpoint, arn)) == ["whsec_new"]

    monkeypatch.setattr(sys, "stdin", io.StringIO("whsec_piped\n"))
    code, out, _ = cli("secrets", "rotate", "--new-secret", "-")
    assert code == 0
    assert json.loads(stored(endpoint, arn)) == ["whsec_piped", "whsec_new"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = cli("secrets", "rotate", "--new-secret", "-")
    assert code == 2
    assert "empty" in one_line_error(err)


def test_secrets_status_reads_the_receivers_position_metric(cli, names, endpoint):
    cli("secrets", "rotate", "--new-secret", "whsec_new")
    cloudwatch = boto3.client("cloudwatch", endpoint_url=endpoint)
    cloudwatch.put_metric_data(
        Namespace="SumeWebhooks",
        MetricData=[
            {
                "MetricName": "SignatureSecret1",
                "Dimensions": [{"Name": "service", "Value": "sume-webhooks"}],
                "Value": 3,
                "Unit": "Count",
            }
        ],
    )
    code, out, _ = cli("secrets", "status")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert code == 0
    assert rows["0"][2:] == ["SignatureSecret0", "no", "data"]
    assert rows["1"][2:] == ["SignatureSecret1", "3"]


def test_secrets_need_a_secret_in_secrets_manager(cli, endpoint):
    create_resources(new_session(), endpoint_url=endpoint)
    code, _, err = cli("secrets", "rotate", "--new-secret", "x")
    assert code == 1
    assert "keeps no signing secret in Secrets Manager" in one_line_error(err)


# --stage: resources from the stack's CloudFormation outputs


def deploy_outputs(endpoint: str, stage: str, names: ResourceNames, webhook_url: str) -> None:
    values = {
        spec.OUTPUTS[field]: value for field, value in vars(names).items() if value is not None
    }
    values[spec.OUTPUT_WEBHOOK_URL] = webhook_url
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in values.items()},
    }
    boto3.client("cloudformation", endpoint_url=endpoint).create_stack(
        StackName=spec.stack_name(stage), TemplateBody=json.dumps(template)
    )


def test_stage_finds_resources_from_stack_outputs(
    cli, endpoint, table, names, verifying_url, monkeypatch
):
    deploy_outputs(endpoint, "qa", names, verifying_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    received(table, "job_staged")

    code, out, _ = cli("--stage", "qa", "status", "job_staged", local=False)
    assert code == 0
    assert "job_staged" in out

    code, out, _ = cli("--stage", "qa", "send-test", local=False)
    assert code == 0
    assert out.startswith("webhook.test -> 200")

    code, _, err = cli("status", "job_staged", "--stage", "prod", local=False)
    assert code == 1
    assert "no stack SumeWebhooks-prod in us-east-1" in one_line_error(err)


def test_stage_with_missing_outputs_says_which(cli, endpoint, names, monkeypatch):
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {spec.OUTPUTS["table"]: {"Value": names.table}},
    }
    boto3.client("cloudformation", endpoint_url=endpoint).create_stack(
        StackName=spec.stack_name("old"), TemplateBody=json.dumps(template)
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    code, _, err = cli("--stage", "old", "status", "job_x", local=False)
    assert code == 1
    assert "lacks the output(s) ArtifactsBucketName" in one_line_error(err)


def test_stage_without_credentials_is_a_one_line_error(cli, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    code, _, err = cli("--stage", "qa", "status", "job_x", local=False)
    assert code == 1
    assert "no AWS credentials" in one_line_error(err)


def test_stage_without_a_region_is_a_one_line_error(cli, monkeypatch):
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var)
    code, _, err = cli("--stage", "qa", "list", "--state", "owed", local=False)
    assert code == 1
    assert "no AWS region: pass --region" in one_line_error(err)
