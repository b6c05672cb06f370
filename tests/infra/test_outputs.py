"""The stack's name and the outputs the ops CLI finds a stage's resources by."""

from __future__ import annotations

import subprocess
import sys

from infra import spec
from sume.core.names import REGISTRATION_DETAIL_TYPE
from tests.infra.conftest import ROOT, Cloud, Stage, ref_name


def test_stack_names_come_from_the_stage(dev: Stage, prod: Stage) -> None:
    assert dev.name == "SumeWebhooks-dev" == spec.stack_name("dev")
    assert prod.name == spec.stack_name("prod")


def test_outputs_have_the_stable_names_the_ops_cli_reads(dev: Stage, prod: Stage) -> None:
    expected = {
        spec.OUTPUT_WEBHOOK_URL,
        *spec.OUTPUTS.values(),
        spec.OUTPUT_ALARM_TOPIC,
        spec.OUTPUT_DASHBOARD,
        spec.OUTPUT_REGISTRATION_DETAIL_TYPE,
        spec.OUTPUT_REGISTRATION_POLICY,
        spec.OUTPUT_SCHEMA_REGISTRY,
        spec.OUTPUT_CAPACITY,
        spec.OUTPUT_CAPACITY_BOUND_BY,
    }
    for stage in (dev, prod):
        outputs = stage.template["Outputs"]
        assert set(outputs) == expected
        assert ref_name(outputs[spec.OUTPUTS["table"]]["Value"]) == "JobsTable"
        assert ref_name(outputs[spec.OUTPUTS["queue_url"]]["Value"]) == "JobsQueue"
        assert ref_name(outputs[spec.OUTPUTS["dlq_url"]]["Value"]) == "JobsQueueDeadLetters"
        assert ref_name(outputs[spec.OUTPUTS["artifacts_bucket"]]["Value"]) == "BucketsArtifacts"
        assert ref_name(outputs[spec.OUTPUTS["payloads_bucket"]]["Value"]) == "BucketsPayloads"
        assert ref_name(outputs[spec.OUTPUTS["event_bus"]]["Value"]) == "AnnouncementsBus"
        signing = outputs[spec.OUTPUTS["signing_secret_arn"]]["Value"]
        assert ref_name(signing) == "SecretsSigningSecret"
        token = outputs[spec.OUTPUTS["api_token_secret_arn"]]["Value"]
        assert ref_name(token) == "SecretsSumeApiToken"
        assert ref_name(outputs[spec.OUTPUT_WEBHOOK_URL]["Value"]) == "WebhookApi/webhooks/sume"
        registrations = outputs[spec.OUTPUTS["registrations_queue_url"]]["Value"]
        assert ref_name(registrations) == "RegistrationsQueue"
        registrations_dlq = outputs[spec.OUTPUTS["registrations_dlq_url"]]["Value"]
        assert ref_name(registrations_dlq) == "RegistrationsDeadLetters"
        shards = outputs[spec.OUTPUTS["shards_queue_url"]]["Value"]
        assert ref_name(shards) == "PollerScheduleShards"
        assert ref_name(outputs[spec.OUTPUTS["leases_table"]]["Value"]) == "PollerScheduleLeases"
        detail_type = outputs[spec.OUTPUT_REGISTRATION_DETAIL_TYPE]["Value"]
        assert detail_type == REGISTRATION_DETAIL_TYPE
        policy = outputs[spec.OUTPUT_REGISTRATION_POLICY]["Value"]
        assert ref_name(policy) == "RegistrationsPutPolicy"
        registry = outputs[spec.OUTPUT_SCHEMA_REGISTRY]["Value"]
        assert ref_name(registry) == "SchemasRegistry"


def test_each_stage_says_what_it_takes_and_what_binds_first(dev: Stage, prod: Stage) -> None:
    """A default account's dev stage: Lambda's quota binds first; the prod stage's own
    throttle rate (25 requests/s: Sume's worst case at 2 jobs/s is 40) before any quota."""
    said = {
        stage.name: (
            stage.template["Outputs"][spec.OUTPUT_CAPACITY]["Value"],
            stage.template["Outputs"][spec.OUTPUT_CAPACITY_BOUND_BY]["Value"],
        )
        for stage in (dev, prod)
    }
    assert said == {
        dev.name: ("40", "Lambda concurrent executions (1000)"),
        prod.name: ("1", "throttle_rate (25)"),
    }
    description = dev.template["Outputs"][spec.OUTPUT_CAPACITY]["Description"]
    assert description == "Sume jobs/s this stage takes at the worst case (800 requests/s)"


def test_the_regions_say_the_stage_s_capacity_with_the_region_that_binds(cloud: Cloud) -> None:
    said = {
        (
            stage.template["Outputs"][spec.OUTPUT_CAPACITY]["Value"],
            stage.template["Outputs"][spec.OUTPUT_CAPACITY_BOUND_BY]["Value"],
        )
        for stage in cloud.regional.values()
    }
    assert said == {("40", "Lambda concurrent executions (1000) in us-east-1")}


def test_make_synth_prints_what_each_stack_takes(cloud: Cloud) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "infra.assembly", str(cloud.outdir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert lines[0].startswith("template: ")
    assert (
        "capacity: SumeWebhooks-dev takes 40 Sume jobs/s at the worst case (800 requests/s); "
        "binds first: Lambda concurrent executions (1000)"
    ) in lines
    assert len([line for line in lines if line.startswith("capacity: ")]) == len(cloud.templates)
