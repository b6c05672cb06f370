"""The local stack's switches of the work, kept in moto as AWS keeps them.

The worker and the poller run in this process, but moto holds what AWS would:
a function per handler, the SQS event source mappings (jobs queue -> worker;
registrations and shards queues -> poller) and the poller's schedule rule. The
local event sources ask them before each batch or tick, so
``sume-webhooks --endpoint-url ... pause worker`` stops the same loops a
deployed stage's would (docs/operations.md, "Pausing the work").
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.spec import DEFAULT_POLL_RATE_MINUTES, ResourceNames

Enabled = Callable[[], bool]

# moto invokes a mapping's function itself (in Docker) when a message reaches
# its queue; here the local event sources do, so moto's queue must not know it.
_UNHOOKED = "_sume_local_mappings"


def install() -> None:
    """Keep moto from invoking the local functions (idempotent, once per process)."""
    from moto.awslambda.models import LambdaBackend
    from moto.sqs.models import sqs_backends

    if getattr(LambdaBackend, _UNHOOKED, False):
        return
    original = LambdaBackend.create_event_source_mapping

    def create(self: Any, spec: dict[str, Any]) -> Any:
        mapping = original(self, spec)
        for queue in sqs_backends[self.account_id][self.region_name].queues.values():
            if queue.queue_arn == mapping.event_source_arn:
                queue.lambda_event_source_mappings.pop(mapping.function_arn, None)
        return mapping

    LambdaBackend.create_event_source_mapping = create  # type: ignore[method-assign]
    setattr(LambdaBackend, _UNHOOKED, True)


def _code() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        # Never run: the handlers run in the local stack's process.
        archive.writestr("local.py", "def handler(event, context):\n    raise RuntimeError\n")
    return buffer.getvalue()


@dataclass(frozen=True)
class Switches:
    lambda_: Any
    events: Any
    worker: str
    """UUID of the jobs queue's mapping."""
    registrations: str
    shards: str
    schedule: str
    """The poller's schedule rule."""

    def mapping(self, uuid: str) -> Enabled:
        def enabled() -> bool:
            try:
                state = self.lambda_.get_event_source_mapping(UUID=uuid)["State"]
            except self.lambda_.exceptions.ResourceNotFoundException:
                return False  # deleted: nothing reads the queue, as in AWS
            return bool(state == "Enabled")

        return enabled

    def rule(self) -> bool:
        return bool(self.events.describe_rule(Name=self.schedule)["State"] == "ENABLED")


def create_switches(clients: Callable[[str], Any], names: ResourceNames, prefix: str) -> Switches:
    iam, lambda_, sqs, events = (clients(s) for s in ("iam", "lambda", "sqs", "events"))
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "lambda.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    role = iam.create_role(
        RoleName=f"{prefix}-functions", AssumeRolePolicyDocument=json.dumps(trust)
    )
    code = _code()
    arns = {}
    for function in ("worker", "poller"):
        arns[function] = lambda_.create_function(
            FunctionName=f"{prefix}-{function}",
            Runtime="python3.13",
            Role=role["Role"]["Arn"],
            Handler="local.handler",
            Code={"ZipFile": code},
        )["FunctionArn"]

    def mapping(queue_url: str, function: str) -> str:
        arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        answer = lambda_.create_event_source_mapping(EventSourceArn=arn, FunctionName=function)
        return str(answer["UUID"])

    schedule = f"{prefix}-poller-schedule"
    events.put_rule(Name=schedule, ScheduleExpression=f"rate({DEFAULT_POLL_RATE_MINUTES} minutes)")
    events.put_targets(Rule=schedule, Targets=[{"Id": "poller", "Arn": arns["poller"]}])
    return Switches(
        lambda_,
        events,
        worker=mapping(names.queue_url, arns["worker"]),
        registrations=mapping(names.registrations_queue_url, arns["poller"]),
        shards=mapping(names.shards_queue_url, arns["poller"]),
        schedule=schedule,
    )
