"""The poller (``functions/poller.py``): polls silent jobs, sweeps owed work,
registers jobs by event."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs

from infra import spec
from infra.functions.factory import FunctionFactory, FunctionSpec, StackFunction
from infra.nag import acknowledge
from sume.core.names import DUE_INDEX, DUE_INDEX_BEFORE, Env


class PollerFunction(StackFunction):
    def __init__(
        self,
        factory: FunctionFactory,
        construct_id: str,
        *,
        payloads: s3.Bucket,
        bus: events.IEventBus,
        api_token: secretsmanager.ISecret,
        status_allowed_hosts: str,
        due_index_migration: str | None = None,
    ) -> None:
        super().__init__(
            factory,
            construct_id,
            FunctionSpec(
                handler="poller.handler",
                timeout_seconds=spec.POLLER_TIMEOUT,
                memory_mb=spec.POLLER_MEMORY_MB,
                description="Polls status_url of silent jobs and re-enqueues owed work",
                environment={
                    Env.PAYLOADS_BUCKET_NAME: payloads.bucket_name,
                    Env.SUME_API_TOKEN_ARN: api_token.secret_arn,
                    Env.STATUS_ALLOWED_HOSTS: status_allowed_hosts,
                    Env.EVENT_BUS_NAME: bus.event_bus_name,
                },
            ),
        )
        # A failed run is not retried: the next scheduled run redoes it.
        self.function.configure_async_invoke(retry_attempts=0)
        for rule in ("Serverless-LambdaDLQ", "Serverless-LambdaAsyncFailureDestination"):
            acknowledge(
                self.function,
                rule,
                "Its asynchronous events are the schedule's ticks, which carry nothing: the "
                "next run queries the same due-work index and redoes a failed one, and "
                "PollerErrors alarms on it; a kept tick could not be replayed to any use.",
            )
        # Queries the due-work index, records polled events (GetItem as the
        # receiver's) and reschedules items, re-enqueues owed work, offloads
        # large status answers, authenticates its status_url reads with the
        # API token.
        self.grant_items("dynamodb:GetItem", "dynamodb:UpdateItem")
        # While a live table migrates to a new due-work index (docs/operations.md,
        # "Changing an index's projection"): the old one is read until the new is
        # built ("add"), then the new ("switch"); either may be read meanwhile.
        read = [DUE_INDEX]
        if due_index_migration is not None:
            read.append(DUE_INDEX_BEFORE)
        if due_index_migration == "add":
            self.function.add_environment(Env.DUE_INDEX_NAME, DUE_INDEX_BEFORE)
        iam.Grant.add_to_principal(
            grantee=self.function,
            actions=["dynamodb:Query"],
            resource_arns=[f"{self.table.table_arn}/index/{name}" for name in read],
        )
        self.queue.grant_send_messages(self.function)
        self.grant_payloads(payloads, "s3:PutObject")
        api_token.grant_read(self.function)
        # A run announces the jobs it gives up (lost), and refused registrations
        # are announced on the bus they came from.
        bus.grant_put_events_to(self.function)

    def hold_sweeps_while_paused(self, worker: event_sources.SqsEventSource) -> None:
        """The sweep asks the worker's mapping and holds owed work while it is off
        (``sume.polling.held``): one GetEventSourceMapping a run that has any to sweep."""
        self.function.add_environment(
            Env.WORKER_EVENT_SOURCE_MAPPING, worker.event_source_mapping_id
        )
        iam.Grant.add_to_principal(
            grantee=self.function,
            actions=["lambda:GetEventSourceMapping"],
            resource_arns=[worker.event_source_mapping_arn],
        )

    def take_rounds(
        self,
        shards_queue: sqs.IQueue,
        leases: dynamodb.ITable,
        *,
        due_shards_previous: int | None,
        shards_per_run: int,
        max_concurrency: int,
        round_seconds: int | None = None,
    ) -> None:
        """A round's assignments (``infra/scheduling.py``) from the shards queue, one per run.

        The tick sends them; each run claims its shards in ``leases``. One
        message a run: each gets a whole invocation's time. ``max_concurrency``
        is the round's runs, so all of a round's shards are worked at once.
        """
        self.function.add_event_source(
            event_sources.SqsEventSource(
                shards_queue, batch_size=1, max_concurrency=max_concurrency
            )
        )
        shards_queue.grant_send_messages(self.function)
        leases.grant(self.function, "dynamodb:PutItem", "dynamodb:UpdateItem")
        environment = {
            Env.POLL_SHARDS_QUEUE_URL: shards_queue.queue_url,
            Env.SHARD_LEASES_TABLE_NAME: leases.table_name,
            Env.POLL_SHARDS_PER_RUN: str(shards_per_run),
        }
        if due_shards_previous is not None:
            environment[Env.DUE_SHARDS_PREVIOUS] = str(due_shards_previous)
        if round_seconds is not None:
            environment[Env.POLL_ROUND_SECONDS] = str(round_seconds)
        for key, value in environment.items():
            self.function.add_environment(key, value)

    def take_registrations(self, queue: sqs.IQueue, dlq: sqs.IQueue, max_concurrency: int) -> None:
        """Registration events (``infra/registration.py``) from their queue.

        The poller parks a refused event in the DLQ itself, at once, with its reason.
        ``max_concurrency`` caps the instances the queue may start: anyone holding
        the register-jobs policy can fill it, and a burst then waits in the queue
        instead of taking the account's shared concurrency.
        """
        self.function.add_event_source(
            event_sources.SqsEventSource(
                queue,
                batch_size=10,
                max_concurrency=max_concurrency,
                report_batch_item_failures=True,
            )
        )
        dlq.grant_send_messages(self.function)
        self.function.add_environment(Env.REGISTRATION_DLQ_URL, dlq.queue_url)
        acknowledge(
            self.function,
            "Serverless-LambdaEventSourceMappingDestination",
            "An SQS event source takes no on-failure destination (Lambda has them for "
            "streams and Kafka): a registration that keeps failing goes to the registrations "
            "queue's own DLQ after its receives, where refused ones are parked at once; a "
            "round's assignment expires with its round (infra/scheduling.py).",
        )
