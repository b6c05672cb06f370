"""``sume-webhooks report``: a table of jobs with known endings, the CLI over moto's server.

The jobs are brought to their endings by the table's own transitions, each
ending written as the worker and the poller write it (``window_at`` from the
job as they hold it); tests/integration/test_worker.py and test_poller.py hold
the handlers to that. Every count and job_id list of the report is compared.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from devstack.counting import CallCounter
from infra.spec import ResourceNames
from sume.contract.envelope import JobEvent, parse
from sume.core.names import due_shard
from sume.store.job import Source, State
from sume.store.jobs import JobsTable
from sume_cli.main import main
from sume_cli.times import iso
from tests.builders import SECRET, job_body, raw_of
from tests.integration.conftest import served_resources

# The jobs' times and the CLI's "now" (``main``'s clock): the windows hold what they
# should however long after collection each test runs.
NOW = int(time.time())
RECENT = NOW - 600
EARLIER = NOW - 2 * 3600
OLD = NOW - 3 * 86400
HOUR = 3600


def reset(endpoint: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(request, timeout=10).close()


@pytest.fixture
def endpoint(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    reset(moto_server)
    yield moto_server
    reset(moto_server)


@pytest.fixture
def names(endpoint: str) -> ResourceNames:
    return served_resources(endpoint, signing_secret=SECRET)


@pytest.fixture
def table(endpoint: str, names: ResourceNames) -> JobsTable:
    return JobsTable(boto3.client("dynamodb", endpoint_url=endpoint), names.table, 16)


@pytest.fixture
def cli(endpoint: str, capsys: pytest.CaptureFixture[str]):
    return runner(endpoint, capsys)


def runner(endpoint: str, capsys: pytest.CaptureFixture[str]):
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--endpoint-url", endpoint, *argv], clock=lambda: NOW)
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return code, captured.out, captured.err

    return run


def record(table: JobsTable, job_id: str, at: int, event: str = "job.completed", **kw: Any) -> None:
    parsed = parse(raw_of(job_body(job_id, event=event)))
    assert isinstance(parsed, JobEvent)
    source = kw.get("source", Source.WEBHOOK)
    assert table.record(parsed, source, at, sweep_at=kw.get("sweep_at", NOW + HOUR)).new


def register(table: JobsTable, job_id: str, at: int, first_poll_at: int | None = None) -> None:
    url = f"https://api.sume.example/v1/jobs/{job_id}"
    assert table.register(job_id, url, None, at, first_poll_at or at + 900)


def finish(table: JobsTable, job_id: str, at: int, outcome: str | None = "completed") -> None:
    """End the job as the worker does: claim it, then finish with the claimed job's window."""
    claimed = table.claim(job_id, at, lease_seconds=300)
    state = State.PROCESSED if outcome else State.PROCESSING_ERROR
    details: dict[str, Any] = {"outcome": outcome} if outcome else {}
    if not outcome:
        details["processing_error"] = {"code": "artifact_not_found", "message": "404"}
    window_at = claimed.unreported_at()
    assert table.finish(
        job_id, str(claimed.claim_id), state, at, at + 35 * 86400, details, window_at=window_at
    )


def lose(table: JobsTable, job_id: str, at: int) -> None:
    """Give the job up as the poller does, once due, with the polled job's window."""
    polled = table.get(job_id)
    assert polled is not None
    assert table.mark_lost(job_id, at, at + 300, "http_503", window_at=polled.unreported_at())


class _Day:
    """The day's jobs, built once for the tests that only read them: each report is a
    read. Built again should another test's reset of the moto server have wiped them."""

    def __init__(self) -> None:
        self.built: JobsTable | None = None

    def on(self, endpoint: str, cli: Any) -> JobsTable:
        if self.built is None or self.built.get("job_old_awaiting") is None:
            reset(endpoint)
            names = served_resources(endpoint, signing_secret=SECRET)
            table = JobsTable(boto3.client("dynamodb", endpoint_url=endpoint), names.table, 16)
            self.built = a_day(table, cli)
        return self.built


@pytest.fixture(scope="module")
def day(moto_server: str) -> Iterator[_Day]:
    yield _Day()
    reset(moto_server)


