"""Secrets Manager answered at botocore's ``before-send`` on one client (the cold-start probes'
secret read): serialisation, SigV4 signing and parsing run as against AWS, the round trip not."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from botocore.awsrequest import AWSResponse

SECRET = "whsec_bench_cold_start"  # noqa: S105 - only this stub ever answers it
ANSWER = {
    "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:sume-bench-AbCdEf",
    "Name": "sume-bench",
    "VersionId": "00000000-0000-0000-0000-000000000001",
    "SecretString": SECRET,
    "VersionStages": ["AWSCURRENT"],
    "CreatedDate": 1_700_000_000,
}


def answer_secrets(client: Any) -> None:
    def send(request: Any, **_: Any) -> AWSResponse:
        body = SimpleNamespace(stream=lambda: iter([json.dumps(ANSWER).encode()]))
        return AWSResponse(request.url, 200, {"content-type": "application/x-amz-json-1.1"}, body)

    client.meta.events.register("before-send.secrets-manager.GetSecretValue", send)
