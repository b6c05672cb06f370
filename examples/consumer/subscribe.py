"""Subscribe a queue to completed and lost Sume jobs: the EventBridge rule, as boto3 calls.

``docs/integrating.md`` has the same rule, queue and policy as CloudFormation.
"""

from __future__ import annotations

import json
from typing import Any

# Every completed job, and every job the poller gave up (a lost job that completes
# later is announced again, as completed); add "Sume Job Failed" etc. for the others.
PATTERN = {"source": ["sume.webhooks"], "detail-type": ["Sume Job Completed", "Sume Job Lost"]}


def subscribe(events: Any, sqs: Any, bus_name: str, name: str) -> str:
    """Create queue ``name`` and a rule on ``bus_name`` that fills it; return the queue URL."""
    queue_url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    rule_arn = events.put_rule(Name=name, EventBusName=bus_name, EventPattern=json.dumps(PATTERN))[
        "RuleArn"
    ]
    # EventBridge may send to the queue for this rule only.
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": json.dumps(policy)})
    events.put_targets(
        Rule=name, EventBusName=bus_name, Targets=[{"Id": "consumer", "Arn": queue_arn}]
    )
    return queue_url
