"""The capacity plan: what a stage takes in an account's quotas, and what binds first."""

from __future__ import annotations

import pytest

from infra.capacity import (
    RECEIVER_COLD_SECONDS,
    RECEIVER_WARM_SECONDS,
    Account,
    Fixed,
    capacity,
    checks,
    put_events_quota,
    receiver_busy,
    receiver_concurrency,
)
from infra.config import ConfigError, StageConfig

SUME_API = {"status_allowed_hosts": "api.sume.example"}


def _config(regions: tuple[str, ...] = (), **overrides: str) -> StageConfig:
    return _stage(overrides, regions)


def _stage(overrides: dict[str, str], regions: tuple[str, ...] = ()) -> StageConfig:
    return StageConfig.from_context("prod", lambda _key: None, {**SUME_API, **overrides}, regions)


def test_the_receiver_is_planned_from_measured_durations_not_a_second_each() -> None:
    # Issue 37: at 13 jobs/s the old plan reserved burst + rate x 1 s = 975 of a
    # default account's 1,000, and refused the prod stage.
    config = _config(sume_peak_jobs_per_second="13")
    busy = 260 * (RECEIVER_COLD_SECONDS + RECEIVER_WARM_SECONDS)
    assert receiver_busy(260) == pytest.approx(busy)
    assert config.receiver_reserved_concurrency == receiver_concurrency(13) == 272


def test_a_default_account_takes_sume_until_lambdas_quota_binds() -> None:
    config = _config()
    assert config.capacity.jobs_per_second == 40
    assert config.capacity.requests_per_second == 800
    assert config.capacity.bound_by() == "Lambda concurrent executions (1000)"
    assert _config(sume_peak_jobs_per_second="40").capacity.jobs_per_second == 40
    with pytest.raises(ConfigError, match=r"L-B99A9384 --desired-value 1002\), then set"):
        _config(sume_peak_jobs_per_second="41")


def test_raising_what_binds_shows_what_binds_next() -> None:
    steps = [
        ({}, 40, "Lambda concurrent executions (1000)"),
        ({"lambda_concurrency_quota": "20000"}, 128, "the due-work index's 16 shards (16000)"),
        (
            {"due_shards": "64"},
            200,
            "an SQS event source's 1000 instances (worker_max_concurrency) (1000)",
        ),
        ({"worker_max_concurrency": "1000"}, 250, "API Gateway throttle burst rate (5000)"),
        ({"api_burst_quota": "20000"}, 307, "DynamoDB table-level write throughput (40000)"),
        # A single-region stage's region is chosen at deploy: the lowest PutEvents quota.
        ({"dynamodb_table_quota": "100000"}, 400, "EventBridge PutEvents throttle limit (400)"),
        ({"eventbridge_put_events_quota": "100000"}, 500, "API Gateway throttle rate (10000)"),
    ]
    given: dict[str, str] = {}
    for raised, jobs, bound in steps:
        given.update(raised)
        found = _stage(given).capacity
        assert (found.jobs_per_second, found.bound_by()) == (jobs, bound), raised


def test_each_region_is_planned_on_its_own_quotas() -> None:
    """After a failover one region takes the whole load: the weaker region binds."""
    raised = {
        "lambda_concurrency_quota": "100000",
        "due_shards": "1000",
        "worker_max_concurrency": "1000",
        "api_burst_quota": "100000",
        "api_rate_quota": "100000",
        "dynamodb_table_quota": "1000000",
    }
    assert (put_events_quota("us-east-1"), put_events_quota("us-east-2")) == (10_000, 2_400)
    assert put_events_quota("af-south-1") == put_events_quota(None) == 400
    found = _config(("us-east-1", "us-east-2"), **raised).capacity
    assert (found.jobs_per_second, found.bound_by()) == (
        2400,
        "EventBridge PutEvents throttle limit (2400) in us-east-2",
    )
    with pytest.raises(ConfigError) as refused:
        _config(("us-east-1", "us-east-2"), sume_peak_jobs_per_second="2500", **raised)
    assert str(refused.value) == (
        "context sume_peak_jobs_per_second=2500 is past what this stage takes in us-east-2, "
        "2400 jobs/s (48000 requests/s at Sume's worst case): EventBridge PutEvents throttle "
        "limit binds (2500 needed, 2400 available): request 2500 in Service Quotas (aws "
        "service-quotas request-service-quota-increase --region us-east-2 --service-code "
        "events --quota-code L-9B653E91 --desired-value 2500), then set "
        "-c eventbridge_put_events_quota=2500"
    )
    # Raised in both (the key states it for every region), the next limit binds.
    found = _config(
        ("us-east-1", "us-east-2"), eventbridge_put_events_quota="10000", **raised
    ).capacity
    assert found.jobs_per_second > 2400
    assert "EventBridge" not in found.bound_by()


def test_the_plan_binds_where_every_need_first_exceeds_its_limit() -> None:
    """The search is exact: one job a second more fails, and the reported limit is why."""
    for account in (Account(None), Account("us-east-1", lambda_concurrency=5000)):
        fixed = Fixed(poller_runs=16, due_shards=16)
        found = capacity(account, fixed)
        assert all(c.fits for c in checks(found.jobs_per_second, account, fixed))
        failing = [c for c in checks(found.jobs_per_second + 1, account, fixed) if not c.fits]
        assert found.binds in failing
