"""The receiver (``functions/receiver.py``): verifies and records Sume's deliveries."""

from __future__ import annotations

from aws_cdk import Annotations, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager

from infra import spec
from infra.functions.factory import FunctionFactory, FunctionSpec, StackFunction
from infra.nag import acknowledge
from sume.core.names import Env


class ReceiverFunction(StackFunction):
    def __init__(
        self,
        factory: FunctionFactory,
        construct_id: str,
        *,
        payloads: s3.Bucket,
        signing_secret: secretsmanager.ISecret,
        reserved_concurrency: int | None,
    ) -> None:
        super().__init__(
            factory,
            construct_id,
            FunctionSpec(
                handler="receiver.handler",
                timeout_seconds=spec.RECEIVER_TIMEOUT,
                memory_mb=spec.RECEIVER_MEMORY_MB,
                description="Verifies and records Sume webhook deliveries",
                environment={
                    Env.SIGNING_SECRET_ARN: signing_secret.secret_arn,
                    Env.PAYLOADS_BUCKET_NAME: payloads.bucket_name,
                },
                # What the API throttle admits, so no other function (the
                # worker's or the poller's bursts, anything else in the
                # account) can take the capacity Sume's deliveries need.
                reserved_concurrency=reserved_concurrency,
                snap_start=spec.RECEIVER_SNAPSTART,
            ),
        )
        # What API Gateway invokes: SnapStart runs from published versions only,
        # never $LATEST. A deploy that changes the function publishes a new
        # version (its init runs then, and its snapshot is taken) and moves the
        # alias to it; the version it replaces is deleted, so one snapshot is
        # cached (and billed) at a time. Alarms and the dashboard stay on the
        # function: its FunctionName metrics add up every version and alias.
        version = self.function.current_version
        version.apply_removal_policy(RemovalPolicy.DESTROY)
        Annotations.of(self.function).acknowledge_warning(
            "@aws-cdk/aws-lambda:snapStartRequirePublish",
            "Published: current_version, invoked through the alias below.",
        )
        self.live: lambda_.IFunction = lambda_.Alias(
            self, "Live", alias_name=spec.RECEIVER_ALIAS, version=version
        )
        # One conditional UpdateItem per delivery (GetItem when a store
        # refuses it without handing back the stored item, see
        # sume.store.jobs.JobsTable), SendMessage for new work, large bodies to the
        # payloads bucket, the signing secret.
        self.grant_items("dynamodb:GetItem", "dynamodb:UpdateItem")
        self.queue.grant_send_messages(self.function)
        self.grant_payloads(payloads, "s3:PutObject")
        signing_secret.grant_read(self.function)
        acknowledge(
            self.function,
            "Serverless-LambdaDLQ",
            "Invoked synchronously by API Gateway only: a failed delivery is answered 5xx to "
            "Sume, which retries it; there is no asynchronous event to keep.",
        )
