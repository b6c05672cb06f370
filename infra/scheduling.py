"""The poller's schedule: status polls and the sweep of owed work."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.nag import acknowledge


class PollerSchedule(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        poller: lambda_.IFunction,
        rate_minutes: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Rule",
            description="Runs the Sume poller (status polls, sweep of owed work)",
            schedule=events.Schedule.rate(Duration.minutes(rate_minutes)),
            # A missed run is not retried: the next tick queries the same
            # due-work index and finds everything the missed one would have.
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
            "nothing, and the next tick's run finds everything the missed one would have.",
        )
