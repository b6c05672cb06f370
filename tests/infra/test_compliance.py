"""cdk-nag, cfn-lint, the Lambda asset, offline synth and the stage settings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.capacity import (
    REGISTRATION_PLANNED_SECONDS,
    WORKER_PLANNED_SECONDS_PER_JOB,
    default_throttle,
    planned_write_units,
    poller_runs,
    receiver_concurrency,
)
from infra.config import DEFAULTS, ConfigError, SilenceAlarms, StageConfig
from infra.context import cdk_json_context, stage_settings
from tests.infra.conftest import ROOT, Cloud, Stage
from tests.infra.synth_stages import CARELESS, CARELESS_ERROR

# Every accepted cdk-nag finding, by construct path below the stack, of both
# rule packs. A new finding must be fixed or added here with its reason in infra/.
FUNCTIONS = ("Receiver", "Worker", "Poller")
ACCEPTED_FINDINGS = {
    ("Secrets/SigningSecret", "AwsSolutions-SMG4"),
    ("Secrets/SumeApiToken", "AwsSolutions-SMG4"),
    ("WebhookApi/WebhookRoute", "AwsSolutions-APIG4"),
    ("WebhookApi/HealthRoute", "AwsSolutions-APIG4"),
    *((f"Functions/{fn}/Function", "AwsSolutions-L1") for fn in FUNCTIONS),
    *((f"Functions/{fn}/Role", "AwsSolutions-IAM5[Resource::*]") for fn in FUNCTIONS),
    *(
        (f"Functions/{fn}/Role", "AwsSolutions-IAM5[Resource::<BucketsPayloads.Arn>/events/*]")
        for fn in FUNCTIONS
    ),
    ("Functions/Worker/Role", "AwsSolutions-IAM5[Resource::<BucketsArtifacts.Arn>/*]"),
    *((f"Functions/{fn}/Function", "Serverless-LambdaLatestVersion") for fn in FUNCTIONS),
    *((f"Functions/{fn}/Function", "Serverless-LambdaDLQ") for fn in FUNCTIONS),
    *(
        (f"Functions/{fn}/Function", "Serverless-LambdaEventSourceMappingDestination")
        for fn in ("Worker", "Poller")
    ),
    ("Functions/Poller/Function", "Serverless-LambdaAsyncFailureDestination"),
    ("PollerSchedule/Rule", "Serverless-EventBusDLQ"),
    *((f"{q}/DeadLetters", "Serverless-SQSRedrivePolicy") for q in ("JobsQueue", "Registrations")),
    *(
        ("PollerSchedule/Shards", rule)
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy")
    ),
}
# Only a stage with alarm_email has the e-mail subscription.
WITH_ALARM_EMAIL = {("Monitoring/AlarmTopic", "Serverless-SNSRedrivePolicy")}
PACKS = ("AwsSolutions", "Serverless")


def _normalized(rule: str) -> str:
    """Rule ids name logical ids; drop CDK's hash so they read like paths."""
    return re.sub(r"<(\w+?)[0-9A-F]{8}\.", r"<\1.", rule)


def _reports(cloud: Cloud) -> dict[str, dict[str, Any]]:
    report = json.loads((cloud.outdir / "validation-report.json").read_text())
    return {r["pluginName"]: r for r in report["pluginReports"]}


def test_both_cdk_nag_packs_find_nothing_unacknowledged(cloud: Cloud) -> None:
    # The synth raises on any unacknowledged finding; the report says so too.
    reports = _reports(cloud)
    assert set(reports) == set(PACKS)
    for nag in reports.values():
        assert nag["conclusion"] == "success"
        assert nag["violations"] == []


