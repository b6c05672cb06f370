"""Template assertions on the synthesized dev and prod stages."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra import spec
from infra.functions import POWERTOOLS_LAYER_PARAMETER, POWERTOOLS_VERSION
from sume.names import (
    DUE_AT,
    DUE_INDEX,
    DUE_SHARD,
    EVENT_SOURCE,
    JOB_ID,
    METRICS_NAMESPACE,
    REGISTRATION_DETAIL_TYPE,
    SERVICE_NAME,
    TTL_ATTRIBUTE,
    WEBHOOK_ROUTE_KEY,
)
from sume.settings import (
    PollerSettings,
    ReceiverSettings,
    RegistrationSettings,
    WorkerSettings,
)
from tests.infra.conftest import ROOT, Stage, base_name
from tests.infra.synth_stages import PROD_OVERRIDES

FUNCTIONS = {
    "Receiver": ("receiver.handler", spec.RECEIVER_TIMEOUT),
    "Worker": ("worker.handler", spec.WORKER_TIMEOUT),
    "Poller": ("poller.handler", spec.POLLER_TIMEOUT),
}


def template(stage: Stage) -> Template:
    return Template.from_json(stage.template)


def function(stage: Stage, name: str) -> dict[str, Any]:
    return stage.one(f"Functions{name}Function", "AWS::Lambda::Function")[1]["Properties"]


def ref_name(value: Any) -> str:
    """A CloudFormation reference as ``<base logical id><suffix>``, ``*`` for a wildcard."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return base_name(value["Ref"])
    if "Fn::GetAtt" in value:
        return base_name(value["Fn::GetAtt"][0])
    if "Fn::Join" in value:
        return "".join(ref_name(part) for part in value["Fn::Join"][1])
    raise AssertionError(f"unexpected reference {value}")


def permissions(stage: Stage, name: str) -> dict[str, set[str]]:
    """resource -> actions, across every policy attached to the function's role."""
    role_id, role = stage.one(f"Functions{name}Role", "AWS::IAM::Role")
    assert "ManagedPolicyArns" not in role["Properties"]
    assert "Policies" not in role["Properties"]
    granted: dict[str, set[str]] = {}
    for policy in stage.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            assert "Condition" not in statement
            actions = statement["Action"]
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                granted.setdefault(ref_name(resource), set()).update(
                    [actions] if isinstance(actions, str) else actions
                )
    return granted


# -- stack, stages, outputs ------------------------------------------------


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
        detail_type = outputs[spec.OUTPUT_REGISTRATION_DETAIL_TYPE]["Value"]
        assert detail_type == REGISTRATION_DETAIL_TYPE
        policy = outputs[spec.OUTPUT_REGISTRATION_POLICY]["Value"]
        assert ref_name(policy) == "RegistrationsPutPolicy"
        registry = outputs[spec.OUTPUT_SCHEMA_REGISTRY]["Value"]
        assert ref_name(registry) == "SchemasRegistry"


# -- HTTP API ------------------------------------------------------------------


