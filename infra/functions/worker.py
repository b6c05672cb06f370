"""The worker (``functions/worker.py``): each recorded job's follow-up work, once."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_s3 as s3

from infra import spec
from infra.functions.factory import FunctionFactory, FunctionSpec, StackFunction
from infra.nag import acknowledge
from sume.core.names import Env


class WorkerFunction(StackFunction):
    def __init__(
        self,
        factory: FunctionFactory,
        construct_id: str,
        *,
        payloads: s3.Bucket,
        artifacts: s3.Bucket,
        bus: events.IEventBus,
        retention_days: int,
        artifact_allowed_hosts: str,
        batch_size: int,
        batching_window_seconds: int,
        max_concurrency: int,
    ) -> None:
        super().__init__(
            factory,
            construct_id,
            FunctionSpec(
                handler="worker.handler",
                timeout_seconds=spec.WORKER_TIMEOUT,
                memory_mb=spec.WORKER_MEMORY_MB,
                description="Archives artifacts of recorded jobs and announces them",
                environment={
                    Env.PAYLOADS_BUCKET_NAME: payloads.bucket_name,
                    Env.ARTIFACTS_BUCKET_NAME: artifacts.bucket_name,
                    Env.EVENT_BUS_NAME: bus.event_bus_name,
                    Env.RETENTION_DAYS: str(retention_days),
                    Env.ARTIFACT_ALLOWED_HOSTS: artifact_allowed_hosts,
                    **spec.worker_queue_environment(),
                },
            ),
        )
        # Claims/finishes items (GetItem as the receiver's, for a refused
        # claim), consumes the queue, reads large bodies, uploads artifacts
        # (multipart for big ones, aborted on failure), announces outcomes.
        self.grant_items("dynamodb:GetItem", "dynamodb:UpdateItem")
        self.jobs_source = event_sources.SqsEventSource(
            self.queue,
            batch_size=batch_size,
            max_batching_window=Duration.seconds(batching_window_seconds),
            max_concurrency=max_concurrency,
            report_batch_item_failures=True,
        )
        """The worker's switch (``sume-webhooks pause worker`` turns it off)."""
        self.function.add_event_source(self.jobs_source)
        for rule in ("Serverless-LambdaDLQ", "Serverless-LambdaEventSourceMappingDestination"):
            acknowledge(
                self.function,
                rule,
                "Invoked by its SQS event source only, which takes no on-failure destination "
                "(Lambda has them for streams and Kafka): a message that keeps failing goes to "
                "the jobs queue's own DLQ after its receives (redrive policy, DlqNotEmpty alarm).",
            )
        self.grant_payloads(payloads, "s3:GetObject")
        self.grant_object_keys(
            artifacts,
            "*",
            "s3:PutObject",
            "s3:AbortMultipartUpload",
            unknown_keys="Artifacts are stored one object per job and artifact; object keys "
            "are not known in advance. The bucket holds nothing else.",
        )
        bus.grant_put_events_to(self.function)
