"""The MRSC jobs table's expiry of ended jobs (two regions only: an MRSC table has no TTL).

Once a day, at this region's hour, a rule hands the poller the expiry's event
(``sume.polling.expiry``); the single-region table keeps its TTL and has none of this.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.functions.poller import PollerFunction
from infra.nag import acknowledge
from sume.core.names import EXPIRY_EVENT, REPORT_INDEX

# UTC hours of the two regions' runs, half a day apart: neither races the
# other, and while one region is down the other's run still comes.
EXPIRY_HOURS: Final = (3, 15)


class TableExpiry(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, poller: PollerFunction, hour: int
    ) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Rule",
            description="Deletes ended Sume jobs past their retention (the MRSC table has no TTL)",
            schedule=events.Schedule.cron(minute="0", hour=str(hour)),
            targets=[
                targets.LambdaFunction(
                    poller.function,
                    event=events.RuleTargetInput.from_object({EXPIRY_EVENT: True}),
                    retry_attempts=0,
                    max_event_age=Duration.hours(1),
                )
            ],
        )
        acknowledge(
            self.rule,
            "Serverless-EventBusDLQ",
            "A missed expiry run is not retried: the next day's run deletes everything "
            "the missed one would have (its query reaches back EXPIRY_LOOKBACK_DAYS).",
        )
        # The report index's keys, the jobs' state (BatchGetItem), the
        # conditional delete.
        iam.Grant.add_to_principal(
            grantee=poller.function,
            actions=["dynamodb:Query"],
            resource_arns=[f"{poller.table.table_arn}/index/{REPORT_INDEX}"],
        )
        poller.grant_items("dynamodb:BatchGetItem", "dynamodb:DeleteItem")