def test_one_post_route_to_the_receiver_with_payload_2(dev: Stage) -> None:
    t = template(dev)
    t.resource_count_is("AWS::ApiGatewayV2::Api", 1)
    t.resource_count_is("AWS::ApiGatewayV2::Route", 1)
    t.has_resource_properties(
        "AWS::ApiGatewayV2::Api", {"ProtocolType": "HTTP", "Name": Match.any_value()}
    )
    t.has_resource_properties("AWS::ApiGatewayV2::Route", {"RouteKey": WEBHOOK_ROUTE_KEY})
    (integration,) = dev.of_type("AWS::ApiGatewayV2::Integration").values()
    props = integration["Properties"]
    assert props["IntegrationType"] == "AWS_PROXY"
    assert props["PayloadFormatVersion"] == "2.0"
    assert ref_name(props["IntegrationUri"]) == "FunctionsReceiverFunction"
    # API Gateway waits just past the receiver's own timeout, inside Sume's 10 s.
    assert spec.RECEIVER_TIMEOUT * 1000 < props["TimeoutInMillis"] < 10_000
    # Only this route may invoke the receiver.
    (permission,) = [
        p
        for p in dev.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    source_arn = permission["Properties"]["SourceArn"]["Fn::Join"][1]
    assert source_arn[-1].endswith("/POST/webhooks/sume") or source_arn[-1].endswith(
        "/webhooks/sume"
    )


def test_stage_throttling_comes_from_context(dev: Stage, prod: Stage) -> None:
    for stage, rate, burst in ((dev, 50, 100), (prod, 25, 40)):
        template(stage).has_resource_properties(
            "AWS::ApiGatewayV2::Stage",
            {
                "StageName": "$default",
                "AutoDeploy": True,
                "DefaultRouteSettings": {
                    "ThrottlingRateLimit": rate,
                    "ThrottlingBurstLimit": burst,
                },
            },
        )
    assert int(PROD_OVERRIDES["throttle_rate"]) == 25


def test_access_logs_are_json_and_never_carry_headers(dev: Stage) -> None:
    (stage,) = dev.of_type("AWS::ApiGatewayV2::Stage").values()
    settings = stage["Properties"]["AccessLogSettings"]
    assert ref_name(settings["DestinationArn"]) == "WebhookApiAccessLogs"
    fields = json.loads(settings["Format"])
    assert {"requestId", "status", "routeKey", "integrationError"} <= set(fields)
    assert not any("header" in value.lower() for value in fields.values())
    _, group = dev.one("WebhookApiAccessLogs", "AWS::Logs::LogGroup")
    assert group["Properties"]["RetentionInDays"] == 30


# -- functions -------------------------------------------------------------------


def test_three_functions_share_runtime_architecture_layer_and_tracing(dev: Stage) -> None:
    layer_param = next(
        key
        for key, p in dev.template["Parameters"].items()
        if p.get("Default") == POWERTOOLS_LAYER_PARAMETER
    )
    assert dev.template["Parameters"][layer_param]["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert (
        f"/aws/service/powertools/python/arm64/python3.13/{POWERTOOLS_VERSION}"
    ) == POWERTOOLS_LAYER_PARAMETER
    code = {json.dumps(function(dev, name)["Code"]) for name in FUNCTIONS}
    assert len(code) == 1, "the three functions must run the one functions/ asset"
    for name, (handler, timeout) in FUNCTIONS.items():
        props = function(dev, name)
        assert props["Handler"] == handler
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["Layers"] == [{"Ref": layer_param}]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["Timeout"] == timeout
        logging = props["LoggingConfig"]
        assert logging["LogFormat"] == "JSON"
        assert logging["ApplicationLogLevel"] == "INFO"
        assert ref_name(logging["LogGroup"]) == f"Functions{name}Logs"
        _, group = dev.one(f"Functions{name}Logs", "AWS::Logs::LogGroup")
        assert group["Properties"]["RetentionInDays"] == 30
        env = props["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == SERVICE_NAME
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == METRICS_NAMESPACE
        assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"
        assert env["POWERTOOLS_LOGGER_LOG_EVENT"] == "false"


def test_receiver_answers_well_inside_sumes_ten_seconds(dev: Stage) -> None:
    assert function(dev, "Receiver")["Timeout"] <= 8


def test_powertools_layer_is_the_version_pinned_in_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [d for d in project["project"]["dependencies"] if d.startswith("aws-lambda-powertools")]
    assert pins == [f"aws-lambda-powertools[tracer]=={POWERTOOLS_VERSION}"]


def _env(stage: Stage, name: str) -> dict[str, str]:
    """The function's environment with deploy-time references as plain strings."""
    variables = function(stage, name)["Environment"]["Variables"]
    return {k: v if isinstance(v, str) else f"resolved-{ref_name(v)}" for k, v in variables.items()}


def test_each_function_environment_satisfies_its_settings(dev: Stage, prod: Stage) -> None:
    receiver = ReceiverSettings.from_env(_env(dev, "Receiver"))
    assert receiver.table.jobs_table_name == "resolved-JobsTable"
    assert receiver.table.jobs_queue_url == "resolved-JobsQueue"
    assert receiver.signing_secret_arn == "resolved-SecretsSigningSecret"
    assert receiver.signing_secret_value is None
    assert receiver.payloads_bucket_name == "resolved-BucketsPayloads"

    worker = WorkerSettings.from_env(_env(prod, "Worker"))
    assert worker.artifacts_bucket_name == "resolved-BucketsArtifacts"
    assert worker.payloads_bucket_name == "resolved-BucketsPayloads"
    assert worker.event_bus_name == "resolved-AnnouncementsBus"
    assert worker.retention_days == 60
    assert worker.url_policy.allowed_hosts == ("cdn.sume.example",)

    poller = PollerSettings.from_env(_env(prod, "Poller"))
    assert poller.api_token_arn == "resolved-SecretsSumeApiToken"
    assert poller.api_token_value is None
    assert poller.payloads_bucket_name == "resolved-BucketsPayloads"
    assert poller.url_policy.allowed_hosts == ("api.sume.example",)
    assert "ARTIFACT_ALLOWED_HOSTS" not in _env(dev, "Worker")

    registration = RegistrationSettings.from_env(_env(prod, "Poller"))
    assert registration.dead_letter_queue_url == "resolved-RegistrationsDeadLetters"
    assert registration.registry.status_allowed_hosts == ("api.sume.example",)


# -- least privilege ---------------------------------------------------------------

LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
XRAY = {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}
SEND = {"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"}
SECRET = {"secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"}
CONSUME = {
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "Receiver",
            {
                "FunctionsReceiverLogs": LOGS,
                "*": XRAY,
                "JobsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
                "JobsQueue": SEND,
                "BucketsPayloads/events/*": {"s3:PutObject"},
                "SecretsSigningSecret": SECRET,
            },
        ),
        (
            "Worker",
            {
                "FunctionsWorkerLogs": LOGS,
                "*": XRAY,
                "JobsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
                "JobsQueue": CONSUME,
                "BucketsPayloads/events/*": {"s3:GetObject"},
                "BucketsArtifacts/*": {"s3:PutObject", "s3:AbortMultipartUpload"},
                "AnnouncementsBus": {"events:PutEvents"},
            },
        ),
        (
            "Poller",
            {
                "FunctionsPollerLogs": LOGS,
                "*": XRAY,
                "JobsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
                f"JobsTable/index/{DUE_INDEX}": {"dynamodb:Query"},
                "JobsQueue": SEND,
                "BucketsPayloads/events/*": {"s3:PutObject"},
                "SecretsSumeApiToken": SECRET,
                "RegistrationsQueue": CONSUME,
                "RegistrationsDeadLetters": SEND,
            },
        ),
    ],
)
def test_each_function_may_do_only_what_its_code_does(
    dev: Stage, name: str, expected: dict[str, set[str]]
) -> None:
    assert permissions(dev, name) == expected


