"""The one factory for the three Lambda functions, and what they share.

All three run the same asset (``functions/``) with the same runtime, layer,
tracing and logging, and differ only in handler, timeout, memory,
environment and grants, so none of those shared settings can drift between
them, nor can the jobs table and queue that every handler's
``sume.core.settings.TableSettings`` names. What differs lives in each function's
own module (``receiver.py``, ``worker.py``, ``poller.py`` beside this one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aws_cdk import Aws, CfnElement, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.nag import acknowledge
from sume.core.names import METRICS_NAMESPACE, SERVICE_NAME, Env

CODE_ROOT: Final = Path(__file__).resolve().parents[2] / "functions"
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

# sume.store.payloads.PayloadStore keys every large event under this prefix.
PAYLOADS_PREFIX: Final = "events/*"


@dataclass(frozen=True)
class FunctionSpec:
    handler: str
    timeout_seconds: int
    memory_mb: int
    description: str
    environment: Mapping[str, str]
    reserved_concurrency: int | None = None
    """Concurrency kept for this function alone, and its cap; None: the account's shared pool."""
    snap_start: bool = False
    """Published versions start from a snapshot of their init (Lambda SnapStart)."""


class FunctionFactory(Construct):
    """Owns what the functions share (code, layer, logging, jobs table and queue).

    Each function is built under it, at ``Functions/<id>``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        queue: sqs.IQueue,
        log_retention: logs.RetentionDays,
        log_level: str,
        removal_policy: RemovalPolicy,
        due_shards: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = table
        self._due_shards = due_shards
        self.queue = queue
        self._log_retention = log_retention
        self._log_level = log_level
        self._removal_policy = removal_policy
        self.code = lambda_.Code.from_asset(str(CODE_ROOT), exclude=list(CODE_EXCLUDES))
        self.powertools = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "PowertoolsLayer",
            ssm.StringParameter.value_for_string_parameter(self, POWERTOOLS_LAYER_PARAMETER),
        )

    def build(self, scope: Construct, spec: FunctionSpec) -> lambda_.Function:
        """The function with its own log group and role, all three under ``scope``."""
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
            description=f"{scope.node.id}: {spec.description}",
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
            environment={**self._shared_environment(), **_without_empty(spec.environment)},
            reserved_concurrent_executions=spec.reserved_concurrency,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if spec.snap_start else None,
        )
        for rule in ("AwsSolutions-L1", "Serverless-LambdaLatestVersion"):
            acknowledge(
                function,
                rule,
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

    def _shared_environment(self) -> dict[str, str]:
        return {
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": self._log_level,
            # Events carry Sume's signed bodies and headers: never log them
            # whole, and keep handler responses out of traces.
            "POWERTOOLS_LOGGER_LOG_EVENT": "false",
            "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
            # Every handler's TableSettings: one shard count for the writers
            # and the poller's index queries, one table, one queue.
            Env.DUE_SHARDS: str(self._due_shards),
            Env.JOBS_TABLE_NAME: self.table.table_name,
            Env.JOBS_QUEUE_URL: self.queue.queue_url,
        }


class StackFunction(Construct):
    """One of the stack's functions, at ``Functions/<construct_id>``.

    A subclass passes its handler, sizes and environment, then makes every
    grant its code needs, on the factory's jobs table and queue
    (``self.table``, ``self.queue``) too, so one module shows all one
    function may do.
    """

    def __init__(self, factory: FunctionFactory, construct_id: str, spec: FunctionSpec) -> None:
        super().__init__(factory, construct_id)
        self.table = factory.table
        self.queue = factory.queue
        self.function = factory.build(self, spec)

    @property
    def role(self) -> iam.IRole:
        role = self.function.role
        assert role is not None
        return role

    def grant_items(self, *actions: str) -> None:
        """Item actions on the jobs table itself (``Table.grant`` would add every index too)."""
        iam.Grant.add_to_principal(
            grantee=self.function, actions=list(actions), resource_arns=[self.table.table_arn]
        )

    def grant_object_keys(
        self, bucket: s3.Bucket, pattern: str, *actions: str, unknown_keys: str
    ) -> None:
        """``actions`` on the objects under ``pattern``; ``unknown_keys`` says why a wildcard."""
        bucket.grants.actions_on_object_keys(self.function, pattern, *actions)
        acknowledge(self.role, object_keys_finding(bucket, pattern), unknown_keys)

    def grant_peer_payloads(self, bucket_name: str, *actions: str) -> None:
        """``actions`` on the large event bodies in the other region's payloads bucket."""
        stack = Stack.of(self)
        arn = f"arn:{stack.partition}:s3:::{bucket_name}/{PAYLOADS_PREFIX}"
        iam.Grant.add_to_principal(
            grantee=self.function, actions=list(actions), resource_arns=[arn]
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{_nag(arn)}]",
            "Event bodies are stored one object per job and digest under events/ of both "
            "regions' payloads buckets; object keys are not known in advance.",
        )

    def take_peer_payloads(self, region: str, bucket_name: str) -> None:
        """Large events are written to the other region's payloads bucket too."""
        self.grant_peer_payloads(bucket_name, "s3:PutObject")
        self.function.add_environment(Env.PEER_REGION, region)
        self.function.add_environment(Env.PEER_PAYLOADS_BUCKET_NAME, bucket_name)

    def grant_payloads(self, payloads: s3.Bucket, *actions: str) -> None:
        """``actions`` on the large event bodies (``PAYLOADS_PREFIX``) only."""
        self.grant_object_keys(
            payloads,
            PAYLOADS_PREFIX,
            *actions,
            unknown_keys="Event bodies are stored one object per job and digest under "
            "events/; object keys are not known in advance.",
        )


def object_keys_finding(bucket: s3.Bucket, pattern: str) -> str:
    """The cdk-nag IAM5 finding id for a grant on ``bucket``'s objects under ``pattern``."""
    cfn = bucket.node.default_child
    assert isinstance(cfn, CfnElement)
    logical_id = Stack.of(bucket).resolve(Stack.of(bucket).get_logical_id(cfn))
    return f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{pattern}]"


def _without_empty(environment: Mapping[str, str]) -> dict[str, str]:
    """Unset optional settings stay unset, so the code's defaults apply."""
    return {key: value for key, value in environment.items() if value}


def _nag(name: str) -> str:
    """A name as cdk-nag writes it in a finding: pseudo parameters' tokens as ``<AWS::...>``."""
    return name.replace(Aws.ACCOUNT_ID, "<AWS::AccountId>").replace(
        Aws.PARTITION, "<AWS::Partition>"
    )
