"""One ending per sequence: a retry repeats what was announced, a replay is numbered anew.

The receiver, the worker and the CLI on one moto server (``test_retries``'s stack);
both subscribers of ``tests.consumers`` read every announcement, in both orders,
and end where the item did (the stack fixture checks it after each test too).
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

from sume.core import runtime
from sume.core.names import DETAIL_TYPES
from tests.awscalls import hooking_new_clients
from tests.builders import job_body
from tests.consumers import assert_consumers_agree, ending
from tests.integration.conftest import CONFORMANCE
from tests.integration.test_retries import (  # noqa: F401 - fixtures
    Stack,
    origin,
    stack,
)

pytestmark = CONFORMANCE


def failing_first_finish(client: Any) -> None:
    """DynamoDB fails the first finish write (the one that sets ``processed_at``)."""
    finishes: list[str] = []

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if "processed_at = " in params.get("UpdateExpression", ""):
            finishes.append(params["Key"]["job_id"]["S"])
            if len(finishes) == 1:
                error = {"Code": "InternalServerError", "Message": "try again"}
                raise ClientError({"Error": error}, "UpdateItem")

    client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", refuse)


def test_a_retry_after_a_failed_finish_announces_the_same_ending_again(
    stack,  # noqa: F811
    origin,  # noqa: F811
):
    kept = origin.route("/s/a.bin", body=b"a" * 10)
    flaky = origin.route("/s/b.bin", status=404)
    job_id = stack.deliver(job_body(artifacts=[kept, flaky]))
    with hooking_new_clients(failing_first_finish):
        runtime.reset()
        # The 404 is announced, then the finish fails: SQS hands the message back.
        assert stack.worker.poll_once() == 1
        assert stack.job(job_id).state == "processing"
        # The origin now answers; the retry must still repeat the ending announced.
        origin.route("/s/b.bin", body=b"b" * 10)
        assert stack.work() == 1
    runtime.reset()

    done = stack.job(job_id)
    assert done.state == "processing_error"
    assert done.processing_error is not None and done.processing_error["code"] == "http_404"
    first, again = stack.announcements()
    assert ending(first) == ending(again) == (DETAIL_TYPES["processing_error"], 1, "http_404", 1)
    assert first["detail"] == again["detail"]
    assert origin.hits["/s/b.bin"] == 1  # the retry fetched nothing
    assert assert_consumers_agree(stack.announcements(), stack.table.get) == 1


def without_sequence(on: Stack, job_id: str) -> None:
    """The item as written before ``sequence`` existed."""
    boto3.client("dynamodb", endpoint_url=on.endpoint).update_item(
        TableName=on.names.table,
        Key={"job_id": {"S": job_id}},
        UpdateExpression="REMOVE #s",
        ExpressionAttributeNames={"#s": "sequence"},
    )


def test_a_replay_of_an_item_written_before_sequence_existed_is_numbered_2(
    stack,  # noqa: F811
    capsys,
):
    owed = stack.deliver(job_body(event="job.failed"))  # recorded before sequence existed
    without_sequence(stack, owed)
    finished = stack.deliver(job_body(event="job.canceled"))
    assert stack.work() == 2
    without_sequence(stack, finished)  # announced and finished before sequence existed

    for job_id in (owed, finished):
        code, out = stack.cli(capsys, "replay", job_id)
        assert code == 0, out
    assert stack.work() == 2

    numbered = sorted(
        (e["detail"]["job_id"], e["detail"]["sequence"]) for e in stack.announcements()
    )
    assert numbered == sorted([(owed, 1), (owed, 2), (finished, 1), (finished, 2)])
    assert (stack.job(owed).sequence, stack.job(finished).sequence) == (2, 2)
    assert assert_consumers_agree(stack.announcements(), stack.table.get) == 2
