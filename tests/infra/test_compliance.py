"""cdk-nag, cfn-lint, the Lambda asset, offline synth and the stage settings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.config import DEFAULTS, ConfigError, StageConfig
from infra.functions import CODE_ROOT
from tests.infra.conftest import ROOT, Cloud, Stage

# Every accepted cdk-nag finding, by construct path below the stack. A new
# finding must be fixed or added here with its reason in infra/.
ACCEPTED_FINDINGS = {
    ("Secrets/SigningSecret", "AwsSolutions-SMG4"),
    ("Secrets/SumeApiToken", "AwsSolutions-SMG4"),
    ("WebhookApi/WebhookRoute", "AwsSolutions-APIG4"),
    *((f"Functions/{fn}/Function", "AwsSolutions-L1") for fn in ("Receiver", "Worker", "Poller")),
    *(
        (f"Functions/{fn}/Role", "AwsSolutions-IAM5[Resource::*]")
        for fn in ("Receiver", "Worker", "Poller")
    ),
    *(
        (f"Functions/{fn}/Role", "AwsSolutions-IAM5[Resource::<BucketsPayloads.Arn>/events/*]")
        for fn in ("Receiver", "Worker", "Poller")
    ),
    ("Functions/Worker/Role", "AwsSolutions-IAM5[Resource::<BucketsArtifacts.Arn>/*]"),
}


def _normalized(rule: str) -> str:
    """Rule ids name logical ids; drop CDK's hash so they read like paths."""
    return re.sub(r"<(\w+?)[0-9A-F]{8}\.", r"<\1.", rule)


def test_cdk_nag_finds_nothing_unacknowledged(cloud: Cloud) -> None:
    # The synth raises on any unacknowledged finding; the report says so too.
    report = json.loads((cloud.outdir / "validation-report.json").read_text())
    (nag,) = report["pluginReports"]
    assert nag["pluginName"] == "AwsSolutions"
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []


@pytest.mark.parametrize("stage_name", ["dev", "prod"])
def test_every_acknowledged_finding_is_expected_explained_and_used(
    cloud: Cloud, stage_name: str
) -> None:
    stack = cloud.stages[stage_name].name
    report = json.loads((cloud.outdir / "validation-report.json").read_text())
    (nag,) = report["pluginReports"]
    suppressed = {}
    for violation in nag["suppressedViolations"]:
        at = violation["acknowledgedAt"]
        if at.startswith(f"{stack}/"):
            key = (at.removeprefix(f"{stack}/"), _normalized(violation["ruleName"]))
            suppressed[key] = violation["reason"]
    assert set(suppressed) == ACCEPTED_FINDINGS
    for reason in suppressed.values():
        assert len(reason) >= 60, reason
    # And nothing is acknowledged that no longer needs it.
    recorded = {
        (path.removeprefix(f"/{stack}/"), _normalized(rule.removeprefix("AwsSolutions::")))
        for path, entries in cloud.stages[stage_name].metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule in entry["data"]
    }
    assert recorded == ACCEPTED_FINDINGS


def test_cdk_nag_is_attached_to_the_app(tmp_path: Path) -> None:
    """A bucket without TLS enforcement or logs must fail our app's synth."""
    from aws_cdk import Stack
    from aws_cdk import aws_s3 as s3

    from infra.app import create_app

    app = create_app(outdir=str(tmp_path))
    s3.Bucket(Stack(app, "Careless"), "Bucket")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for r in report["pluginReports"] for v in r["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def test_cfn_lint_passes_on_both_templates(cloud: Cloud) -> None:
    """W3005 is the one accepted finding: see the README (infra, cfn-lint)."""
    findings = cloud.lint_findings()
    assert [f for f in findings if f["rule"] != "W3005"] == []
    for finding in findings:
        stage = next(
            s for s in cloud.stages.values() if finding["file"].endswith(f"/{s.name}.template.json")
        )
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
    assert {f["file"].rsplit("/", 1)[1] for f in findings} == {
        f"{s.name}.template.json" for s in cloud.stages.values()
    }


def _function_asset(stage: Stage) -> str:
    function_id, _ = stage.one("FunctionsReceiverFunction", "AWS::Lambda::Function")
    key = stage.resources[function_id]["Properties"]["Code"]["S3Key"]
    asset_hash = key.removesuffix(".zip")
    source: dict[str, Any] = stage.assets["files"][asset_hash]["source"]
    assert source["packaging"] == "zip"
    return str(source["path"])


def test_lambda_asset_is_the_functions_code_and_nothing_else(cloud: Cloud, dev: Stage) -> None:
    asset = cloud.outdir / _function_asset(dev)
    shipped = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    expected = {
        p.relative_to(CODE_ROOT).as_posix()
        for p in CODE_ROOT.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert shipped == expected
    assert {"receiver.py", "sume/__init__.py", "sume/schema.py"} <= shipped
    tops = {name.split("/")[0] for name in shipped}
    assert not tops & {"tests", "devtools", "infra", "functions", ".venv", "cdk.out"}
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
    assert protection == {"SumeWebhooks-dev": False, "SumeWebhooks-prod": True}


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


def _config(stage: str = "dev", **overrides: Any) -> StageConfig:
    return StageConfig.from_context(stage, lambda _key: None, overrides)


def test_stage_config_defaults_and_dev_stages() -> None:
    config = _config()
    assert config.throttle_rate == DEFAULTS["throttle_rate"]
    assert config.alarm_email is None
    assert config.is_dev
    assert _config("dev-alice").is_dev
    assert not _config("prod").is_dev
    assert not _config("develop").is_dev


def test_stage_config_reads_context_before_defaults() -> None:
    config = StageConfig.from_context("prod", {"poll_rate_minutes": "15"}.get, {"throttle_rate": 7})
    assert (config.poll_rate_minutes, config.throttle_rate) == (15, 7)


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
    with pytest.raises(ConfigError, match=message):
        _config(stage, **overrides)
