"""The HTTP API: ``POST /webhooks/sume`` and ``GET /health``, both to the receiver."""

from __future__ import annotations

import json
from typing import Final

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw_v1
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import spec
from infra.nag import acknowledge
from sume.core.names import HEALTH_PATH, WEBHOOK_PATH

# One JSON line per request. No headers or body: they carry Sume's signature.
ACCESS_LOG_FIELDS: Final = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "userAgent": "$context.identity.userAgent",
}

# API Gateway gives up on the receiver just after its own timeout, and both
# stay inside Sume's 10 s, so Sume sees our 5xx rather than its own timeout.
INTEGRATION_TIMEOUT_SECONDS: Final = spec.RECEIVER_TIMEOUT + 1


@jsii.implements(apigw.IAccessLogSettings)
class _AccessLogSettings:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigw.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw_v1.AccessLogFormat:
        return apigw_v1.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS))


class WebhookApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        receiver: lambda_.IFunction,
        throttle_rate: int,
        throttle_burst: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.api = apigw.HttpApi(
            self,
            "Api",
            description="Sume webhook deliveries",
            create_default_stage=False,
        )
        self.route = self._route("WebhookRoute", "Receiver", WEBHOOK_PATH, "POST", receiver)
        acknowledge(
            self.route,
            "AwsSolutions-APIG4",
            "Sume cannot present AWS credentials or tokens; every delivery is "
            "authenticated by its HMAC-SHA256 signature over the raw body, verified "
            "in the receiver before anything reaches storage.",
        )
        # In every stage: Route 53 asks it in a two-region one, and in one region
        # it is the uptime check an operator or a monitor can ask.
        self._health_route(receiver)
        self.access_logs = access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=removal_policy
        )
        self.stage = apigw.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            # Sized from Sume's worst case (infra/config.py). It is one limit for
            # all callers, so junk can use it up too: the 4xx alarm says when,
            # and only WAF in front limits per source IP (docs/operations.md).
            throttle=apigw.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
            access_log_settings=_AccessLogSettings(access_logs),
        )
        self.webhook_url = f"{self.api.api_endpoint}{WEBHOOK_PATH}"

    def _route(
        self,
        route_id: str,
        integration_id: str,
        path: str,
        method: str,
        receiver: lambda_.IFunction,
    ) -> apigw.HttpRoute:
        """A route of the API to the receiver (payload format 2.0, the integration's timeout)."""
        return apigw.HttpRoute(
            self,
            route_id,
            http_api=self.api,
            route_key=apigw.HttpRouteKey.with_(path, apigw.HttpMethod[method]),
            integration=integrations.HttpLambdaIntegration(
                integration_id,
                receiver,
                payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0,
                timeout=Duration.seconds(INTEGRATION_TIMEOUT_SECONDS),
            ),
        )

    def _health_route(self, receiver: lambda_.IFunction) -> None:
        """``GET /health``: whether the receiver reaches its table (sume.receiving.health)."""
        route = self._route("HealthRoute", "ReceiverHealth", HEALTH_PATH, "GET", receiver)
        acknowledge(
            route,
            "AwsSolutions-APIG4",
            "Health checkers (Route 53's, uptime monitors) cannot authenticate; the answer "
            "is 200 or 503 with "
            "no detail, and its one strongly consistent read costs a read unit.",
        )