@pytest.mark.parametrize("stage_name", ["dev", "prod"])
def test_every_acknowledged_finding_is_expected_explained_and_used(
    cloud: Cloud, stage_name: str
) -> None:
    stack = cloud.stages[stage_name].name
    expected = ACCEPTED_FINDINGS | (WITH_ALARM_EMAIL if stage_name == "prod" else set())
    suppressed = {}
    for pack, nag in _reports(cloud).items():
        for violation in nag.get("suppressedViolations", []):
            at = violation["acknowledgedAt"]
            assert violation["ruleName"].startswith(f"{pack}-")
            if at.startswith(f"{stack}/"):
                key = (at.removeprefix(f"{stack}/"), _normalized(violation["ruleName"]))
                suppressed[key] = violation["reason"]
    assert set(suppressed) == expected
    for reason in suppressed.values():
        assert len(reason) >= 60, reason
    # And nothing is acknowledged that no longer needs it.
    recorded = {
        (path.removeprefix(f"/{stack}/"), _normalized(rule.split("::", 1)[1]))
        for path, entries in cloud.stages[stage_name].metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule in entry["data"]
    }
    assert recorded == expected


def test_both_cdk_nag_packs_are_attached_to_the_app(cloud: Cloud) -> None:
    """A bucket without TLS or logs, a queue without a DLQ must fail our app's synth."""
    outdir = cloud.outdir / CARELESS
    assert "ValidationFailed" in (outdir / CARELESS_ERROR).read_text(encoding="utf-8")
    report = json.loads((outdir / "validation-report.json").read_text())
    rules = {v["ruleName"] for r in report["pluginReports"] for v in r["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10", "Serverless-SQSRedrivePolicy"} <= rules


def test_cfn_lint_passes_on_every_template(cloud: Cloud, cfn_lint_findings: list[Any]) -> None:
    """W3005 is the one accepted finding: see docs/operations.md (cfn-lint W3005)."""
    findings = cfn_lint_findings
    assert [f for f in findings if f["rule"] != "W3005"] == []
    for finding in findings:
        stage = cloud.templates[finding["file"]]
        # Resources/<function>/DependsOn/<n> names a role that the function's
        # Role property already reaches with GetAtt.
        section, function_id, key, position = finding["path"]
        function = stage.resources[function_id]
        assert (section, key, function["Type"]) == (
            "Resources",
            "DependsOn",
            "AWS::Lambda::Function",
        )
        role_id = function["DependsOn"][int(position)]
        assert function["Properties"]["Role"] == {"Fn::GetAtt": [role_id, "Arn"]}
    # cfn-lint really ran: it always reports CDK's redundant DependsOn.
    assert {f["file"] for f in findings} == set(cloud.templates)


def _function_asset(stage: Stage) -> str:
    function_id, _ = stage.one("FunctionsReceiverFunction", "AWS::Lambda::Function")
    key = stage.resources[function_id]["Properties"]["Code"]["S3Key"]
    asset_hash = key.removesuffix(".zip")
    source: dict[str, Any] = stage.assets["files"][asset_hash]["source"]
    assert source["packaging"] == "zip"
    return str(source["path"])


def test_lambda_asset_is_the_functions_code_and_nothing_else(cloud: Cloud, dev: Stage) -> None:
    from infra.functions.factory import CODE_ROOT

    asset = cloud.outdir / _function_asset(dev)
    shipped = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    expected = {
        p.relative_to(CODE_ROOT).as_posix()
        for p in CODE_ROOT.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert shipped == expected
    assert {"receiver.py", "sume/__init__.py", "sume/core/names.py"} <= shipped
    tops = {name.split("/")[0] for name in shipped}
    assert not tops & {
        "tests",
        "devstack",
        "bench",
        "sume_cli",
        "infra",
        "functions",
        ".venv",
        "cdk.out",
    }
    assert not any(name.endswith((".pyc", ".pyo")) for name in shipped)


def test_synth_ran_without_any_aws_credentials(cloud: Cloud) -> None:
    env = cloud.env
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"} & set(env)
    assert not Path(env["AWS_SHARED_CREDENTIALS_FILE"]).exists()
    assert (cloud.outdir / "manifest.json").exists()


def test_termination_protection_outside_dev(cloud: Cloud) -> None:
    manifest = json.loads((cloud.outdir / "manifest.json").read_text())
    protection = {
        name: artifact["properties"].get("terminationProtection", False)
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    assert protection == {
        "SumeWebhooks-dev": False,
        "SumeWebhooks-prod": True,
        "SumeWebhooks-global-us-east-1": True,
        "SumeWebhooks-global-us-east-2": True,
    }


def test_cdk_json_runs_app_py_with_the_recommended_feature_flags() -> None:
    config = json.loads((ROOT / "cdk.json").read_text())
    # The project's environment, so a bare `cdk synth` finds aws_cdk (tests/infra/test_make.py).
    assert config["app"] == ".venv/bin/python app.py"
    assert config["context"]["@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"] is True


def test_app_py_reads_context_pairs() -> None:
    import app

    assert app.cli_context(["-c", "stage=prod", "--context", "alarm_email=a@b.c"]) == {
        "stage": "prod",
        "alarm_email": "a@b.c",
    }
    with pytest.raises(SystemExit):
        app.cli_context(["-c", "stage"])


SUME_API = {"status_allowed_hosts": "api.sume.example"}


def test_only_our_own_context_keys_are_checked_and_a_typo_is_named() -> None:
    cdk_own = {
        **cdk_json_context(),
        "aws:cdk:enable-path-metadata": True,
        "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a"],
        "acknowledged-issue-numbers": [32775],
    }
    settings = stage_settings({**cdk_own, "stage": "dev", "alarm_email": "ops@example.com"})
    assert (settings.config.alarm_email, settings.plan) == ("ops@example.com", None)
    with pytest.raises(ConfigError) as refused:
        stage_settings({**cdk_own, "withness_region": "us-west-2", "alarm-email": "x"})
    assert str(refused.value) == (
        "unknown context key alarm-email (did you mean alarm_email?), withness_region "
        "(did you mean witness_region?): docs/operations.md lists them"
    )


def _config(stage: str = "dev", **overrides: Any) -> StageConfig:
    return StageConfig.from_context(stage, lambda _key: None, overrides)


def test_stage_config_defaults_and_dev_stages() -> None:
    config = _config()
    assert (config.throttle_rate, config.throttle_burst) == (50, 100)
    assert config.api_client_error_threshold == 100
    assert config.alarm_email is None
    assert config.status_allowed_hosts == ""
    assert config.silence == SilenceAlarms(
        recovered_share_percent=50,
        recovered_window_minutes=60,
        recovered_min_endings=5,
        delivery_silence_minutes=60,
    )
    assert config.is_dev
    assert _config("dev-alice").is_dev
    assert not _config("prod", **SUME_API).is_dev
    assert not _config("develop", **SUME_API).is_dev


def test_stage_config_reads_context_before_defaults() -> None:
    config = StageConfig.from_context(
        "prod",
        {"poll_rate_minutes": "15", **SUME_API}.get,
        {"throttle_rate": 70, "sume_peak_jobs_per_second": 3},
    )
    assert (config.poll_rate_minutes, config.throttle_rate, config.throttle_burst) == (15, 70, 150)


def test_the_default_throttle_is_sized_from_sumes_worst_case() -> None:
    # 10 attempts per job, each possibly twice at once, plus a quarter of headroom.
    assert default_throttle(DEFAULTS["sume_peak_jobs_per_second"]) == (50, 100)
    config = _config(sume_peak_jobs_per_second="20", lambda_concurrency_quota="2000")
    assert (config.throttle_rate, config.throttle_burst) == (500, 1000)
    # The burst stays within API Gateway's account quota, which must hold Sume's worst case.
    config = _config(
        sume_peak_jobs_per_second="200", lambda_concurrency_quota="20000", due_shards="32"
    )
    assert (config.throttle_rate, config.throttle_burst) == (5000, 5000)
    assert _config(sume_peak_jobs_per_second="1", throttle_rate="20").throttle_rate == 20
    # 10,000 requests/s of Sume's worst case: only with the account's quotas raised.
    config = _config(
        sume_peak_jobs_per_second="500",
        api_rate_quota="15000",
        api_burst_quota="10000",
        lambda_concurrency_quota="30000",
        dynamodb_table_quota="80000",
        worker_max_concurrency="1000",
        due_shards="64",
        eventbridge_put_events_quota="1000",
    )
    assert (config.throttle_rate, config.throttle_burst) == (12500, 10000)
    assert _config(api_rate_quota="45", api_burst_quota="40").throttle_rate == 45


def test_the_receiver_reserves_sumes_worst_case_at_a_cold_start_and_the_poller_is_capped() -> None:
    config = _config()
    # 40 requests/s, each busy for a restore and a delivery (0.82 s): 32.7 on
    # average, plus four standard deviations.
    assert config.receiver_reserved_concurrency == receiver_concurrency(2) == 56
    assert config.registrations_max_concurrency == 2
    # It follows the peak, not the throttle, and 0 turns the reservation off.
    assert _config(throttle_rate="60", throttle_burst="80").receiver_reserved_concurrency == 56
    assert _config(receiver_reserved_concurrency="400").receiver_reserved_concurrency == 400
    assert _config(receiver_reserved_concurrency="0").receiver_reserved_concurrency is None
    # A new account's small quota: nothing reserved, the caps still fit, the
    # poller's round in 2 runs of 8 shards (one run a shard would need 16).
    small = {
        "receiver_reserved_concurrency": "0",
        "lambda_concurrency_quota": "10",
        "worker_max_concurrency": "5",
        "registrations_max_concurrency": "2",
    }
    assert _config(**small, poller_shards_per_run="8").receiver_reserved_concurrency is None
    assert poller_runs(16, None, 8) == 2
    with pytest.raises(
        ConfigError, match=r"Lambda concurrent executions binds \(24 needed, 10 available\)"
    ):
        _config(**small)


def test_the_shard_counts_are_checked_and_size_the_round() -> None:
    config = _config()
    assert (config.due_shards, config.due_shards_previous, config.poller_shards_per_run) == (
        16,
        None,
        1,
    )
    # Runs cover what the poller reads, the larger count while one drains.
    assert (poller_runs(8, 16, 4), poller_runs(32, 16, 4), poller_runs(1, None, 1)) == (4, 8, 2)
    for key in ("due_shards", "due_shards_previous", "poller_shards_per_run"):
        for bad in ("0", "1001", "x"):
            with pytest.raises(ConfigError, match=f"context {key} must be"):
                _config(**{key: bad})


def test_a_due_index_migration_is_a_named_step() -> None:
    assert _config().due_index_migration is None
    assert _config(due_index_migration="switch").due_index_migration == "switch"
    with pytest.raises(ConfigError, match="context due_index_migration must be add or switch"):
        _config(due_index_migration="remove")


def test_the_event_sources_are_capped_for_the_estimate() -> None:
    # Instances = items a second x seconds each: 5 s a job, 0.1 s a registration, at least 2.
    assert (WORKER_PLANNED_SECONDS_PER_JOB, REGISTRATION_PLANNED_SECONDS) == (5, 0.1)
    for peak, worker, registrations in (("1", 5, 2), ("2", 10, 2), ("30", 150, 3)):
        config = _config(sume_peak_jobs_per_second=peak, receiver_reserved_concurrency="0")
        assert (config.worker_max_concurrency, config.registrations_max_concurrency) == (
            worker,
            registrations,
        )
    # Set, they are taken as they are (SQS's 2..1000).
    config = _config(worker_max_concurrency="3", registrations_max_concurrency="7")
    assert (config.worker_max_concurrency, config.registrations_max_concurrency) == (3, 7)


def test_the_jobs_table_is_warmed_only_past_what_a_new_table_serves() -> None:
    # Every admitted request writes up to 2 units, each of Sume's 10 jobs a second per
    # peak job 4 writes of up to 2 units: 2 x rate + 80 x peak.
    assert planned_write_units(2, 50) == 2 * 50 + 80 * 2 == 260
    config = _config()
    assert (config.table_warm_writes_per_second, config.table_warm_reads_per_second) == (
        None,
        None,
    )
    # 30 jobs/s plans 3,900 units, within a new table's 4,000; 50 jobs/s (1,000
    # requests/s of Sume's worst case) plans 6,500.
    wide = {"receiver_reserved_concurrency": "0", "lambda_concurrency_quota": "2000"}
    assert _config(sume_peak_jobs_per_second="30", **wide).table_warm_writes_per_second is None
    config = _config(sume_peak_jobs_per_second="50", **wide)
    assert config.table_warm_writes_per_second == planned_write_units(50, 1250) == 6500
    assert config.table_warm_reads_per_second is None
    # Set, or turned off.
    config = _config(table_warm_writes_per_second="5000", table_warm_reads_per_second="20000")
    assert (config.table_warm_writes_per_second, config.table_warm_reads_per_second) == (
        5000,
        20000,
    )
    config = _config(sume_peak_jobs_per_second="50", table_warm_writes_per_second="0", **wide)
    assert config.table_warm_writes_per_second is None


def test_a_non_dev_stage_needs_status_allowed_hosts() -> None:
    with pytest.raises(ConfigError, match=r"-c status_allowed_hosts=api\.sume\.example"):
        _config("prod")
    config = _config("prod", status_allowed_hosts=" API.sume.example, *.eu.sume.example ")
    assert config.status_allowed_hosts == "api.sume.example,*.eu.sume.example"


def test_synth_of_a_prod_stage_without_status_allowed_hosts_fails_naming_the_key(
    tmp_path: Path,
) -> None:
    from infra.app import add_stage, create_app

    # As `python app.py -c stage=prod` builds it.
    app = create_app({"stage": "prod"}, outdir=str(tmp_path))
    with pytest.raises(ConfigError, match="context status_allowed_hosts must be set"):
        add_stage(app)


@pytest.mark.parametrize(
    ("stage", "overrides", "message"),
    [
        ("Prod", {}, "stage"),
        ("prod_eu", {}, "stage"),
        ("dev", {"throttle_rate": "fast"}, "throttle_rate must be an integer"),
        ("dev", {"poll_rate_minutes": "0"}, "poll_rate_minutes must be within"),
        ("dev", {"poll_rate_minutes": "1"}, "poll_rate_minutes must cover"),
        ("dev", {"log_retention_days": "31"}, "log_retention_days must be one of"),
        ("dev", {"log_level": "LOUD"}, "log_level"),
        ("dev", {"payloads_expire_days": "30"}, "payloads_expire_days must exceed"),
        ("dev", {"alarm_email": "ops"}, "alarm_email"),
        ("dev", {"worker_max_concurrency": "1"}, "worker_max_concurrency"),
        ("dev", {"registrations_max_concurrency": "1"}, "registrations_max_concurrency"),
        (
            "dev",
            {"receiver_reserved_concurrency": "55"},
            r"receiver_reserved_concurrency \(55\) is below the 56 receivers",
        ),
        # Past the capacity: the quota that binds first and the request that lifts it.
        (
            "dev",
            {"sume_peak_jobs_per_second": "41"},
            r"^context sume_peak_jobs_per_second=41 is past what this stage takes, 40 jobs/s "
            r"\(800 requests/s at Sume's worst case\): Lambda concurrent executions binds "
            r"\(1002 needed, 1000 available\): request 1002 in Service Quotas \(aws "
            r"service-quotas request-service-quota-increase --service-code lambda --quota-code "
            r"L-B99A9384 --desired-value 1002\), then set -c lambda_concurrency_quota=1002$",
        ),
        (
            "dev",
            {"worker_max_concurrency": "950"},
            r"Lambda concurrent executions binds \(1025 needed, 1000 available\)",
        ),
        (
            "dev",
            {"sume_peak_jobs_per_second": "129", "lambda_concurrency_quota": "20000"},
            r"the due-work index's 16 shards binds \(16125 needed, 16000 available\): no quota "
            r"raises a partition's 1000 write units/s: set -c due_shards=17",
        ),
        ("dev", {"lambda_concurrency_quota": "5"}, "lambda_concurrency_quota must be within"),
        ("dev", {"throttle_rate": "39"}, r"throttle_rate \(39\) is below .* worst case of 40"),
        ("dev", {"throttle_burst": "30"}, "throttle_burst \\(30\\) is below"),
        ("dev", {"sume_peak_jobs_per_second": "0"}, "sume_peak_jobs_per_second must be within"),
        (
            "dev",
            {
                "sume_peak_jobs_per_second": "251",
                "lambda_concurrency_quota": "100000",
                "due_shards": "64",
                "worker_max_concurrency": "1000",
                "eventbridge_put_events_quota": "10000",
            },
            r"takes, 250 jobs/s .* API Gateway throttle burst rate binds \(5020 needed, 5000 "
            r"available\): request 5020 .*--service-code apigateway --quota-code L-CDF5615A ",
        ),
        (
            "dev",
            {"sume_peak_jobs_per_second": "30", "api_burst_quota": "500"},
            r"API Gateway throttle burst rate binds \(600 needed, 500 available\)",
        ),
        ("dev", {"throttle_rate": "60", "api_rate_quota": "55"}, "throttle_rate must be within"),
        (
            "dev",
            {
                "sume_peak_jobs_per_second": "201",
                "lambda_concurrency_quota": "20000",
                "due_shards": "64",
            },
            r"an SQS event source's 1000 instances \(worker_max_concurrency\) binds \(1005 "
            r"needed, 1000 available\): no quota raises it",
        ),
        (
            "dev",
            {"table_warm_writes_per_second": "3999"},
            r"table_warm_writes_per_second \(3999\) is below the 4000 units/s",
        ),
        (
            "dev",
            {"table_warm_reads_per_second": "11999"},
            r"table_warm_reads_per_second \(11999\) is below the 12000 units/s",
        ),
        (
            "dev",
            {"table_warm_reads_per_second": "40001"},
            r"table_warm_reads_per_second \(40001\) is above dynamodb_table_quota \(40000",
        ),
        (
            "dev",
            {
                "sume_peak_jobs_per_second": "200",
                "lambda_concurrency_quota": "20000",
                "dynamodb_table_quota": "20000",
                "due_shards": "64",
            },
            r"DynamoDB table-level write throughput binds \(26000 needed, 20000 available\): "
            r"request 26000 .*--quota-code L-AB614373",
        ),
        ("dev", {"api_client_error_threshold": "0"}, "api_client_error_threshold"),
        ("dev", {"poll_recovery_share_percent": "0"}, "poll_recovery_share_percent must be"),
        ("dev", {"poll_recovery_share_percent": "101"}, "poll_recovery_share_percent must be"),
        ("dev", {"poll_recovery_min_endings": "0"}, "poll_recovery_min_endings must be"),
        # A window must hold two poller runs (2 x poll_rate_minutes) and fit CloudWatch's day.
        ("dev", {"poll_recovery_window_minutes": "9"}, r"within 10\.\.1440, got 9"),
        (
            "dev",
            {"poll_rate_minutes": "30", "delivery_silence_minutes": "59"},
            r"delivery_silence_minutes must be within 60\.\.1440, got 59",
        ),
        ("dev", {"delivery_silence_minutes": "1441"}, "delivery_silence_minutes must be within"),
        # Work paused longer pages: a window of two ticks at least, a day at most.
        ("dev", {"paused_alarm_minutes": "9"}, r"paused_alarm_minutes must be within 10\.\.1440"),
        ("dev", {"paused_alarm_minutes": "1441"}, "paused_alarm_minutes must be within"),
        ("dev", {"poll_rate_minutes": "721"}, r"no window with 2 poller runs .* lower poll_rate"),
        ("dev", {"status_allowed_hosts": "https://api.sume.example"}, "status_allowed_hosts"),
        ("dev", {"artifact_allowed_hosts": "cdn.example/x"}, "artifact_allowed_hosts"),
        ("dev", {"status_allowed_hosts": "bücher.example"}, "IDNA"),
        (
            "dev",
            {"worker_batch_size": "50", "worker_batching_window_seconds": "0"},
            "batching_window",
        ),
    ],
)
def test_stage_config_rejects_what_cannot_deploy(
    stage: str, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        _config(stage, **overrides)
    # One line that names the key: the synth's last line.
    assert "\n" not in str(refused.value)
