"""The whole system for one stage: composes the constructs.

Resources first, then the three functions (each one's environment and grants
live in its own module under ``infra/functions/``), then what calls them
(API, schedule, registration events), what watches them (monitoring), the
event schemas and the outputs.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, CfnOutput, Environment, RemovalPolicy, Stack, Tags
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import spec
from infra.api import WebhookApi
from infra.capacity import poller_runs
from infra.config import StageConfig
from infra.expiry import EXPIRY_HOURS, TableExpiry
from infra.functions.factory import FunctionFactory
from infra.functions.poller import PollerFunction
from infra.functions.receiver import ReceiverFunction
from infra.functions.worker import WorkerFunction
from infra.messaging import AnnouncementBus, JobsQueue
from infra.monitoring import Monitored, Monitoring
from infra.regions import FailoverEndpoint, RegionPlan
from infra.registration import JobRegistrations
from infra.scheduling import PollerSchedule
from infra.schemas.registry import EventSchemas
from infra.secrets import SumeSecrets
from infra.storage import Buckets, JobsTableResource, Replication
from sume.core.names import REGISTRATION_DETAIL_TYPE, SERVICE_NAME, WEBHOOK_PATH, Env


class SumeWebhooksStack(Stack):
    """One stage in one region.

    With a ``plan`` (the multi-region deployment, infra/regions.py) there is
    one of these in each of its regions, under the same stack name, so the
    ops CLI finds each by stage and region alike. The primary region's holds
    the MRSC global table, the other's uses its replica there by name.
    """

    def __init__(
        self,
        scope: Construct,
        config: StageConfig,
        plan: RegionPlan | None = None,
        region: str | None = None,
        **kwargs: Any,
    ) -> None:
        name = spec.stack_name(config.stage)
        construct_id, description = name, f"Sume webhook receiver ({config.stage})"
        if plan is not None and region is not None:
            construct_id = f"{name}-{region}"
            description = f"Sume webhook receiver ({config.stage}, {region})"
            kwargs["env"] = Environment(region=region)
        super().__init__(
            scope,
            construct_id,
            stack_name=name,
            description=description,
            termination_protection=not config.is_dev,
            **kwargs,
        )
        Tags.of(self).add("service", SERVICE_NAME)
        Tags.of(self).add("stage", config.stage)
        removal = RemovalPolicy.DESTROY if config.is_dev else RemovalPolicy.RETAIN

        table: dynamodb.ITable
        if plan is not None and region is not None and region != plan.primary:
            table = dynamodb.TableV2.from_table_name(
                self, "Jobs", spec.global_table_name(config.stage)
            )
        else:
            table = JobsTableResource(
                self,
                "Jobs",
                is_dev=config.is_dev,
                warm_writes_per_second=config.table_warm_writes_per_second,
                warm_reads_per_second=config.table_warm_reads_per_second,
                due_index_before=config.due_index_migration is not None,
                replication=_replication(plan, spec.global_table_name(config.stage))
                if plan is not None
                else None,
            ).table
        queues = JobsQueue(self, "JobsQueue", is_dev=config.is_dev)
        buckets = Buckets(
            self,
            "Buckets",
            is_dev=config.is_dev,
            payloads_expire_days=config.payloads_expire_days,
            artifacts_infrequent_access_days=config.artifacts_infrequent_access_days,
            payloads_bucket_name=payloads_bucket_name(config.stage, region)
            if plan is not None and region is not None
            else None,
        )
        announcements = AnnouncementBus(
            self,
            "Announcements",
            bus_name=f"{name}-jobs",
            archive_days=config.announcements_archive_days,
        )
        secrets = SumeSecrets(self, "Secrets", is_dev=config.is_dev)

        factory = FunctionFactory(
            self,
            "Functions",
            table=table,
            queue=queues.queue,
            log_retention=logs.RetentionDays[config.log_retention],
            log_level=config.log_level,
            removal_policy=removal,
            due_shards=config.due_shards,
        )
        receiver = ReceiverFunction(
            factory,
            "Receiver",
            payloads=buckets.payloads,
            signing_secret=secrets.signing,
            reserved_concurrency=config.receiver_reserved_concurrency,
        )
        worker = WorkerFunction(
            factory,
            "Worker",
            payloads=buckets.payloads,
            artifacts=buckets.artifacts,
            bus=announcements.bus,
            retention_days=config.retention_days,
            artifact_allowed_hosts=config.artifact_allowed_hosts,
            batch_size=config.worker_batch_size,
            batching_window_seconds=config.worker_batching_window_seconds,
            max_concurrency=config.worker_max_concurrency,
        )
        poller = PollerFunction(
            factory,
            "Poller",
            payloads=buckets.payloads,
            bus=announcements.bus,
            api_token=secrets.api_token,
            status_allowed_hosts=config.status_allowed_hosts,
            due_index_migration=config.due_index_migration,
        )

        poller.hold_sweeps_while_paused(worker.jobs_source)

        if plan is not None and region is not None:
            # A large event in both regions' buckets before Sume is answered, so
            # either region's worker reads it while the other is down
            # (docs/regions.md, "A large event").
            peer = plan.other(region)
            peer_payloads = payloads_bucket_name(config.stage, peer)
            receiver.take_peer_payloads(peer, peer_payloads)
            poller.take_peer_payloads(peer, peer_payloads)
            worker.grant_peer_payloads(peer_payloads, "s3:GetObject")
            # So that a body its own bucket lacks is answered NoSuchKey, not
            # AccessDenied: the worker then reads it from the recording region's.
            iam.Grant.add_to_principal(
                grantee=worker.function,
                actions=["s3:ListBucket"],
                resource_arns=[buckets.payloads.bucket_arn],
            )
            TableExpiry(
                self,
                "Expiry",
                poller=poller,
                hour=EXPIRY_HOURS[plan.regions.index(region)],
            )
            poller.function.add_environment(Env.RETENTION_DAYS, str(config.retention_days))

        schedule = PollerSchedule(
            self,
            "PollerSchedule",
            poller=poller.function,
            rate_minutes=config.poll_rate_minutes,
            removal_policy=removal,
            leases_replication=_replication(plan, f"{name}-shard-leases")
            if plan is not None
            else None,
            leases_replica=plan is not None and region != plan.primary,
        )
        poller.take_rounds(
            schedule.shards_queue,
            schedule.leases,
            due_shards_previous=config.due_shards_previous,
            shards_per_run=config.poller_shards_per_run,
            max_concurrency=poller_runs(
                config.due_shards, config.due_shards_previous, config.poller_shards_per_run
            ),
            # Two regions' ticks of one period name one round (sume.polling.fanout.round_of).
            round_seconds=config.poll_rate_minutes * 60 if plan is not None else None,
        )
        api = WebhookApi(
            self,
            "WebhookApi",
            receiver=receiver.live,
            throttle_rate=config.throttle_rate,
            throttle_burst=config.throttle_burst,
            log_retention=logs.RetentionDays[config.log_retention],
            removal_policy=removal,
        )
        monitoring = Monitoring(
            self,
            "Monitoring",
            watched=Monitored(
                api=api.api,
                api_stage=api.stage,
                receiver=receiver.function,
                worker=worker.function,
                poller=poller.function,
                queue=queues.queue,
                dlq=queues.dlq,
                schedule=schedule.rule,
                shards_queue=schedule.shards_queue,
                access_logs=api.access_logs,
            ),
            dashboard_name=name,
            stage=config.stage,
            alarm_email=config.alarm_email,
            signature_rejection_threshold=config.signature_rejection_threshold,
            api_client_error_threshold=config.api_client_error_threshold,
            silence=config.silence,
            removal_policy=removal,
            serving_gated=plan is not None,
        )
        registrations = JobRegistrations(
            self,
            "Registrations",
            bus=announcements.bus,
            policy_name=f"{name}-register-jobs",
            is_dev=config.is_dev,
        )
        poller.take_registrations(
            registrations.queue, registrations.dlq, config.registrations_max_concurrency
        )
        registrations.watch(monitoring)
        schemas = EventSchemas(self, "Schemas", registry_name=f"{name}-events")

        webhook_url = api.webhook_url
        regional: dict[str, tuple[str, str]] = {}
        if plan is not None and region is not None:
            endpoint = FailoverEndpoint(
                self,
                "Failover",
                plan=plan,
                region=region,
                api=api.api,
                stage=api.stage,
                alarm_topic=monitoring.topic,
            )
            webhook_url = f"https://{endpoint.webhook_host}{WEBHOOK_PATH}"
            endpoint.gauge_serving(poller.function)
            regional = {
                spec.OUTPUT_REGION_WEBHOOK_URL: (
                    api.webhook_url,
                    "This region's own endpoint (Route 53 asks its /health)",
                ),
                spec.OUTPUT_HEALTH_CHECK: (
                    endpoint.health_check.attr_health_check_id,
                    "Route 53 health check of this region",
                ),
            }

        outputs = {
            spec.OUTPUT_WEBHOOK_URL: (webhook_url, "Give this URL to Sume"),
            **regional,
            spec.OUTPUTS["table"]: (table.table_name, "Jobs table"),
            spec.OUTPUTS["queue_url"]: (queues.queue.queue_url, "Jobs queue"),
            spec.OUTPUTS["dlq_url"]: (queues.dlq.queue_url, "Jobs dead-letter queue"),
            spec.OUTPUTS["artifacts_bucket"]: (buckets.artifacts.bucket_name, "Artifacts"),
            spec.OUTPUTS["payloads_bucket"]: (buckets.payloads.bucket_name, "Large events"),
            spec.OUTPUTS["event_bus"]: (announcements.bus.event_bus_name, "Job announcements bus"),
            spec.OUTPUTS["announcements_archive"]: (
                announcements.archive.archive_name,
                "Archive of the announcements, for replays to one rule",
            ),
            spec.OUTPUTS["signing_secret_arn"]: (
                secrets.signing.secret_arn,
                "Put Sume's signing secret here",
            ),
            spec.OUTPUTS["api_token_secret_arn"]: (
                secrets.api_token.secret_arn,
                "Put the Sume API token here",
            ),
            spec.OUTPUTS["registrations_queue_url"]: (
                registrations.queue.queue_url,
                "Registration events, queued for the poller",
            ),
            spec.OUTPUTS["registrations_dlq_url"]: (
                registrations.dlq.queue_url,
                "Registration events that did not register",
            ),
            spec.OUTPUTS["shards_queue_url"]: (
                schedule.shards_queue.queue_url,
                "A poller round's assignments, one per group of due-work shards",
            ),
            spec.OUTPUTS["leases_table"]: (
                schedule.leases.table_name,
                "Which poller run holds each due-work shard",
            ),
            spec.OUTPUT_REGISTRATION_DETAIL_TYPE: (
                REGISTRATION_DETAIL_TYPE,
                "Put this detail-type on the EventBusName bus to register a job",
            ),
            spec.OUTPUT_REGISTRATION_POLICY: (
                registrations.put_policy.managed_policy_arn,
                "Attach to an application's role to let it register jobs by event",
            ),
            spec.OUTPUT_SCHEMA_REGISTRY: (
                schemas.registry.attr_registry_name,
                "JSON Schemas of the events on the bus",
            ),
            spec.OUTPUT_ALARM_TOPIC: (monitoring.topic.topic_arn, "Alarm notifications"),
            spec.OUTPUT_DASHBOARD: (monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
            spec.OUTPUT_CAPACITY: (
                str(config.capacity.jobs_per_second),
                f"Sume jobs/s this stage takes at the worst case "
                f"({config.capacity.requests_per_second} requests/s)",
            ),
            spec.OUTPUT_CAPACITY_BOUND_BY: (
                config.capacity.bound_by(),
                "What binds first past that: raise it (docs/operations.md, Capacity plan)",
            ),
        }
        for key, (value, description) in outputs.items():
            CfnOutput(self, key, value=value, description=description)


def _replication(plan: RegionPlan, table_name: str) -> Replication:
    """A table the primary's stack makes one MRSC global table of the plan's regions."""
    return Replication(
        table_name=table_name,
        replica_region=plan.other(plan.primary),
        witness_region=plan.witness_region,
    )


def payloads_bucket_name(stage: str, region: str) -> str:
    """A region's payloads bucket, two regions only: named so the other region's stack
    knows it (globally unique by account and region; at most 63 characters)."""
    return f"{stage}-sume-events-{Aws.ACCOUNT_ID}-{region}"
