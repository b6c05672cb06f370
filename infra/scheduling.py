"""The poller's rounds: the schedule's tick, the shards queue its assignments wait in, and
the shard leases table (``sume.polling.fanout``; docs/poller.md, "One round")."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import spec
from infra.nag import acknowledge
from infra.storage import Replication, key_attributes


class PollerSchedule(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        poller: lambda_.IFunction,
        rate_minutes: int,
        removal_policy: RemovalPolicy,
        leases_replication: Replication | None = None,
        leases_replica: bool = False,
    ) -> None:
        """``leases_replication``: the leases table is one MRSC global table of the
        regions (made by the primary's stack; ``leases_replica``, the other region's
        stack uses it by name), so both regions' runs claim each shard in one place."""
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Rule",
            description="Starts a Sume poller round (status polls, sweep of owed work)",
            schedule=events.Schedule.rate(Duration.minutes(rate_minutes)),
            # A missed tick is not retried: the next one fans out the same
            # due-work index and its runs find everything the missed one would have.
            targets=[
                targets.LambdaFunction(
                    poller, retry_attempts=0, max_event_age=Duration.minutes(rate_minutes)
                )
            ],
        )
        acknowledge(
            self.rule,
            "Serverless-EventBusDLQ",
            "A tick that cannot be delivered is dropped on purpose (no retries): it carries "
            "nothing, and the next tick's round finds everything the missed one would have.",
        )
        # Nothing in it outlives a round: no DLQ (below).
        self.shards_queue = sqs.Queue(
            self,
            "Shards",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(spec.SHARDS_VISIBILITY_TIMEOUT),
            retention_period=Duration.seconds(spec.shards_retention_seconds(rate_minutes)),
            removal_policy=removal_policy,
        )
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge(
                self.shards_queue,
                rule,
                "An assignment is worth its round only: a run that fails is retried while the "
                "round lasts, the message expires with it, and the next tick assigns every "
                "shard again. A dead letter could never be redriven to any use.",
            )
        definition = spec.leases_table_definition("leases")
        keys = key_attributes(definition, definition["KeySchema"])
        recovery = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True)
        self.leases: dynamodb.ITable
        if leases_replication is None:
            self.leases = dynamodb.Table(
                self,
                "Leases",
                **keys,
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                point_in_time_recovery_specification=recovery,
                removal_policy=removal_policy,
            )
        elif leases_replica:
            self.leases = dynamodb.TableV2.from_table_name(
                self, "Leases", leases_replication.table_name
            )
        else:
            self.leases = dynamodb.TableV2(
                self,
                "Leases",
                **leases_replication.table_props(),
                **keys,
                point_in_time_recovery_specification=recovery,
                removal_policy=removal_policy,
            )
