import json

import boto3

import receiver
from tests.builders import LambdaContext, delivery_event, job_body


def test_new_then_duplicate(aws):
    body = job_body("job_1")
    r1 = receiver.handler(delivery_event(body), LambdaContext())
    r2 = receiver.handler(delivery_event(body), LambdaContext())
    assert r1["statusCode"] == 200, r1
    assert json.loads(r1["body"]) == {"result": "new", "job_id": "job_1"}
    assert json.loads(r2["body"])["result"] == "duplicate"
    item = boto3.client("dynamodb").get_item(TableName=aws.table, Key={"job_id": {"S": "job_1"}})[
        "Item"
    ]
    assert item["deliveries"]["N"] == "2"
    assert item["state"]["S"] == "received"
    msgs = boto3.client("sqs").receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10)
    assert [m["Body"] for m in msgs["Messages"]] == ["job_1"]
