"""The opt-in multi-region deployment's constructs: one webhook URL that fails over.

Each region's stack gets a ``FailoverEndpoint``: its custom domain, a Route 53
health check on its own ``GET /health`` and its failover record. Which regions
and which domain is the ``RegionPlan`` (infra/region_plan.py, no CDK), checked
before the CDK starts (docs/operations.md, "Two regions").
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.region_plan import RegionPlan
from sume.core.names import HEALTH_PATH, Env

# Route 53 asks every 30 s from several of its locations, and a region is
# failed over after 3 failed asks in a row: about 90 s without deliveries,
# well inside Sume's retries (10 attempts a minute apart).
HEALTH_CHECK_INTERVAL_SECONDS: Final = 30
HEALTH_CHECK_FAILURES: Final = 3
# Route 53's health-check metrics exist only in us-east-1, so only a stack
# there can alarm on them (docs/operations.md, "What to watch").
ROUTE53_METRICS_REGION: Final = "us-east-1"


class FailoverEndpoint(Construct):
    """This region's half of the one webhook URL.

    The custom domain (its certificate, its mapping to the API's stage), a
    Route 53 health check asking this region's own API endpoint for
    ``GET /health``, and this region's failover record for the domain, tied
    to that check: the primary region's record answers while its receiver can
    reach the table, the secondary's otherwise.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: RegionPlan,
        region: str,
        api: apigw.HttpApi,
        stage: apigw.HttpStage,
        alarm_topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        zone = route53.HostedZone.from_hosted_zone_attributes(
            self, "Zone", hosted_zone_id=plan.hosted_zone_id, zone_name=plan.hosted_zone_name
        )
        certificate: acm.ICertificate
        if plan.certificate_arns:
            certificate = acm.Certificate.from_certificate_arn(
                self, "Certificate", plan.certificate_arns[region]
            )
        else:
            certificate = acm.Certificate(
                self,
                "Certificate",
                domain_name=plan.domain_name,
                validation=acm.CertificateValidation.from_dns(zone),
            )
        self.domain = apigw.DomainName(
            self,
            "Domain",
            domain_name=plan.domain_name,
            certificate=certificate,
            endpoint_type=apigw.EndpointType.REGIONAL,
            security_policy=apigw.SecurityPolicy.TLS_1_2,
        )
        apigw.ApiMapping(self, "Mapping", api=api, domain_name=self.domain, stage=stage)
        # The regional endpoint itself, not the domain: the domain answers from
        # whichever region Route 53 chose, which is what this check decides.
        self.health_check = route53.CfnHealthCheck(
            self,
            "HealthCheck",
            health_check_config=route53.CfnHealthCheck.HealthCheckConfigProperty(
                type="HTTPS",
                fully_qualified_domain_name=(
                    f"{api.api_id}.execute-api.{region}.{Stack.of(self).url_suffix}"
                ),
                resource_path=HEALTH_PATH,
                port=443,
                enable_sni=True,
                request_interval=HEALTH_CHECK_INTERVAL_SECONDS,
                failure_threshold=HEALTH_CHECK_FAILURES,
            ),
            health_check_tags=[
                route53.CfnHealthCheck.HealthCheckTagProperty(
                    key="Name", value=f"{plan.domain_name} {region}"
                )
            ],
        )
        self.record = route53.CfnRecordSet(
            self,
            "Record",
            hosted_zone_id=zone.hosted_zone_id,
            name=plan.domain_name,
            type="A",
            set_identifier=region,
            failover="PRIMARY" if region == plan.primary else "SECONDARY",
            health_check_id=self.health_check.attr_health_check_id,
            alias_target=route53.CfnRecordSet.AliasTargetProperty(
                dns_name=self.domain.regional_domain_name,
                hosted_zone_id=self.domain.regional_hosted_zone_id,
                evaluate_target_health=False,
            ),
        )
        self.alarm: cw.Alarm | None = None
        if region == ROUTE53_METRICS_REGION:
            self.alarm = cw.Alarm(
                self,
                "Unhealthy",
                metric=cw.Metric(
                    namespace="AWS/Route53",
                    metric_name="HealthCheckStatus",
                    dimensions_map={"HealthCheckId": self.health_check.attr_health_check_id},
                    period=Duration.minutes(1),
                    statistic=cw.Stats.MINIMUM,
                ),
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.BREACHING,
                alarm_name=f"{Stack.of(self).stack_name}-FailoverUnhealthy",
                alarm_description=(
                    f"Route 53 finds {region} unable to take a delivery (GET /health fails): "
                    f"deliveries to {plan.domain_name} go to {plan.other(region)} meanwhile."
                ),
            )
            action = cw_actions.SnsAction(alarm_topic)
            self.alarm.add_alarm_action(action)
            self.alarm.add_ok_action(action)
        self.webhook_host = plan.domain_name
        self._primary = plan.primary

    def gauge_serving(self, poller: lambda_.Function) -> None:
        """The poller's ``Serving`` gauge asks the one URL's health route which region
        answers (``sume/polling/serving.py``): the silence alarms page only there."""
        poller.add_environment(Env.FAILOVER_HEALTH_URL, f"https://{self.webhook_host}{HEALTH_PATH}")
        poller.add_environment(Env.FAILOVER_PRIMARY_REGION, self._primary)