def test_payload_keys_granted_are_the_ones_the_payload_store_writes() -> None:
    from sume.payloads import PayloadStore

    class Recorder:
        key = ""

        def put_object(self, **kwargs: Any) -> None:
            self.key = kwargs["Key"]

    recorder = Recorder()
    PayloadStore(lambda: recorder, "bucket").put("job/1", "{}")
    assert recorder.key.startswith("events/")


# -- DynamoDB ----------------------------------------------------------------------


def test_jobs_table_on_demand_pitr_ttl_and_the_sparse_index(dev: Stage) -> None:
    template(dev).has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": JOB_ID, "KeyType": "HASH"}],
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": TTL_ATTRIBUTE, "Enabled": True},
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": DUE_INDEX,
                    "KeySchema": [
                        {"AttributeName": DUE_SHARD, "KeyType": "HASH"},
                        {"AttributeName": DUE_AT, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        },
    )
    _, table = dev.one("JobsTable", "AWS::DynamoDB::Table")
    types = {
        a["AttributeName"]: a["AttributeType"] for a in table["Properties"]["AttributeDefinitions"]
    }
    assert types == {JOB_ID: "S", DUE_SHARD: "N", DUE_AT: "N"}
    # Exactly what the local stack creates on moto.
    moto = spec.table_definition("x")
    assert table["Properties"]["KeySchema"] == moto["KeySchema"]
    assert table["Properties"]["GlobalSecondaryIndexes"] == moto["GlobalSecondaryIndexes"]


