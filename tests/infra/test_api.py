"""The HTTP API: the webhook and health routes to the receiver, throttled, with JSON access logs."""

from __future__ import annotations

import json

from infra import spec
from sume.core.names import HEALTH_PATH, WEBHOOK_PATH
from tests.infra.conftest import Stage, ref_name
from tests.infra.synth_stages import PROD_OVERRIDES


def test_the_webhook_and_health_routes_go_to_the_receiver_with_payload_2(dev: Stage) -> None:
    from aws_cdk.assertions import Match

    t = dev.assertions()
    t.resource_count_is("AWS::ApiGatewayV2::Api", 1)
    t.has_resource_properties(
        "AWS::ApiGatewayV2::Api", {"ProtocolType": "HTTP", "Name": Match.any_value()}
    )
    routes = {r["Properties"]["RouteKey"] for r in dev.of_type("AWS::ApiGatewayV2::Route").values()}
    # The health route in one region too: the uptime check an operator can ask.
    assert routes == {f"POST {WEBHOOK_PATH}", f"GET {HEALTH_PATH}"}
    for integration in dev.of_type("AWS::ApiGatewayV2::Integration").values():
        props = integration["Properties"]
        assert props["IntegrationType"] == "AWS_PROXY"
        assert props["PayloadFormatVersion"] == "2.0"
        # The alias of the published version, which SnapStart restores; never $LATEST.
        assert ref_name(props["IntegrationUri"]) == "FunctionsReceiverLive"
        # API Gateway waits just past the receiver's own timeout, inside Sume's 10 s.
        assert spec.RECEIVER_TIMEOUT * 1000 < props["TimeoutInMillis"] < 10_000
    # Only these routes may invoke the receiver.
    permissions = [
        p
        for p in dev.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert sorted(p["Properties"]["SourceArn"]["Fn::Join"][1][-1] for p in permissions) == [
        f"/*/*{HEALTH_PATH}",
        f"/*/*{WEBHOOK_PATH}",
    ]
    assert {ref_name(p["Properties"]["FunctionName"]) for p in permissions} == {
        "FunctionsReceiverLive"
    }


def test_stage_throttling_comes_from_context(dev: Stage, prod: Stage) -> None:
    for stage, rate, burst in ((dev, 50, 100), (prod, 25, 40)):
        stage.assertions().has_resource_properties(
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
