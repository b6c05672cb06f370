"""Property-based bad input: never a 5xx, never an AWS call for a rejected request."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import receiver
from tests.awscalls import counting_aws_calls
from tests.builders import LambdaContext, apigw_event, job_body, raw_of, signed_headers
from tests.conftest import reset_handler_caches

ROOT = Path(__file__).resolve().parents[2]
header_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=200)
bodies = st.one_of(
    st.binary(max_size=512),
    st.builds(
        lambda d: json.dumps(d).encode(), st.dictionaries(st.text(max_size=8), st.text(max_size=8))
    ),
    st.just(raw_of(job_body("job_prop"))),
)
signatures = st.one_of(
    st.none(),
    header_text,
    st.lists(st.from_regex(r"sume-v1=[0-9a-f]{0,70}", fullmatch=True), max_size=12).map(",".join),
)
timestamps = st.one_of(st.none(), header_text, st.integers(-(10**12), 10**13).map(str))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    body=bodies,
    signature=signatures,
    timestamp=timestamps,
    method=st.sampled_from(["POST", "POST", "GET", "PUT", "DELETE"]),
    base64_encoded=st.booleans(),
)
def test_forged_requests_get_4xx_and_cost_nothing(
    aws, body, signature, timestamp, method, base64_encoded
):
    headers = {}
    if signature is not None:
        headers["x-sume-webhook-signature"] = signature
    if timestamp is not None:
        headers["x-sume-webhook-timestamp"] = timestamp
    event = apigw_event(
        body if base64_encoded else body.decode("utf-8", "replace").encode(),
        headers,
        method=method,
        base64_encoded=base64_encoded,
    )
    with counting_aws_calls() as calls:
        reset_handler_caches()
        response = receiver.handler(event, LambdaContext())
    assert 400 <= response["statusCode"] < 500
    assert calls.total == 0


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=st.binary(max_size=512))
def test_signed_garbage_is_never_5xx(aws, body):
    response = receiver.handler(
        apigw_event(body, signed_headers(body), base64_encoded=True), LambdaContext()
    )
    assert response["statusCode"] in {200, 400}


def test_importing_the_handlers_makes_no_aws_call():
    script = textwrap.dedent(
        """
        import sys
        sys.path[:0] = [{root!r}, {functions!r}]
        from tests.awscalls import counting_aws_calls
        with counting_aws_calls() as calls:
            import receiver
        print(sorted(calls.clients), calls.total)
        """
    ).format(root=str(ROOT), functions=str(ROOT / "functions"))
    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # a call would fail loudly
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    # The X-Ray SDK (behind Powertools' Tracer) builds its own sampling
    # client when imported; it makes no call. Ours are built on first use.
    assert out.stdout.strip() == "['xray'] 0"
