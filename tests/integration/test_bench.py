"""The bench's building blocks in a tiny configuration: they count and run what they claim.

No timing is asserted here; speed lives in ``make bench``.
"""

import logging
import subprocess
import sys

import boto3
import pytest

import receiver
from bench import calls, cold, cpu
from bench import harness as h
from bench.__main__ import main as bench_main
from bench.secretstub import SECRET, answer_secrets
from devstack.counting import CallCounter
from sume.contract.signature import SCHEME, SIGNATURE_HEADER
from sume.core.names import DUE_SHARDS
from sume.store.sizing import item_size
from tests.builders import LambdaContext as Context
from tests.builders import delivery_event, job_body


def test_counter_sees_each_call_of_the_receiver(aws):
    counter = CallCounter()
    body = job_body()
    with counter.installed():
        receiver.handler(delivery_event(body), Context())
        new = counter.take()
        receiver.handler(delivery_event(body), Context())
        duplicate = counter.take()
        forged = delivery_event(body)
        forged["headers"][SIGNATURE_HEADER] = SCHEME + "0" * 64
        assert receiver.handler(forged, Context())["statusCode"] == 401
        rejected = counter.take()
    assert new == ["dynamodb.UpdateItem", "sqs.SendMessage"]
    assert duplicate == ["dynamodb.UpdateItem", "dynamodb.UpdateItem"]
    assert rejected == []
    assert len(counter.clients) >= 2


def test_counter_leaves_botocore_as_it_found_it():
    from botocore import handlers

    before = list(handlers.BUILTIN_HANDLERS)
    with CallCounter().installed():
        assert len(handlers.BUILTIN_HANDLERS) == len(before) + 2
    assert before == handlers.BUILTIN_HANDLERS


def test_cpu_runs_every_design_and_layer_with_exactly_its_stubbed_calls(frozen_heap):
    # _run fails when a design makes a call that was not queued, leaves one
    # unused, or answers differently than expected.
    report = cpu.measure(rounds=1, batch=3)
    layered = {(name, "new") for name in cpu.LAYERS}
    assert set(report.seconds) == {(d, k) for d in cpu.CALLS for k in cpu.KINDS} | layered
    assert all(len(v) == 1 and v[0] > 0 for v in report.seconds.values())
    # Each telemetry part is what one layer adds to the one below it.
    layers = list(cpu.LAYERS)
    for below, above in cpu.TELEMETRY.values():
        assert layers.index(above) == layers.index(below) + 1


@pytest.fixture
def info_logs():
    """The bench runs at INFO, as deployed; the tests' default is WARNING."""
    from sume.core.observability import logger

    level = logger.log_level
    logger.setLevel(logging.INFO)
    yield
    logger.setLevel(level)


def test_the_log_line_off_layer_keeps_the_metrics_and_drops_only_the_log_line(
    aws, capsys, caplog, info_logs
):
    innermost = receiver.handler.__wrapped__.__wrapped__
    with cpu._log_line_off():
        innermost(delivery_event(job_body()), Context())
    quiet = (capsys.readouterr().out, [r.getMessage() for r in caplog.records])
    caplog.clear()
    # Back at the level it found.
    innermost(delivery_event(job_body()), Context())
    full = (capsys.readouterr().out, [r.getMessage() for r in caplog.records])
    assert '"NewJobs"' in quiet[0] and '"NewJobs"' in full[0]
    assert "delivery accepted" not in quiet[1]
    assert "delivery accepted" in full[1]


def test_the_secret_stub_answers_a_client_without_the_network():
    client = boto3.session.Session().client("secretsmanager")
    answer_secrets(client)
    assert client.get_secret_value(SecretId="any")["SecretString"] == SECRET


def test_cold_start_floor_and_receiver_each_read_the_secret():
    # Each variant asserts in its fresh process that its read got the stub's answer.
    env = h.lambda_runtime_env()
    for name in (cold.FLOOR, cold.RECEIVER_FIRST_USE):
        cpu_ms, wall_ms = cold._many([cold.VARIANTS[name]], env)[0]
        assert cpu_ms > 0 and wall_ms > 0


