"""The one factory for the three Lambda functions.

All three run the same asset (``functions/``) with the same runtime, layer,
tracing and logging, and differ only in handler, timeout, memory and
environment, so none of those shared settings can drift between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.nag import acknowledge
from sume.names import DUE_SHARDS, METRICS_NAMESPACE, SERVICE_NAME

CODE_ROOT: Final = Path(__file__).resolve().parent.parent / "functions"
# Whatever a local run leaves beside the code never ships.
CODE_EXCLUDES: Final = ("**/__pycache__", "**/*.py[cod]", "**/.*", "**/*.egg-info")

RUNTIME: Final = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE: Final = lambda_.Architecture.ARM_64

# Same version as pyproject.toml (tests/infra checks they agree). AWS publishes
# the layer ARN per region as a public SSM parameter, resolved by
# CloudFormation at deploy time: the synth stays offline and needs no account.
POWERTOOLS_VERSION: Final = "3.37.0"
POWERTOOLS_LAYER_PARAMETER: Final = (
    f"/aws/service/powertools/python/arm64/python3.13/{POWERTOOLS_VERSION}"
)


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    handler: str
    timeout_seconds: int
    memory_mb: int
    description: str
    environment: Mapping[str, str]


class FunctionFactory(Construct):
    """Builds the stack's functions; owns what they share (code, layer)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        log_retention: logs.RetentionDays,
        log_level: str,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self._log_retention = log_retention
        self._log_level = log_level
        self._removal_policy = removal_policy
        self.code = lambda_.Code.from_asset(str(CODE_ROOT), exclude=list(CODE_EXCLUDES))
        self.powertools = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "PowertoolsLayer",
            ssm.StringParameter.value_for_string_parameter(self, POWERTOOLS_LAYER_PARAMETER),
        )

    def build(self, spec: FunctionSpec) -> lambda_.Function:
        scope = Construct(self, spec.name)
        log_group = logs.LogGroup(
            scope,
            "Logs",
            retention=self._log_retention,
            removal_policy=self._removal_policy,
        )
        # An explicit role that may write only to its own log group, instead
        # of the AWSLambdaBasicExecutionRole managed policy (logs:* on every
        # group in the account).
        role = iam.Role(
            scope,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{spec.name}: {spec.description}",
        )
        log_group.grant_write(role)
        function = lambda_.Function(
            scope,
            "Function",
            description=spec.description,
            code=self.code,
            handler=spec.handler,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            layers=[self.powertools],
            role=role,
            timeout=Duration.seconds(spec.timeout_seconds),
            memory_size=spec.memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel[self._log_level],
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            environment={**self._powertools_environment(), **spec.environment},
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            "Pinned to python3.13 on purpose: the code, its tests and the Powertools "
            "layer version are verified on 3.13; a runtime bump is a tested change.",
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray PutTraceSegments/PutTelemetryRecords (active tracing) do not "
            "support resource-level permissions.",
        )
        return function

    def _powertools_environment(self) -> dict[str, str]:
        return {
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": self._log_level,
            # Events carry Sume's signed bodies and headers: never log them
            # whole, and keep handler responses out of traces.
            "POWERTOOLS_LOGGER_LOG_EVENT": "false",
            "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
            # One shard count for the writers and the poller's index queries.
            "DUE_SHARDS": str(DUE_SHARDS),
        }
