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
    }
)
# jsii (the CDK's, in the infra tier) and the JavaScript the tests run (the integrator
# example, ajv, quicktype) on the Node package-lock.json pins, however pytest was started.
from infra.node import use_project_node  # noqa: E402

use_project_node()


import functools  # noqa: E402
import gc  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import boto3  # noqa: E402
import botocore.loaders  # noqa: E402
import botocore.session  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Hypothesis times each example (a 200 ms deadline) and its input generation (the
# too_slow health check) on the machine's clock: on a busy machine a property failed
# for that alone. A hang is pytest's timeout's to catch.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

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


def pytest_collection_finish(session: Any) -> None:
    """What collection built (every test module, pytest, botocore, moto, the CDK where
    imported) lives to the end: frozen, a full collection walks only what tests make
    (about 6 % of a moto test file's CPU)."""
    gc.collect()
    gc.freeze()


# Under xdist, the slowest units go out first and the unit tier's many small files
# last, where they even out the workers' ends: in collection order (or xdist's
# own, by count of tests) a single e2e file of 12 s could start as the other worker
# ran out of work.
_TIER_ORDER = ("tests/infra/", "tests/e2e/", "tests/integration/")


def _tier_rank(item: Any) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((n for n, tier in enumerate(_TIER_ORDER) if path.startswith(tier)), 3)


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if hasattr(config, "workerinput") and config.getvalue("dist") == "loadfile":
        # Stable, so the order inside a tier (the infra tier's own) stays.
        items.sort(key=_tier_rank)


def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """``--dist loadfile``, with the infra tier as one unit: its synth (and cfn-lint on the
    templates) costs seconds of CPU per process, so one worker builds it, not both. Each
    other file stays a unit, so its module fixtures are built once. Units go out in the
    workers' collection order (``_tier_rank``), not by their count of tests."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False

    class InfraAsOneFile(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/infra" if path.startswith("tests/infra/") else path

    return InfraAsOneFile(config, log)


@functools.lru_cache(maxsize=4)
def _session_with(builtin_handlers: tuple[Any, ...]) -> boto3.session.Session:
    return boto3.session.Session()


@pytest.fixture(scope="session", autouse=True)
def one_botocore_session() -> Iterator[None]:
    """The functions' containers in a test process share one boto3 session: building
    one costs about 6 ms, and its first client 5 ms more than the next, in a container
    each test starts afresh (``runtime.reset()``). Each container still builds its own
    clients. A session reads the region and AWS_ENDPOINT_URL at each client it builds;
    only the credentials, the same fake ones everywhere here, it resolves once. A
    session takes botocore's built-in handlers when it is made, so one is made anew
    while a call counter (``devstack.counting``) is installed among them."""
    from botocore import handlers

    from sume.core import aws

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(aws, "_session", lambda: _session_with(tuple(handlers.BUILTIN_HANDLERS)))
        yield
