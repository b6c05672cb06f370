"""The opt-in multi-region deployment (infra/regions.py): two regional stacks of one
stage around an MRSC global table, one webhook URL that fails over; and the
single-region deployment exactly as it was."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import spec
from infra.config import ConfigError
from infra.region_plan import RegionPlan
from sume.core.names import Env, Metric
from tests.infra.conftest import Cloud, Stage, base_name, ref_name
from tests.infra.metric_math import fires
from tests.infra.synth_stages import GLOBAL_OVERRIDES, GLOBAL_STAGE
from tests.infra.template_digest import DIGESTS, digests

TABLE = spec.global_table_name(GLOBAL_STAGE)
PRIMARY, SECONDARY = "us-east-1", "us-east-2"


def test_the_single_region_templates_are_what_they_were(cloud: Cloud) -> None:
    # Written before the option existed (python -m tests.infra.template_digest).
    assert digests(cloud.outdir, ("dev", "prod")) == json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_single_region_stack_has_nothing_of_the_option(cloud: Cloud, stage: str) -> None:
    types = {r["Type"] for r in cloud.stages[stage].resources.values()}
    assert "AWS::DynamoDB::Table" in types
    assert not types & {
        "AWS::DynamoDB::GlobalTable",
        "AWS::Route53::HealthCheck",
        "AWS::Route53::RecordSet",
        "AWS::ApiGatewayV2::DomainName",
    }
    # The health route is in every stage: an uptime check is useful in one region too.
    routes = cloud.stages[stage].of_type("AWS::ApiGatewayV2::Route").values()
    assert {r["Properties"]["RouteKey"] for r in routes} == {"POST /webhooks/sume", "GET /health"}


def _global_table(stage: Stage, name: str = TABLE) -> dict[str, Any]:
    (table,) = [
        t
        for t in stage.of_type("AWS::DynamoDB::GlobalTable").values()
        if t["Properties"]["TableName"] == name
    ]
    properties: dict[str, Any] = table["Properties"]
    return properties


def test_one_mrsc_table_in_the_primary_replicated_to_the_secondary_with_a_witness(
    cloud: Cloud,
) -> None:
    table = _global_table(cloud.regional[PRIMARY])
    assert table["TableName"] == TABLE
    assert table["MultiRegionConsistency"] == "STRONG"
    assert table["GlobalTableWitnesses"] == [{"Region": "us-west-2"}]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert {r["Region"] for r in table["Replicas"]} == {PRIMARY, SECONDARY}
    for replica in table["Replicas"]:
        assert replica["DeletionProtectionEnabled"] is True
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    # MRSC global tables take no TTL.
    assert "TimeToLiveSpecification" not in table
    # The indexes of infra/spec.py, as in one region.
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == [
        i["IndexName"] for i in spec.table_definition(TABLE)["GlobalSecondaryIndexes"]
    ]
    assert not cloud.regional[SECONDARY].of_type("AWS::DynamoDB::GlobalTable")


@pytest.mark.parametrize("region", [PRIMARY, SECONDARY])
def test_each_region_has_its_own_functions_queue_buckets_and_bus_on_the_one_table(
    cloud: Cloud, region: str
) -> None:
    stage = cloud.regional[region]
    for cfn_type in (
        "AWS::ApiGatewayV2::Api",
        "AWS::SQS::Queue",
        "AWS::Events::EventBus",
        "AWS::Events::Rule",
    ):
        assert stage.of_type(cfn_type), cfn_type
    assert len(stage.of_type("AWS::Lambda::Function")) >= 3
    assert len(stage.of_type("AWS::S3::Bucket")) == 3
    expected = "resolved-JobsGlobalTable" if region == PRIMARY else TABLE
    for function in ("Receiver", "Worker", "Poller"):
        assert stage.environment(function)["JOBS_TABLE_NAME"] == expected
    if region == SECONDARY:
        # Its replica, by name, in its own region.
        arns = json.dumps(list(stage.permissions("Receiver")))
        assert f"table/{TABLE}" in arns


def test_the_secondary_deploys_after_the_primary(cloud: Cloud) -> None:
    manifest = json.loads((cloud.outdir / "manifest.json").read_text())
    name = f"SumeWebhooks-{GLOBAL_STAGE}"
    primary = manifest["artifacts"][f"{name}-{PRIMARY}"]
    secondary = manifest["artifacts"][f"{name}-{SECONDARY}"]
    assert primary["environment"].endswith(f"/{PRIMARY}")
    assert secondary["environment"].endswith(f"/{SECONDARY}")
    assert f"{name}-{PRIMARY}" in secondary["dependencies"]
    # One stack name in both regions: the ops CLI finds each by stage and region.
    for artifact in (primary, secondary):
        assert artifact["properties"]["stackName"] == name


@pytest.mark.parametrize("region", [PRIMARY, SECONDARY])
def test_route53_fails_over_on_the_health_of_each_regions_receiver(
    cloud: Cloud, region: str
) -> None:
    stage = cloud.regional[region]
    routes = {
        r["Properties"]["RouteKey"]: r for r in stage.of_type("AWS::ApiGatewayV2::Route").values()
    }
    assert set(routes) == {"POST /webhooks/sume", "GET /health"}
    integrations = stage.of_type("AWS::ApiGatewayV2::Integration")
    health_target = routes["GET /health"]["Properties"]["Target"]["Fn::Join"][1][1]["Ref"]
    # The receiver's alias (its SnapStart version), as the webhook route's.
    assert ref_name(integrations[health_target]["Properties"]["IntegrationUri"]) == (
        "FunctionsReceiverLive"
    )

    check_id, check = stage.one("FailoverHealthCheck", "AWS::Route53::HealthCheck")
    config = check["Properties"]["HealthCheckConfig"]
    assert (config["Type"], config["Port"], config["ResourcePath"]) == ("HTTPS", 443, "/health")
    assert config["EnableSNI"] is True
    # This region's own API endpoint, not the failover domain.
    host = config["FullyQualifiedDomainName"]["Fn::Join"][1]
    assert base_name(host[0]["Ref"]) == "WebhookApi"
    assert host[1:] == [f".execute-api.{region}.", {"Ref": "AWS::URLSuffix"}]

    _, record = stage.one("FailoverRecord", "AWS::Route53::RecordSet")
    props = record["Properties"]
    assert props["Name"] == GLOBAL_OVERRIDES["domain_name"]
    assert props["HostedZoneId"] == GLOBAL_OVERRIDES["hosted_zone_id"]
    assert props["Failover"] == ("PRIMARY" if region == PRIMARY else "SECONDARY")
    assert props["SetIdentifier"] == region
    assert props["HealthCheckId"] == {"Fn::GetAtt": [check_id, "HealthCheckId"]}
    domain_id, domain = stage.one("FailoverDomain", "AWS::ApiGatewayV2::DomainName")
    assert props["AliasTarget"]["DNSName"] == {"Fn::GetAtt": [domain_id, "RegionalDomainName"]}
    assert domain["Properties"]["DomainName"] == GLOBAL_OVERRIDES["domain_name"]
    (configuration,) = domain["Properties"]["DomainNameConfigurations"]
    assert configuration["EndpointType"] == "REGIONAL"
    assert configuration["SecurityPolicy"] == "TLS_1_2"
    certificate_id, certificate = stage.one(
        "FailoverCertificate", "AWS::CertificateManager::Certificate"
    )
    assert configuration["CertificateArn"] == {"Ref": certificate_id}
    assert certificate["Properties"]["ValidationMethod"] == "DNS"
    (mapping,) = stage.of_type("AWS::ApiGatewayV2::ApiMapping").values()
    assert ref_name(mapping["Properties"]["DomainName"]) == "FailoverDomain"
    assert ref_name(mapping["Properties"]["ApiId"]) == "WebhookApi"
    assert mapping["Properties"]["Stage"] == "$default"


@pytest.mark.parametrize("region", [PRIMARY, SECONDARY])
def test_the_webhook_url_is_the_failover_domain(cloud: Cloud, region: str) -> None:
    outputs = cloud.regional[region].template["Outputs"]
    assert outputs["WebhookUrl"]["Value"] == "https://hooks.example.com/webhooks/sume"
    assert "RegionWebhookUrl" in outputs and "HealthCheckId" in outputs


def test_the_health_checks_alarm_lives_where_route53s_metrics_are(cloud: Cloud) -> None:
    alarms = cloud.regional[PRIMARY].of_type("AWS::CloudWatch::Alarm")
    (unhealthy,) = [
        a["Properties"] for k, a in alarms.items() if base_name(k) == "FailoverUnhealthy"
    ]
    assert (unhealthy["Namespace"], unhealthy["MetricName"]) == ("AWS/Route53", "HealthCheckStatus")
    assert unhealthy["ComparisonOperator"] == "LessThanThreshold"
    assert unhealthy["TreatMissingData"] == "breaching"
    assert unhealthy["AlarmActions"] and unhealthy["OKActions"]
    secondary = cloud.regional[SECONDARY].of_type("AWS::CloudWatch::Alarm")
    assert not [k for k in secondary if base_name(k) == "FailoverUnhealthy"]


@pytest.mark.parametrize("region", [PRIMARY, SECONDARY])
def test_each_regions_poller_asks_the_one_url_which_region_serves(
    cloud: Cloud, region: str
) -> None:
    env = cloud.regional[region].environment("Poller")
    assert env[Env.FAILOVER_HEALTH_URL] == f"https://{GLOBAL_OVERRIDES['domain_name']}/health"
    assert env[Env.FAILOVER_PRIMARY_REGION] == PRIMARY
    # Both silence alarms take the Serving gauge's minimum over their own window.
    alarms = cloud.regional[region].alarms()
    for name in ("DeliverySilence", "PollRecoveryShare"):
        (serving,) = [q for q in alarms[name]["Metrics"] if q["Id"] == "serving"]
        stat = serving["MetricStat"]
        assert (stat["Metric"]["MetricName"], stat["Stat"]) == (Metric.SERVING, "Minimum")
        (verified,) = [q for q in alarms[name]["Metrics"] if q["Id"] in ("verified", "webhook")]
        assert stat["Period"] == verified["MetricStat"]["Period"]


# One window of each region's metrics, as each region's poller and receiver emit them:
# Route 53 sends Sume's deliveries to the primary (30 verified, 12 new jobs), the
# secondary verifies none; one registered job awaits in the one table, which both
# pollers count; polls recovered 6 jobs (a share over 50%: Sume's webhooks are broken).
AWAITING = 1.0
NORMAL = {
    PRIMARY: {"serving": 1.0, "awaiting": AWAITING, "verified": 30.0, "webhook": 12.0},
    SECONDARY: {"serving": 0.0, "awaiting": AWAITING},
}
RECOVERING = {
    PRIMARY: {"serving": 1.0, "awaiting": AWAITING, "verified": 30.0, "webhook": 3.0},
    SECONDARY: {"serving": 0.0, "awaiting": AWAITING, "polled": 6.0},
}


def _fired(cloud: Cloud, window: dict[str, dict[str, float]]) -> dict[str, set[str]]:
    return {
        region: {
            name
            for name in ("DeliverySilence", "PollRecoveryShare")
            if fires(cloud.regional[region].alarms()[name], data)
        }
        for region, data in window.items()
    }


def test_no_silence_alarm_fires_in_either_region_in_normal_operation(cloud: Cloud) -> None:
    assert _fired(cloud, NORMAL) == {PRIMARY: set(), SECONDARY: set()}
    # The gate is what keeps the secondary quiet: were its gauge 1, the same window pages.
    assert fires(
        cloud.regional[SECONDARY].alarms()["DeliverySilence"], NORMAL[SECONDARY] | {"serving": 1.0}
    )


def test_a_real_silence_pages_the_region_that_serves_and_only_it(cloud: Cloud) -> None:
    # Sume stops sending: nothing verified anywhere while a job awaits.
    quiet = {
        PRIMARY: {"serving": 1.0, "awaiting": AWAITING},
        SECONDARY: {"serving": 0.0, "awaiting": AWAITING},
    }
    assert _fired(cloud, quiet) == {PRIMARY: {"DeliverySilence"}, SECONDARY: set()}
    # After a failover the secondary serves the whole window: it pages, the primary not
    # (its poller, if it still runs, finds the domain answered from the secondary).
    failed_over = {
        PRIMARY: {"serving": 0.0, "awaiting": AWAITING},
        SECONDARY: {"serving": 1.0, "awaiting": AWAITING},
    }
    assert _fired(cloud, failed_over) == {PRIMARY: set(), SECONDARY: {"DeliverySilence"}}
    # A window with the failover in it pages neither (both gauges' minimum is 0): the
    # next, served whole by the secondary, does.
    switching = {region: {**data, "serving": 0.0} for region, data in failed_over.items()}
    assert _fired(cloud, switching) == {PRIMARY: set(), SECONDARY: set()}
    # The secondary serving and verifying deliveries: no page.
    served = {**failed_over, SECONDARY: {**failed_over[SECONDARY], "verified": 9.0}}
    assert _fired(cloud, served) == {PRIMARY: set(), SECONDARY: set()}


def test_polls_recovering_most_endings_page_only_where_the_webhooks_should_come(
    cloud: Cloud,
) -> None:
    # The secondary's own endings are all recoveries (its NewJobs is 0): no page there.
    assert _fired(cloud, RECOVERING) == {PRIMARY: set(), SECONDARY: set()}
    broken = {**RECOVERING, PRIMARY: {**RECOVERING[PRIMARY], "polled": 6.0}}
    assert _fired(cloud, broken) == {PRIMARY: {"PollRecoveryShare"}, SECONDARY: set()}
    # No gauge at all (no poller tick): no page.
    assert not fires(
        cloud.regional[PRIMARY].alarms()["PollRecoveryShare"],
        {k: v for k, v in broken[PRIMARY].items() if k != "serving"},
    )


VALID = {k: v for k, v in GLOBAL_OVERRIDES.items() if k not in {"status_allowed_hosts"}}


def _plan(**changes: str) -> RegionPlan | None:
    values = {**VALID, **changes}
    return RegionPlan.from_context(values.get)


def test_no_regions_is_the_single_region_deployment() -> None:
    assert RegionPlan.from_context(lambda key: None) is None


def test_the_plan_reads_the_context() -> None:
    arns = (
        "us-east-1=arn:aws:acm:us-east-1:123456789012:certificate/"
        "11111111-2222-3333-4444-555555555555,"
        "us-east-2=arn:aws:acm:us-east-2:123456789012:certificate/"
        "66666666-7777-8888-9999-000000000000"
    )
    plan = _plan(regions=" us-east-2 , us-east-1 ", certificate_arns=arns)
    assert plan is not None
    assert (plan.primary, plan.other(plan.primary)) == ("us-east-2", "us-east-1")
    assert set(plan.certificate_arns) == {"us-east-1", "us-east-2"}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"regions": "us-east-1"}, "two different regions"),
        ({"regions": "us-east-1,us-east-1"}, "two different regions"),
        ({"regions": "us-east-1,eu-west-1"}, "one MRSC region set"),
        ({"regions": "us-west-1,us-east-1"}, "one MRSC region set"),
        ({"witness_region": "us-east-2"}, "witness_region must be a region of"),
        ({"witness_region": "eu-west-1"}, "witness_region must be a region of"),
        ({"witness_region": ""}, "witness_region"),
        ({"domain_name": "https://hooks.example.com"}, "domain_name"),
        ({"hosted_zone_id": "zone"}, "hosted_zone_id and hosted_zone_name"),
        ({"hosted_zone_name": "other.example"}, "not in hosted_zone_name"),
        (
            {
                "certificate_arns": "us-east-1=arn:aws:acm:us-east-1:123456789012:certificate/"
                "11111111-2222-3333-4444-555555555555"
            },
            "a certificate for each of",
        ),
        (
            {
                "certificate_arns": "us-east-1=arn:aws:acm:us-east-2:123456789012:certificate/"
                "11111111-2222-3333-4444-555555555555"
            },
            "certificate_arns must be region=",
        ),
    ],
)
def test_what_cannot_deploy_is_refused_in_one_line(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        _plan(**changes)
    assert "\n" not in str(refused.value)


def test_the_domains_settings_alone_are_refused() -> None:
    with pytest.raises(ConfigError, match="domain_name is only used with -c regions"):
        RegionPlan.from_context(lambda key: "hooks.example.com" if key == "domain_name" else None)


LEASES = f"SumeWebhooks-{GLOBAL_STAGE}-shard-leases"
PAYLOADS = {r: f"{GLOBAL_STAGE}-sume-events-AWS::AccountId-{r}" for r in (PRIMARY, SECONDARY)}


def test_one_leases_table_for_both_regions_pollers_and_one_round_per_period(cloud: Cloud) -> None:
    leases = _global_table(cloud.regional[PRIMARY], LEASES)
    assert leases["MultiRegionConsistency"] == "STRONG"
    assert leases["GlobalTableWitnesses"] == [{"Region": "us-west-2"}]
    assert {r["Region"] for r in leases["Replicas"]} == {PRIMARY, SECONDARY}
    assert not cloud.regional[SECONDARY].of_type("AWS::DynamoDB::Table")
    primary, secondary = (cloud.regional[r].environment("Poller") for r in (PRIMARY, SECONDARY))
    assert primary["SHARD_LEASES_TABLE_NAME"] == "resolved-PollerScheduleLeases"
    assert secondary["SHARD_LEASES_TABLE_NAME"] == LEASES
    assert f"table/{LEASES}" in json.dumps(list(cloud.regional[SECONDARY].permissions("Poller")))
    # The schedule's period (the stage's default poll_rate_minutes, 5).
    assert primary["POLL_ROUND_SECONDS"] == secondary["POLL_ROUND_SECONDS"] == "300"


@pytest.mark.parametrize("region", [PRIMARY, SECONDARY])
def test_a_large_event_is_written_to_both_regions_payloads_buckets(
    cloud: Cloud, region: str
) -> None:
    stage = cloud.regional[region]
    peer = SECONDARY if region == PRIMARY else PRIMARY
    (bucket,) = [
        b["Properties"]
        for logical_id, b in stage.of_type("AWS::S3::Bucket").items()
        if base_name(logical_id) == "BucketsPayloads"
    ]
    assert ref_name(bucket["BucketName"]) == PAYLOADS[region]
    peer_events = f"arn:aws:s3:::{PAYLOADS[peer]}/events/*"
    for function in ("Receiver", "Poller"):
        environment = stage.environment(function)
        assert environment["PEER_REGION"] == peer
        assert environment["PEER_PAYLOADS_BUCKET_NAME"] == f"resolved-{PAYLOADS[peer]}"
        assert stage.permissions(function)[peer_events] == {"s3:PutObject"}
    assert stage.permissions("Worker")[peer_events] == {"s3:GetObject"}
    # A key its own bucket lacks is NoSuchKey (not AccessDenied): it falls back to the peer's.
    assert stage.permissions("Worker")["BucketsPayloads"] == {"s3:ListBucket"}
    assert "PEER_REGION" not in stage.environment("Worker")


@pytest.mark.parametrize(("region", "hour"), [(PRIMARY, "3"), (SECONDARY, "15")])
def test_each_region_expires_ended_jobs_once_a_day_at_its_own_hour(
    cloud: Cloud, region: str, hour: str
) -> None:
    stage = cloud.regional[region]
    (rule,) = [
        r["Properties"]
        for logical_id, r in stage.of_type("AWS::Events::Rule").items()
        if base_name(logical_id) == "ExpiryRule"
    ]
    assert rule["ScheduleExpression"] == f"cron(0 {hour} * * ? *)"
    (target,) = rule["Targets"]
    assert json.loads(target["Input"]) == {"expire_ended_jobs": True}
    assert ref_name(target["Arn"]) == "FunctionsPollerFunction"
    granted = stage.permissions("Poller")
    items = [actions for resource, actions in granted.items() if "dynamodb:DeleteItem" in actions]
    assert len(items) == 1 and {"dynamodb:BatchGetItem"} <= items[0]
    assert any(r.endswith("/index/report-window") for r in granted)
    assert stage.environment("Poller")["RETENTION_DAYS"] == "35"


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_single_region_stage_keeps_its_ttl_and_has_no_expiry_run(
    cloud: Cloud, stage: str
) -> None:
    template = cloud.stages[stage]
    (table,) = template.of_type("AWS::DynamoDB::Table").values() and [
        t
        for t in template.of_type("AWS::DynamoDB::Table").values()
        if "TimeToLiveSpecification" in t["Properties"]
    ]
    assert table["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": "expires_at",
        "Enabled": True,
    }
    rules = {base_name(r) for r in template.of_type("AWS::Events::Rule")}
    assert "ExpiryRule" not in rules
    for function in ("Receiver", "Poller", "Worker"):
        assert "PEER_REGION" not in template.environment(function)
    assert "POLL_ROUND_SECONDS" not in template.environment("Poller")