@pytest.fixture
def day_cli(moto_server: str, monkeypatch: pytest.MonkeyPatch, capsys):
    """The CLI over the day's jobs: ``cli`` without its fresh moto."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return runner(moto_server, capsys)


@pytest.fixture
def scenario(day: _Day, moto_server: str, day_cli) -> JobsTable:
    return day.on(moto_server, day_cli)


def a_day(table: JobsTable, cli: Any) -> JobsTable:
    # In the last 30 minutes: every one ends well or is still on time.
    for job_id, event, outcome in (
        ("job_web_done", "job.completed", "completed"),
        ("job_web_failed", "job.failed", "failed"),
        ("job_web_canceled", "job.canceled", "canceled"),
    ):
        record(table, job_id, RECENT, event)
        finish(table, job_id, RECENT + 5, outcome)
    register(table, "job_reg_web", RECENT)
    record(table, "job_reg_web", RECENT + 60)
    finish(table, "job_reg_web", RECENT + 65)
    register(table, "job_reg_poll", RECENT)
    record(table, "job_reg_poll", RECENT + 100, source=Source.POLL)
    finish(table, "job_reg_poll", RECENT + 105)
    record(table, "job_replayed", RECENT + 1)
    finish(table, "job_replayed", RECENT + 6)
    code, _, err = cli("replay", "job_replayed", "--reason", "bucket fixed")
    assert code == 0, err
    finish(table, "job_replayed", NOW - 5)
    register(table, "job_awaiting", RECENT + 2)
    record(table, "job_busy", RECENT + 3)
    table.claim("job_busy", NOW - 10, lease_seconds=900)

    # Two hours ago: the endings --check is for.
    record(table, "job_error", EARLIER)
    finish(table, "job_error", EARLIER + 5, outcome=None)
    register(table, "job_lost", EARLIER)
    lose(table, "job_lost", EARLIER + 900)
    register(table, "job_lost_late", EARLIER + 1)
    lose(table, "job_lost_late", EARLIER + 901)
    record(table, "job_lost_late", NOW - 30)  # its webhook came after all: owed work now
    register(table, "job_stuck_poll", EARLIER + 2, first_poll_at=EARLIER + 900)
    record(table, "job_stuck_sweep", EARLIER + 3, sweep_at=EARLIER + 600)

    # Three days ago: in no 24 h window, whatever its state.
    register(table, "job_old_lost", OLD)
    lose(table, "job_old_lost", OLD + 900)
    record(table, "job_old_done", OLD)
    finish(table, "job_old_done", OLD + 5)
    register(table, "job_old_awaiting", OLD, first_poll_at=NOW + HOUR)
    return table


def listed(job_ids: list[str], more: int = 0) -> dict[str, Any]:
    return {"count": len(job_ids) + more, "job_ids": job_ids, "more": more}


def step(argv: list[str], why: str, when: str | None = None) -> dict[str, Any]:
    return {"argv": argv, "why": why, "when": when}


def test_every_count_and_job_id_of_a_day_with_known_endings(scenario, day_cli, moto_server):
    cli, CLI = day_cli, ["sume-webhooks", "--endpoint-url", moto_server]
    with CallCounter().installed() as counter:
        code, out, err = cli("report", "--since", "24h", "--output", "json")
    assert code == 0, err
    report = json.loads(out)
    # The group's replay starts at its oldest job: the same command in every report.
    since = str(iso(EARLIER))
    for read in ("since", "until", "overdue_before", "index_entries_read", "items_read"):
        report.pop(read)
    reason = f"processing_error artifact_not_found since {since}"
    groups = [
        {
            **listed(["job_lost"]),
            "state": "lost",
            "error_code": None,
            "next": [
                step([*CLI, "status", "job_lost"], "why polling gave up: its last poll error")
            ],
        },
        {
            **listed(["job_error"]),
            "state": "processing_error",
            "error_code": "artifact_not_found",
            "next": [
                step(
                    [*CLI, "pause", "worker", "--reason", reason],
                    "jobs stop ending in error; deliveries are still stored",
                    "while the cause persists",
                ),
                step(
                    [
                        *CLI,
                        "replay",
                        "--since",
                        since,
                        "--state",
                        "processing_error",
                        "--error-code",
                        "artifact_not_found",
                        "--reason",
                        reason,
                        "--dry-run",
                    ],
                    "once the cause is fixed: lists the jobs and prints the command that "
                    "replays them",
                ),
            ],
        },
        {
            **listed(["job_stuck_poll", "job_stuck_sweep"]),
            "state": "overdue",
            "error_code": None,
            "next": [
                step(
                    [*CLI, "status", "job_stuck_poll"],
                    "due, and the poller has not acted: its log says why",
                )
            ],
        },
    ]
    assert report == {
        "jobs": 13,
        "registered": 6,
        "received_by_webhook": 9,
        "recovered_by_poll": 1,
        "processed": {"count": 6, "completed": 4, "failed": 1, "canceled": 1},
        "processing_error": listed(["job_error"]),
        "lost": listed(["job_lost"]),
        "replayed": 1,
        "pending": {"count": 5, "awaiting": 2, "received": 2, "processing": 1, "parked": 0},
        "parked": listed([]),
        "overdue": listed(["job_stuck_poll", "job_stuck_sweep"]),
        "paused": [],
        "problems": ["lost 1", "processing_error 1", "overdue 2"],
        "groups": groups,
        "next": [step for group in groups for step in group["next"]],
    }
    # Two indexes and the ended jobs' items; never the table's whole.
    assert "dynamodb.Scan" not in counter.calls
    assert counter.calls.count("dynamodb.Query") == 16 + 2 * 16
    assert counter.calls.count("dynamodb.BatchGetItem") == 1


def test_the_table_lists_what_did_not_end_well_and_check_fails_on_it(
    scenario, day_cli, moto_server
):
    cli, CLI = day_cli, f"sume-webhooks --endpoint-url {moto_server}"
    code, out, err = cli("report", "--since", "24h", "--check", "--limit", "1")
    assert code == 3
    assert (
        "check failed: lost 1, processing_error artifact_not_found 1, overdue 2 "
        "(next: the commands above)"
    ) in err
    lines = out.splitlines()
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines[2 : lines.index("")]]
    rows = {row[0].split(" (")[0]: row[1:] for row in cells}
    assert rows["jobs"] == ["13"]
    assert rows["registered"] == ["6"]
    assert rows["received by webhook"] == ["9"]
    assert rows["recovered by poll"] == ["1"]
    assert rows["processed"] == ["6", "completed 4, failed 1, canceled 1"]
    assert rows["lost"] == ["1"]
    assert rows["processing_error"] == ["1", "artifact_not_found 1"]
    assert rows["parked"] == ["0"]
    assert rows["replayed"] == ["1"]
    assert rows["pending"] == ["5", "awaiting 2, received 2, processing 1"]
    assert rows["overdue"] == ["2"]
    # Each group of problem jobs, and the commands that put it right, as pasted.
    groups = "\n".join(lines[lines.index("") + 1 :])
    assert f"lost: 1 job(s): job_lost\n  next: {CLI} status job_lost  (why polling" in groups
    assert "processing_error artifact_not_found: 1 job(s): job_error\n" in groups
    assert f"  next: while the cause persists: {CLI} pause worker --reason " in groups
    assert f"  next: {CLI} replay --since " in groups
    assert (
        "overdue: 2 job(s): job_stuck_poll, and 1 more (raise --limit: sume-webhooks "
        f"--endpoint-url {moto_server} report --since 24h --limit 2)\n"
        f"  next: {CLI} status job_stuck_poll  (due, "
    ) in groups


def test_a_window_where_every_job_ended_well_passes_the_check(scenario, day_cli):
    cli = day_cli
    code, out, err = cli("report", "--since", "30m", "--check", "--output", "json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["jobs"], report["registered"], report["recovered_by_poll"]) == (8, 3, 1)
    assert report["processed"] == {"count": 6, "completed": 4, "failed": 1, "canceled": 1}
    assert report["pending"] == {
        "count": 2,
        "awaiting": 1,
        "received": 0,
        "processing": 1,
        "parked": 0,
    }
    assert (report["problems"], report["groups"], report["next"]) == ([], [], [])
    assert err.splitlines()[-1].startswith("check passed: no job that entered ")
    assert report["lost"] == report["processing_error"] == report["overdue"] == listed([])
    assert report["parked"] == listed([])


def test_an_iso_since_and_a_shorter_overdue_grace(scenario, day_cli):
    cli = day_cli
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EARLIER + 2))
    code, out, err = cli("report", "--since", since, "--overdue-after", "3h", "--output", "json")
    assert code == 0, err
    report = json.loads(out)
    # job_error, job_lost and job_lost_late entered before it.
    assert report["jobs"] == 10
    # The stuck jobs were due under 2 h ago: not overdue with a 3 h grace.
    assert report["overdue"] == listed([])
    assert report["problems"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "soon"], "--since 'soon': use a duration"),
        (["--overdue-after", "later"], "--overdue-after 'later': use a duration"),
        (["--since", "2999-01-01T00:00:00Z"], "is in the future"),
        (["--since", "400d"], "at most 366 days back"),
        (["--limit", "-1"], "--limit must be at least 0"),
    ],
)
def test_bad_options_are_usage_errors_before_any_aws_call(cli, endpoint, argv, message):
    with CallCounter().installed() as counter:
        code, _, err = cli("report", *argv)
    assert code == 2
    assert message in err
    assert counter.calls == []


def test_a_parked_job_fails_the_check_by_name_until_its_redrive_ends_it(
    table, cli, endpoint, names
):
    record(table, "job_parked", RECENT)
    claimed = table.claim("job_parked", RECENT + 1, lease_seconds=300)
    error = {"code": "fetch_failed", "message": "HTTP 503"}
    # The worker's last receive: the job parked, due past the DLQ's retention.
    assert table.park("job_parked", str(claimed.claim_id), RECENT + 2, error, NOW + 14 * 86400)
    sqs = boto3.client("sqs", endpoint_url=endpoint)
    sqs.send_message(QueueUrl=names.dlq_url, MessageBody="job_parked")

    code, out, err = cli("report", "--check")
    assert code == 3
    cli_ = f"sume-webhooks --endpoint-url {endpoint}"
    assert "check failed: parked 1 (next: the commands above)" in err
    assert (
        f"parked: 1 job(s): job_parked\n  next: {cli_} dlq peek  (why each is parked)\n"
        f"  next: {cli_} dlq redrive  (once the cause is fixed: the worker takes them again)\n"
    ) in out
    code, out, _ = cli("report", "--output", "json")
    report = json.loads(out)
    assert (report["parked"], report["problems"]) == (listed(["job_parked"]), ["parked 1"])

    # The cause fixed: the redrive gives the job back to the worker, which ends it.
    assert cli("dlq", "redrive")[0] == 0
    (message,) = sqs.receive_message(QueueUrl=names.queue_url)["Messages"]
    finish(table, message["Body"], NOW)
    code, _, err = cli("report", "--check")
    assert code == 0, err


def ended_in_shard_above(shards: int, count: int, prefix: str) -> str:
    return next(job_id for n in range(1000) if due_shard(job_id := f"{prefix}{n}", count) >= shards)


def test_check_fails_on_jobs_that_ended_under_another_shard_count(table, cli, endpoint, names):
    client = boto3.client("dynamodb", endpoint_url=endpoint)
    # Lost under 16 shards (a bucket 8..15), then the count is lowered to 8.
    lost = ended_in_shard_above(8, 16, "job_lost_")
    register(table, lost, EARLIER)
    lose(table, lost, EARLIER + 900)
    # Failed under 64 shards (due shard 16..63), then the count is lowered to 16.
    wide = JobsTable(client, names.table, 64)
    failed = ended_in_shard_above(16, 64, "job_error_")
    record(wide, failed, EARLIER)
    claimed = wide.claim(failed, EARLIER + 1, lease_seconds=300)
    details = {"processing_error": {"code": "artifact_not_found", "message": "404"}}
    assert wide.finish(
        failed,
        str(claimed.claim_id),
        State.PROCESSING_ERROR,
        EARLIER + 2,
        NOW + 86400,
        details,
        window_at=claimed.unreported_at(),
    )
    for shards in ("8", "16"):
        code, out, err = cli("--shards", shards, "report", "--check", "--output", "json")
        assert code == 3, (shards, err)
        report = json.loads(out)
        assert report["lost"] == listed([lost]) and report["processing_error"] == listed([failed])
