"""Test setup shared by every tier: no AWS account, no network beyond loopback."""

from __future__ import annotations

import os

# Set before anything imports boto3 or Powertools. Fake credentials and a
# region, and none of the developer's real AWS settings leak in.
for _var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_var, None)
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_DEV": "false",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    }
)


import functools  # noqa: E402
import gc  # noqa: E402
from typing import Any  # noqa: E402

import botocore.loaders  # noqa: E402
import botocore.session  # noqa: E402

# Every new botocore session parses each service's JSON model again (about
# 0.05 s a service), and tests make sessions all the time: each mock_aws gives
# boto3.client() a fresh default session, and runtime.reset() (a fresh
# container) drops the handlers' one. The models are read-only data, so one
# loader serves every session in the test process: each session still builds
# its own clients, as a container does. Not in production code: Lambda keeps
# one session per container (sume.core.aws), which this stands in for.
botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)

# A full collection walks the whole heap (botocore's models, moto's backends: a few
# million objects, 0.1-0.3 s each), and at the default thresholds (700, 10, 10) a
# moto test's churn ran one every few tests: a fifth of the moto tiers' CPU. Young
# collections 30 times rarer still reclaim each test's cycles long before the next
# full one; peak memory grows by a tenth. The product's processes keep the defaults.
gc.set_threshold(20_000, 10, 10)


def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """``--dist loadfile``, with the infra tier as one unit: its synth (and cfn-lint on the
    templates) costs seconds of CPU per process, so one worker builds it, not both. Each
    other file stays a unit, so its module fixtures are built once."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class InfraAsOneFile(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/infra" if path.startswith("tests/infra/") else path

    return InfraAsOneFile(config, log)
