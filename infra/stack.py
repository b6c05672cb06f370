"""The whole system for one stage: wires the constructs and grants access.

Every permission is a ``grant*`` call here, naming exactly the actions each
function's code performs, so this file is the one place to review who may
do what.
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import CfnElement, CfnOutput, Duration, RemovalPolicy, Stack, Tags
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import spec
from infra.api import WebhookApi
from infra.config import StageConfig
from infra.functions import FunctionFactory, FunctionSpec
from infra.messaging import AnnouncementBus, JobsQueue
from infra.monitoring import Monitored, Monitoring
from infra.nag import acknowledge
from infra.scheduling import PollerSchedule
from infra.secrets import SumeSecrets
from infra.storage import Buckets, JobsTable
from sume.names import DUE_INDEX, SERVICE_NAME

# sume.payloads.PayloadStore keys every large event under this prefix.
PAYLOADS_PREFIX: Final = "events/*"


class SumeWebhooksStack(Stack):
    def __init__(self, scope: Construct, config: StageConfig, **kwargs: Any) -> None:
        name = spec.stack_name(config.stage)
        super().__init__(
            scope,
            name,
            stack_name=name,
            description=f"Sume webhook receiver ({config.stage})",
            termination_protection=not config.is_dev,
            **kwargs,
        )
        Tags.of(self).add("service", SERVICE_NAME)
        Tags.of(self).add("stage", config.stage)
        removal = RemovalPolicy.DESTROY if config.is_dev else RemovalPolicy.RETAIN

        table = JobsTable(self, "Jobs", is_dev=config.is_dev).table
        queues = JobsQueue(self, "JobsQueue", is_dev=config.is_dev)
        buckets = Buckets(
            self,
            "Buckets",
            is_dev=config.is_dev,
            payloads_expire_days=config.payloads_expire_days,
            artifacts_infrequent_access_days=config.artifacts_infrequent_access_days,
        )
        bus = AnnouncementBus(self, "Announcements", bus_name=f"{name}-jobs").bus
        secrets = SumeSecrets(self, "Secrets", is_dev=config.is_dev)

        table_env = {
            "JOBS_TABLE_NAME": table.table_name,
            "JOBS_QUEUE_URL": queues.queue.queue_url,
        }
        factory = FunctionFactory(
            self,
            "Functions",
            log_retention=config.log_retention,
            log_level=config.log_level,
            removal_policy=removal,
        )
        receiver = factory.build(
            FunctionSpec(
                name="Receiver",
                handler="receiver.handler",
                timeout_seconds=spec.RECEIVER_TIMEOUT,
                memory_mb=512,
                description="Verifies and records Sume webhook deliveries",
                environment={
                    **table_env,
                    "SIGNING_SECRET_ARN": secrets.signing.secret_arn,
                    "PAYLOADS_BUCKET_NAME": buckets.payloads.bucket_name,
                },
            )
        )
        worker = factory.build(
            FunctionSpec(
                name="Worker",
                handler="worker.handler",
                timeout_seconds=spec.WORKER_TIMEOUT,
                memory_mb=spec.WORKER_MEMORY_MB,
                description="Archives artifacts of recorded jobs and announces them",
                environment=_without_empty(
                    {
                        **table_env,
                        "PAYLOADS_BUCKET_NAME": buckets.payloads.bucket_name,
                        "ARTIFACTS_BUCKET_NAME": buckets.artifacts.bucket_name,
                        "EVENT_BUS_NAME": bus.event_bus_name,
                        "RETENTION_DAYS": str(config.retention_days),
                        "ARTIFACT_ALLOWED_HOSTS": config.artifact_allowed_hosts,
                    }
                ),
            )
        )
        poller = factory.build(
            FunctionSpec(
                name="Poller",
                handler="poller.handler",
                timeout_seconds=spec.POLLER_TIMEOUT,
                memory_mb=512,
                description="Polls status_url of silent jobs and re-enqueues owed work",
                environment=_without_empty(
                    {
                        **table_env,
                        "PAYLOADS_BUCKET_NAME": buckets.payloads.bucket_name,
                        "SUME_API_TOKEN_ARN": secrets.api_token.secret_arn,
                        "STATUS_ALLOWED_HOSTS": config.status_allowed_hosts,
                    }
                ),
            )
        )
        # A failed poller run is not retried: the next scheduled run redoes it.
        poller.configure_async_invoke(retry_attempts=0)

        # Receiver: one conditional UpdateItem per delivery (GetItem when a
        # store refuses it without handing back the stored item, see
        # JobsTable._conditional), SendMessage for new work, large bodies to the
        # payloads bucket, the signing secret.
        grant_items(table, receiver, "dynamodb:GetItem", "dynamodb:UpdateItem")
        queues.queue.grant_send_messages(receiver)
        buckets.payloads.grants.actions_on_object_keys(receiver, PAYLOADS_PREFIX, "s3:PutObject")
        secrets.signing.grant_read(receiver)

        # Worker: claims/finishes items (GetItem as the receiver's, for a
        # refused claim), consumes the queue, reads large bodies, uploads
        # artifacts (multipart for big ones, aborted on failure), announces
        # outcomes.
        grant_items(table, worker, "dynamodb:GetItem", "dynamodb:UpdateItem")
        worker.add_event_source(
            event_sources.SqsEventSource(
                queues.queue,
                batch_size=config.worker_batch_size,
                max_batching_window=Duration.seconds(config.worker_batching_window_seconds),
                max_concurrency=config.worker_max_concurrency,
                report_batch_item_failures=True,
            )
        )
        buckets.payloads.grants.actions_on_object_keys(worker, PAYLOADS_PREFIX, "s3:GetObject")
        buckets.artifacts.grants.actions_on_object_keys(
            worker, "*", "s3:PutObject", "s3:AbortMultipartUpload"
        )
        bus.grant_put_events_to(worker)

        # Poller: queries the due-work index, records polled events (GetItem as
        # the receiver's) and reschedules items, re-enqueues owed work, offloads
        # large status answers, authenticates its status_url reads with the
        # API token.
        grant_items(table, poller, "dynamodb:GetItem", "dynamodb:UpdateItem")
        iam.Grant.add_to_principal(
            grantee=poller,
            actions=["dynamodb:Query"],
            resource_arns=[f"{table.table_arn}/index/{DUE_INDEX}"],
        )
        queues.queue.grant_send_messages(poller)
        buckets.payloads.grants.actions_on_object_keys(poller, PAYLOADS_PREFIX, "s3:PutObject")
        secrets.api_token.grant_read(poller)

        payloads_keys = object_keys_finding(buckets.payloads, PAYLOADS_PREFIX)
        for function in (receiver, worker, poller):
            acknowledge(
                _role(function),
                payloads_keys,
                "Event bodies are stored one object per job and digest under events/; "
                "object keys are not known in advance.",
            )
        acknowledge(
            _role(worker),
            object_keys_finding(buckets.artifacts, "*"),
            "Artifacts are stored one object per job and artifact; object keys are "
            "not known in advance. The bucket holds nothing else.",
        )

        PollerSchedule(self, "PollerSchedule", poller=poller, rate_minutes=config.poll_rate_minutes)
        api = WebhookApi(
            self,
            "WebhookApi",
            receiver=receiver,
            throttle_rate=config.throttle_rate,
            throttle_burst=config.throttle_burst,
            log_retention=config.log_retention,
            removal_policy=removal,
        )
        monitoring = Monitoring(
            self,
            "Monitoring",
            watched=Monitored(
                api=api.api,
                api_stage=api.stage,
                receiver=receiver,
                worker=worker,
                poller=poller,
                queue=queues.queue,
                dlq=queues.dlq,
            ),
            dashboard_name=name,
            alarm_email=config.alarm_email,
            signature_rejection_threshold=config.signature_rejection_threshold,
            api_client_error_threshold=config.api_client_error_threshold,
            removal_policy=removal,
        )

        outputs = {
            spec.OUTPUT_WEBHOOK_URL: (api.webhook_url, "Give this URL to Sume"),
            spec.OUTPUTS["table"]: (table.table_name, "Jobs table"),
            spec.OUTPUTS["queue_url"]: (queues.queue.queue_url, "Jobs queue"),
            spec.OUTPUTS["dlq_url"]: (queues.dlq.queue_url, "Jobs dead-letter queue"),
            spec.OUTPUTS["artifacts_bucket"]: (buckets.artifacts.bucket_name, "Artifacts"),
            spec.OUTPUTS["payloads_bucket"]: (buckets.payloads.bucket_name, "Large events"),
            spec.OUTPUTS["event_bus"]: (bus.event_bus_name, "Job announcements bus"),
            spec.OUTPUTS["signing_secret_arn"]: (
                secrets.signing.secret_arn,
                "Put Sume's signing secret here",
            ),
            spec.OUTPUTS["api_token_secret_arn"]: (
                secrets.api_token.secret_arn,
                "Put the Sume API token here",
            ),
            spec.OUTPUT_ALARM_TOPIC: (monitoring.topic.topic_arn, "Alarm notifications"),
            spec.OUTPUT_DASHBOARD: (monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        }
        for key, (value, description) in outputs.items():
            CfnOutput(self, key, value=value, description=description)


def grant_items(table: dynamodb.ITable, grantee: iam.IGrantable, *actions: str) -> None:
    """Item actions on the table itself (``Table.grant`` would add every index too)."""
    iam.Grant.add_to_principal(
        grantee=grantee, actions=list(actions), resource_arns=[table.table_arn]
    )


def object_keys_finding(bucket: s3.Bucket, pattern: str) -> str:
    """The cdk-nag IAM5 finding id for a grant on ``bucket``'s objects under ``pattern``."""
    cfn = bucket.node.default_child
    assert isinstance(cfn, CfnElement)
    logical_id = Stack.of(bucket).resolve(Stack.of(bucket).get_logical_id(cfn))
    return f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{pattern}]"


def _role(function: lambda_.Function) -> iam.IRole:
    assert function.role is not None
    return function.role


def _without_empty(environment: dict[str, str]) -> dict[str, str]:
    """Unset optional settings stay unset, so the code's defaults apply."""
    return {key: value for key, value in environment.items() if value}
