"""The opt-in multi-region deployment: which regions, and one webhook URL that fails over.

``-c regions=us-east-1,us-east-2 -c witness_region=us-west-2`` (and the
domain's context, below) deploys the same stage once in each region, around
one jobs table: a DynamoDB global table with multi-region strong consistency
(MRSC), replicated in the two regions and with a witness in the third of
their region set. Without ``regions`` nothing here is used and the
single-region stack is what it always was. Each setting is checked here, once,
so a bad one fails the synth in one line naming the key
(docs/operations.md, "Two regions").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.config import ConfigError
from sume.core.names import HEALTH_PATH

# Where MRSC global tables can live: all replicas and the witness in one set
# (the DynamoDB API reference, CreateGlobalTableWitnessGroupMemberAction).
REGION_SETS: Final = (
    ("us-east-1", "us-east-2", "us-west-2"),
    ("eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1"),
    ("ap-northeast-1", "ap-northeast-2", "ap-northeast-3"),
)

# Context keys, all empty by default: the single-region deployment.
KEYS: Final = (
    "regions",
    "witness_region",
    "domain_name",
    "hosted_zone_id",
    "hosted_zone_name",
    "certificate_arns",
)

# Route 53 asks every 30 s from several of its locations, and a region is
# failed over after 3 failed asks in a row: about 90 s without deliveries,
# well inside Sume's retries (10 attempts a minute apart).
HEALTH_CHECK_INTERVAL_SECONDS: Final = 30
HEALTH_CHECK_FAILURES: Final = 3
# Route 53's health-check metrics exist only in us-east-1, so only a stack
# there can alarm on them (docs/operations.md, "What to watch").
ROUTE53_METRICS_REGION: Final = "us-east-1"

_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_ZONE_ID = re.compile(r"^Z[A-Z0-9]{1,31}$")
_CERTIFICATE_ARN = re.compile(r"^arn:aws[a-z-]*:acm:([a-z0-9-]+):\d{12}:certificate/[0-9a-f-]{36}$")


@dataclass(frozen=True)
class RegionPlan:
    regions: tuple[str, str]
    """The two regions that take deliveries; the first is Route 53's primary."""
    witness_region: str
    domain_name: str
    """The one webhook host Sume is given (``https://<domain_name>/webhooks/sume``)."""
    hosted_zone_id: str
    hosted_zone_name: str
    certificate_arns: Mapping[str, str]
    """An ACM certificate for ``domain_name`` per region; empty: the stacks create them,
    validated by DNS in the hosted zone."""

    @property
    def primary(self) -> str:
        return self.regions[0]

    def other(self, region: str) -> str:
        return self.regions[1] if region == self.regions[0] else self.regions[0]

    @classmethod
    def from_context(cls, lookup: Callable[[str], Any]) -> RegionPlan | None:
        """The plan, or None when ``regions`` is unset (the single-region deployment)."""
        values = {key: str(lookup(key) or "").strip().lower() for key in KEYS}
        if not values["regions"]:
            extra = [key for key in KEYS if values[key]]
            if extra:
                raise ConfigError(
                    f"context {extra[0]} is only used with -c regions=<region>,<region>"
                )
            return None
        regions = tuple(r.strip() for r in values["regions"].split(",") if r.strip())
        if len(regions) != 2 or regions[0] == regions[1]:
            raise ConfigError(
                "context regions must name two different regions, e.g. "
                f"-c regions=us-east-1,us-east-2, got {values['regions']!r}"
            )
        region_set = next((s for s in REGION_SETS if regions[0] in s), None)
        if region_set is None or regions[1] not in region_set:
            raise ConfigError(
                f"context regions {','.join(regions)} must lie in one MRSC region set: "
                + "; ".join(", ".join(s) for s in REGION_SETS)
            )
        witness = values["witness_region"]
        if witness not in region_set or witness in regions:
            raise ConfigError(
                f"context witness_region must be a region of {', '.join(region_set)} other "
                f"than {' and '.join(regions)}, got {witness or 'nothing'!r}"
            )
        domain = values["domain_name"]
        if not _DOMAIN.match(domain):
            raise ConfigError(
                "context domain_name must be the webhook's host name (e.g. "
                f"-c domain_name=hooks.example.com), got {domain or 'nothing'!r}"
            )
        zone_name = values["hosted_zone_name"].rstrip(".")
        zone_id = str(lookup("hosted_zone_id") or "").strip()
        if not _ZONE_ID.match(zone_id) or not _DOMAIN.match(zone_name):
            raise ConfigError(
                "context hosted_zone_id and hosted_zone_name must name the Route 53 public "
                "hosted zone of domain_name (e.g. -c hosted_zone_id=Z0123456789ABC "
                "-c hosted_zone_name=example.com)"
            )
        if domain != zone_name and not domain.endswith(f".{zone_name}"):
            raise ConfigError(
                f"context domain_name {domain} is not in hosted_zone_name {zone_name}"
            )
        return cls(
            regions=(regions[0], regions[1]),
            witness_region=witness,
            domain_name=domain,
            hosted_zone_id=zone_id,
            hosted_zone_name=zone_name,
            certificate_arns=_certificates(str(lookup("certificate_arns") or ""), regions),
        )


def _certificates(raw: str, regions: tuple[str, ...]) -> dict[str, str]:
    """``region=arn,region=arn``: one per region, each in its region; or none at all."""
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    arns: dict[str, str] = {}
    for entry in entries:
        region, _, arn = entry.partition("=")
        found = _CERTIFICATE_ARN.match(arn.strip())
        if not found or found.group(1) != region.strip():
            raise ConfigError(
                "context certificate_arns must be region=<ACM certificate ARN in that region>, "
                f"comma-separated, got {entry!r}"
            )
        arns[region.strip()] = arn.strip()
    if arns and set(arns) != set(regions):
        raise ConfigError(
            f"context certificate_arns must name a certificate for each of {', '.join(regions)} "
            "(or none: the stacks then create them, validated by DNS)"
        )
    return arns


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
                alarm_description=(
                    f"Route 53 finds {region} unable to take a delivery (GET /health fails): "
                    f"deliveries to {plan.domain_name} go to {plan.other(region)} meanwhile."
                ),
            )
            action = cw_actions.SnsAction(alarm_topic)
            self.alarm.add_alarm_action(action)
            self.alarm.add_ok_action(action)
        self.webhook_host = plan.domain_name