def test_data_is_retained_and_protected_outside_dev(dev: Stage, prod: Stage) -> None:
    _, prod_table = prod.one("JobsTable", "AWS::DynamoDB::Table")
    assert prod_table["DeletionPolicy"] == prod_table["UpdateReplacePolicy"] == "Retain"
    assert prod_table["Properties"]["DeletionProtectionEnabled"] is True
    _, dev_table = dev.one("JobsTable", "AWS::DynamoDB::Table")
    assert dev_table["DeletionPolicy"] == "Delete"
    assert dev_table["Properties"].get("DeletionProtectionEnabled") is False
    for kind in ("AWS::S3::Bucket", "AWS::SecretsManager::Secret", "AWS::SQS::Queue"):
        assert {r["DeletionPolicy"] for r in prod.of_type(kind).values()} == {"Retain"}
        assert {r["DeletionPolicy"] for r in dev.of_type(kind).values()} == {"Delete"}
    # Emptying buckets on delete exists only where deleting is the point.
    assert len(dev.of_type("Custom::S3AutoDeleteObjects")) == 3
    assert not prod.of_type("Custom::S3AutoDeleteObjects")


# -- SQS ---------------------------------------------------------------------------


def test_queue_visibility_redrive_encryption_and_tls(dev: Stage) -> None:
    _, queue = dev.one("JobsQueue", "AWS::SQS::Queue")
    _, dlq = dev.one("JobsQueueDeadLetters", "AWS::SQS::Queue")
    props = queue["Properties"]
    assert props["VisibilityTimeout"] >= 6 * function(dev, "Worker")["Timeout"]
    assert props["VisibilityTimeout"] == spec.QUEUE_VISIBILITY_TIMEOUT
    redrive = props["RedrivePolicy"]
    assert redrive["maxReceiveCount"] == spec.MAX_RECEIVES
    assert ref_name(redrive["deadLetterTargetArn"]) == "JobsQueueDeadLetters"
    assert dlq["Properties"]["MessageRetentionPeriod"] == spec.DLQ_RETENTION_SECONDS
    for q in (props, dlq["Properties"]):
        assert q["SqsManagedSseEnabled"] is True
    for policy in dev.of_type("AWS::SQS::QueuePolicy").values():
        deny = policy["Properties"]["PolicyDocument"]["Statement"][0]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def event_source(stage: Stage, queue: str) -> dict[str, Any]:
    (mapping,) = [
        m["Properties"]
        for m in stage.of_type("AWS::Lambda::EventSourceMapping").values()
        if ref_name(m["Properties"]["EventSourceArn"]) == queue
    ]
    return mapping


def test_worker_event_source_reports_item_failures_with_window_and_cap(
    dev: Stage, prod: Stage
) -> None:
    for stage, batch, window, cap in ((dev, 10, 5, 10), (prod, 5, 2, 4)):
        props = event_source(stage, "JobsQueue")
        assert ref_name(props["EventSourceArn"]) == "JobsQueue"
        assert ref_name(props["FunctionName"]) == "FunctionsWorkerFunction"
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["BatchSize"] == batch
        assert props["MaximumBatchingWindowInSeconds"] == window
        assert props["ScalingConfig"] == {"MaximumConcurrency": cap}


# -- EventBridge -------------------------------------------------------------------


def test_poller_runs_on_a_configurable_schedule(dev: Stage, prod: Stage) -> None:
    for stage, rate in ((dev, "rate(5 minutes)"), (prod, "rate(10 minutes)")):
        props = stage.one("PollerScheduleRule", "AWS::Events::Rule")[1]["Properties"]
        assert props["ScheduleExpression"] == rate
        assert props["State"] == "ENABLED"
        (target,) = props["Targets"]
        assert ref_name(target["Arn"]) == "FunctionsPollerFunction"
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    (invoke,) = dev.of_type("AWS::Lambda::EventInvokeConfig").values()
    assert invoke["Properties"]["MaximumRetryAttempts"] == 0