def test_a_restored_variant_runs_its_imports_before_the_clock_and_its_first_use_after():
    env = h.lambda_runtime_env()
    # What is timed finds the imports done (a snapshot's part), and reads the secret.
    done = cold.RECEIVER_IMPORTS + cold.CLOCK + "assert 'receiver' in sys.modules"
    assert cold._many([done], env)[0][0] >= 0
    for code in (cold.RESTORED_FLOOR, cold.RESTORED_RECEIVER):
        assert cold._many([code], env)[0][0] > 0
    # The receiver's after-restore hook (a reseed) runs after the snapshot, before the rest.
    seeded = "import receiver, random\nrandom.seed(1)\nfirst = random.random()\nrandom.seed(1)\n"
    assert cold._many([seeded + cold.CLOCK + "assert random.random() != first"], env)[0][0] >= 0


def bench(*args):
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_bench_runs_only_the_sections_asked_and_refuses_unknown_ones(capsys):
    # The refusal from the real process (its exit code); the choice in this one.
    unknown = bench("--only", "artifacts,bogus")
    assert unknown.returncode == 2
    assert "unknown sections ['bogus']" in unknown.stderr
    assert bench_main(["--only", "cold", "--skip", "cold"]) == 0
    nothing = capsys.readouterr().out
    assert "0 of 0 targets met" in nothing
    assert "##" not in nothing.split("## Targets")[0]


def test_the_calls_section_reads_each_row_off_what_the_function_did():
    report = calls.measure()
    rows = {(r.design, r.delivery): r for r in report.rows}
    assert rows[("ours", "new")].calls == ["dynamodb.UpdateItem", "sqs.SendMessage"]
    assert rows[("ours", "duplicate while work owed")].calls[-1] == "sqs.SendMessage"
    assert rows[("ours", "rejected: forged signature")].calls == []
    assert rows[("ours", "rejected: forged, cold container")].calls == [
        "secretsmanager.GetSecretValue"
    ]
    # The references: correct receivers, each invocation counting its own calls.
    refs = {
        (d, r.delivery): (r.result, r.calls)
        for (d, _), r in rows.items()
        if d in ("floor", "powertools")
    }
    assert refs == {
        ("floor", "new"): ("200 new", ["dynamodb.PutItem", "sqs.SendMessage"]),
        ("floor", "duplicate (retry)"): ("200 duplicate", ["dynamodb.PutItem"]),
        ("floor", "rejected: forged signature"): ("401 signature_mismatch", []),
        ("powertools", "new"): (
            "200 new",
            ["dynamodb.PutItem", "sqs.SendMessage", "dynamodb.UpdateItem"],
        ),
        ("powertools", "duplicate (retry)"): ("200 duplicate", ["dynamodb.PutItem"]),
        ("powertools", "rejected: forged signature"): ("401 signature_mismatch", []),
    }
    assert all(r.met for r in report.rows if r.target)
    assert [(r.design, r.result) for r in report.rows if r.design in ("worker", "poller")] == [
        ("worker", "processed"),
        ("worker", "processed"),
        ("worker", "skipped"),
        ("poller", f"{DUE_SHARDS} runs"),  # one shard a run, as deployed
        ("poller", "idle"),
        ("poller", "recovered 1"),
    ]
    # A round is its tick and then its runs: each run claims its shard, reads it and
    # lets it go; the one holding the due job also records it and queues it.
    assert rows[("poller", "a run, nothing due")].calls == [
        "dynamodb.PutItem",
        "dynamodb.Query",
        "dynamodb.UpdateItem",
    ]
    assert rows[("poller", "the run whose shard holds 1 job due")].calls == [
        "dynamodb.PutItem",
        "dynamodb.Query",
        "dynamodb.UpdateItem",
        "sqs.SendMessage",
        "dynamodb.UpdateItem",
    ]
    assert rows[("worker", "job.completed, 2 artifacts")].calls.count("s3.PutObject") == 2
    assert report.at_import == {
        m: {"calls": 0, "clients": 0, "connects": 0} for m in ("receiver", "worker", "poller")
    }
    assert report.job_item["job_id"]["S"].startswith("job_") and report.idempotency_record
    # The write units section 5 prices: our item and the Powertools record are under
    # 1 KB; a duplicate pays the refused write and, ours, the counter's update.
    assert item_size(report.job_item) < 1024 and item_size(report.idempotency_record) < 1024
    units = {(r.design, r.delivery): r.wru for r in report.rows if r.design != "worker"}
    assert units[("ours", "new")] == 1 and units[("ours", "duplicate (retry)")] == 2
    assert units[("powertools", "new")] == 2 and units[("powertools", "duplicate (retry)")] == 1
    assert units[("floor", "duplicate (retry)")] == 1
    assert units[("ours", "rejected: forged signature")] == 0