def test_announcements_go_to_a_custom_bus(dev: Stage) -> None:
    _, bus = dev.one("AnnouncementsBus", "AWS::Events::EventBus")
    assert bus["Properties"]["Name"] == "SumeWebhooks-dev-jobs"
    assert EVENT_SOURCE == "sume.webhooks"


# -- registration by event -------------------------------------------------------


def test_a_rule_on_the_bus_queues_registration_events_with_a_dlq(dev: Stage) -> None:
    props = dev.one("RegistrationsRule", "AWS::Events::Rule")[1]["Properties"]
    assert ref_name(props["EventBusName"]) == "AnnouncementsBus"
    assert props["EventPattern"] == {"detail-type": [REGISTRATION_DETAIL_TYPE]}
    assert props["EventPattern"] == spec.REGISTRATION_PATTERN
    (target,) = props["Targets"]
    assert ref_name(target["Arn"]) == "RegistrationsQueue"
    # What EventBridge cannot deliver lands where refused events do.
    assert ref_name(target["DeadLetterConfig"]["Arn"]) == "RegistrationsDeadLetters"

    queue = dev.one("RegistrationsQueue", "AWS::SQS::Queue")[1]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * function(dev, "Poller")["Timeout"]
    redrive = queue["RedrivePolicy"]
    assert ref_name(redrive["deadLetterTargetArn"]) == "RegistrationsDeadLetters"
    assert redrive["maxReceiveCount"] == spec.MAX_RECEIVES
    dlq = dev.one("RegistrationsDeadLetters", "AWS::SQS::Queue")[1]["Properties"]
    assert dlq["MessageRetentionPeriod"] == spec.DLQ_RETENTION_SECONDS
    for q in (queue, dlq):
        assert q["SqsManagedSseEnabled"] is True
    for name in ("RegistrationsQueuePolicy", "RegistrationsDeadLettersPolicy"):
        statements = dev.one(name, "AWS::SQS::QueuePolicy")[1]["Properties"]["PolicyDocument"]
        (allow,) = [s for s in statements["Statement"] if s["Effect"] == "Allow"]
        assert allow["Principal"] == {"Service": "events.amazonaws.com"}
        assert "sqs:SendMessage" in allow["Action"]
        assert ref_name(allow["Condition"]["ArnEquals"]["aws:SourceArn"]) == "RegistrationsRule"


def test_the_poller_takes_registrations_from_their_queue(dev: Stage) -> None:
    props = event_source(dev, "RegistrationsQueue")
    assert ref_name(props["FunctionName"]) == "FunctionsPollerFunction"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == 10


def test_putting_registration_events_is_a_managed_policy_and_nothing_more(
    dev: Stage, prod: Stage
) -> None:
    for stage in (dev, prod):
        _, policy = stage.one("RegistrationsPutPolicy", "AWS::IAM::ManagedPolicy")
        props = policy["Properties"]
        assert props["ManagedPolicyName"] == f"{stage.name}-register-jobs"
        (statement,) = props["PolicyDocument"]["Statement"]
        assert (statement["Effect"], statement["Action"]) == ("Allow", "events:PutEvents")
        assert ref_name(statement["Resource"]) == "AnnouncementsBus"
        assert statement["Condition"] == {
            "StringEquals": {"events:detail-type": REGISTRATION_DETAIL_TYPE}
        }
        # Attached by the applications that register jobs, by no role here.
        assert not {"Roles", "Users", "Groups"} & set(props)


def test_every_registration_that_did_not_register_is_alarmed(dev: Stage) -> None:
    alarms = _alarms(dev)
    rejected = alarms["RegistrationsRejected"]
    assert (rejected["Namespace"], rejected["MetricName"]) == (
        METRICS_NAMESPACE,
        "RegistrationsRejected",
    )
    assert rejected["Dimensions"] == [{"Name": "service", "Value": SERVICE_NAME}]
    dlq = alarms["RegistrationDlqNotEmpty"]
    assert (dlq["Namespace"], dlq["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert ref_name(dlq["Dimensions"][0]["Value"]) == "RegistrationsDeadLetters"
    for props in (rejected, dlq):
        assert (props["Threshold"], props["ComparisonOperator"]) == (
            1,
            "GreaterThanOrEqualToThreshold",
        )
        assert [ref_name(a) for a in props["AlarmActions"]] == ["MonitoringAlarmTopic"]


# -- event schemas -----------------------------------------------------------------


def test_the_schema_registry_holds_the_committed_schemas_as_they_are(dev: Stage) -> None:
    _, registry = dev.one("SchemasRegistry", "AWS::EventSchemas::Registry")
    assert registry["Properties"]["RegistryName"] == "SumeWebhooks-dev-events"
    published = {
        r["Properties"]["SchemaName"]: r["Properties"]
        for r in dev.of_type("AWS::EventSchemas::Schema").values()
    }
    files = {p.name: json.loads(p.read_text()) for p in spec.SCHEMAS_DIR.glob("*.json")}
    names = {
        f"{EVENT_SOURCE}@SumeJobCompleted",
        f"{EVENT_SOURCE}@SumeJobFailed",
        f"{EVENT_SOURCE}@SumeJobCanceled",
        f"{EVENT_SOURCE}@SumeJobProcessingError",
        "SumeJobSubmitted",
    }
    assert set(published) == names
    assert len(files) == len(names)
    for props in published.values():
        assert props["Type"] == "JSONSchemaDraft4"
        assert ref_name(props["RegistryName"]) == "SchemasRegistry"
        content = json.loads(props["Content"])
        assert content == files[f"{content['title']}.json"]


# -- S3 ----------------------------------------------------------------------------


def test_buckets_are_private_encrypted_tls_only_and_expire_data(dev: Stage, prod: Stage) -> None:
    for stage in (dev, prod):
        buckets = stage.of_type("AWS::S3::Bucket")
        assert {base_name(k) for k in buckets} == {
            "BucketsArtifacts",
            "BucketsPayloads",
            "BucketsAccessLogs",
        }
        for bucket in buckets.values():
            props = bucket["Properties"]
            assert props["PublicAccessBlockConfiguration"] == {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }
            (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
            assert props["LifecycleConfiguration"]["Rules"]
        for policy in stage.of_type("AWS::S3::BucketPolicy").values():
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            assert any(
                s["Effect"] == "Deny"
                and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
                for s in statements
            )
    _, payloads = prod.one("BucketsPayloads", "AWS::S3::Bucket")
    (rule,) = payloads["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 120
    for base in ("BucketsArtifacts", "BucketsPayloads"):
        _, bucket = dev.one(base, "AWS::S3::Bucket")
        logging = bucket["Properties"]["LoggingConfiguration"]
        assert ref_name(logging["DestinationBucketName"]) == "BucketsAccessLogs"


# -- secrets -----------------------------------------------------------------------


def test_secrets_start_random_never_empty(dev: Stage) -> None:
    for base in ("SecretsSigningSecret", "SecretsSumeApiToken"):
        _, secret = dev.one(base, "AWS::SecretsManager::Secret")
        props = secret["Properties"]
        assert "SecretString" not in props
        assert props["GenerateSecretString"]["PasswordLength"] >= 32


# -- alarms and dashboard --------------------------------------------------------


def _alarms(stage: Stage) -> dict[str, dict[str, Any]]:
    return {
        base_name(k)[len("Monitoring") :]: r["Properties"]
        for k, r in stage.of_type("AWS::CloudWatch::Alarm").items()
    }


def test_alarms_cover_every_failure_and_notify_the_topic(dev: Stage, prod: Stage) -> None:
    alarms = _alarms(dev)
    custom = {
        "StorageErrors": "StorageErrors",
        "SignatureRejectionSpike": "SignatureRejections",
        "JobsLost": "JobsLost",
        "ProcessingErrors": "ProcessingErrors",
        "ReceiverConfigurationErrors": "ConfigurationErrors",
        "StatusUrlRefused": "StatusUrlRefused",
    }
    for alarm_id, metric in custom.items():
        props = alarms[alarm_id]
        assert props["Namespace"] == METRICS_NAMESPACE
        assert props["MetricName"] == metric
        assert props["Dimensions"] == [{"Name": "service", "Value": SERVICE_NAME}]
        assert props["Statistic"] == "Sum"
    for fn in ("Receiver", "Worker", "Poller"):
        props = alarms[f"{fn}Errors"]
        assert (props["Namespace"], props["MetricName"]) == ("AWS/Lambda", "Errors")
        (dimension,) = props["Dimensions"]
        assert ref_name(dimension["Value"]) == f"Functions{fn}Function"
    dlq = alarms["DlqNotEmpty"]
    assert (dlq["Namespace"], dlq["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert ref_name(dlq["Dimensions"][0]["Value"]) == "JobsQueueDeadLetters"
    assert (dlq["Threshold"], dlq["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    api = alarms["ApiServerErrors"]
    assert (api["Namespace"], api["MetricName"]) == ("AWS/ApiGateway", "5xx")
    assert ref_name(api["Dimensions"][0]["Value"]) == "WebhookApi"
    assert alarms["JobsLost"]["Threshold"] == 1
    assert alarms["SignatureRejectionSpike"]["Threshold"] == 20
    assert _alarms(prod)["SignatureRejectionSpike"]["Threshold"] == 7
    assert alarms["ReceiverConfigurationErrors"]["Threshold"] == 1
    for props in alarms.values():
        assert [ref_name(a) for a in props["AlarmActions"]] == ["MonitoringAlarmTopic"]
        assert props["TreatMissingData"] == "notBreaching"
        assert props["AlarmDescription"]


def test_an_alarm_fires_on_a_spike_of_4xx_throttles_included(dev: Stage, prod: Stage) -> None:
    for stage, threshold in ((dev, 100), (prod, 30)):
        spike = _alarms(stage)["ApiClientErrorSpike"]
        # HTTP APIs publish "4xx" (429 included), per API and per stage.
        assert (spike["Namespace"], spike["MetricName"], spike["Statistic"]) == (
            "AWS/ApiGateway",
            "4xx",
            "Sum",
        )
        dimensions = {d["Name"]: d["Value"] for d in spike["Dimensions"]}
        assert set(dimensions) == {"ApiId", "Stage"}
        assert ref_name(dimensions["ApiId"]) == "WebhookApi"
        assert dimensions["Stage"] == "$default"
        assert (spike["Threshold"], spike["Period"]) == (threshold, 300)


def test_a_poll_configuration_error_is_alarmed(dev: Stage) -> None:
    props = _alarms(dev)["PollerConfigurationErrors"]
    assert (props["Namespace"], props["MetricName"]) == (
        METRICS_NAMESPACE,
        "PollerConfigurationErrors",
    )
    assert props["Dimensions"] == [{"Name": "service", "Value": SERVICE_NAME}]
    assert (props["Statistic"], props["Threshold"]) == ("Sum", 1)
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert [ref_name(a) for a in props["AlarmActions"]] == ["MonitoringAlarmTopic"]


def test_alarm_topic_is_encrypted_and_email_is_optional(dev: Stage, prod: Stage) -> None:
    for stage in (dev, prod):
        _, topic = stage.one("MonitoringAlarmTopic", "AWS::SNS::Topic")
        assert ref_name(topic["Properties"]["KmsMasterKeyId"]) == "MonitoringTopicKey"
        _, key = stage.one("MonitoringTopicKey", "AWS::KMS::Key")
        assert key["Properties"]["EnableKeyRotation"] is True
        statements = key["Properties"]["KeyPolicy"]["Statement"]
        assert any(s["Principal"] == {"Service": "cloudwatch.amazonaws.com"} for s in statements)
    assert not dev.of_type("AWS::SNS::Subscription")
    template(prod).has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )


def test_dashboard_shows_the_key_metrics(dev: Stage) -> None:
    _, dashboard = dev.one("MonitoringDashboard", "AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "SumeWebhooks-dev"
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "Deliveries",
        "NewJobs",
        "Duplicates",
        "SignatureRejections",
        "StorageErrors",
        "ConfigurationErrors",
        "ProcessingErrors",
        "StatusUrlRefused",
        "JobsLost",
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "5xx",
        "Duration",
        "Throttles",
        "JobsRegistered",
        "RegistrationsRejected",
    ):
        assert f'\\"{metric}\\"' in body, metric
