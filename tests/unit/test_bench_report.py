"""The arithmetic behind the artifact and poller sections: limits, ratios, capacity."""

from collections import Counter

import pytest

from bench import artifacts, capacity, cost
from bench.artifacts import FULL, SLOW, ArtifactsReport, Result, memory_bound, problems
from sume.working.settings import WorkerSettings

MiB = 1024 * 1024
SETTINGS = WorkerSettings.from_env(artifacts.copier_environment())


def result(seconds, python_peak=None):
    return Result(seconds, 0.1, 64 * MiB, None, python_peak, 50 * MiB, 60 * MiB)


def report(rounds):
    """Results by case from ``{(key, speed): [seconds per round]}``."""
    found = ArtifactsReport(64 * MiB, SETTINGS)
    for case, seconds in rounds.items():
        found.timed[case] = [result(s) for s in seconds]
    return found


def test_the_limit_of_an_overlapped_copy_is_the_slower_floor_round_by_round():
    r = report({("download", FULL): [1.0, 3.0, 1.0], ("upload", None): [2.0, 2.0, 2.0]})
    assert r.limits(FULL) == [2.0, 3.0, 2.0]


def test_ours_is_judged_on_the_median_of_the_rounds_ratios_to_their_limit():
    r = report(
        {
            ("download", FULL): [1.0, 1.0, 1.0],
            ("upload", None): [2.0, 4.0, 2.0],
            ("ranged", FULL): [2.2, 4.0, 3.0],
        }
    )
    # A slow round for moto slows the limit and ours alike: 1.1, 1.0, 1.5.
    assert r.over_limit("ranged", FULL) == pytest.approx([1.1, 1.0, 1.5])


def test_the_ranged_speedup_is_one_stream_over_ranged_round_by_round_at_the_slow_cap():
    r = report({("one stream", SLOW): [10.0, 12.0, 9.0], ("ranged", SLOW): [4.0, 3.0, 3.0]})
    assert r.ranged_speedup() == pytest.approx([2.5, 4.0, 3.0])


def test_the_slow_cap_copies_a_part_per_connection_the_others_the_size_asked():
    # Fewer parts than connections would leave connections idle and cap the speedup.
    r = report({})
    assert r.size_at(SLOW) == SETTINGS.artifact_connections * SETTINGS.part_size_bytes
    assert r.size_at(FULL) == r.size_at(None) == 64 * MiB


def test_memory_is_ours_worst_python_peak_against_parts_and_framing():
    r = report({})
    for key, speed, peak in (
        ("upload", None, 80),
        ("ranged", FULL, 12),
        ("one stream", artifacts.CAPPED, 20),
    ):
        r.traced[(key, speed)] = result(1.0, peak * MiB)
    assert r.python_peak() == 20 * MiB
    parts = SETTINGS.artifact_connections + SETTINGS.artifact_uploads
    framing = SETTINGS.artifact_uploads * 2 * MiB
    assert memory_bound(SETTINGS) == (parts, parts * SETTINGS.part_size_bytes + framing)


def test_backlog_a_schedule_keeps_up_with():
    # 100 polls/s for 95 s every 300 s; each job due every 900 s.
    assert capacity.keeps_up_with(100, 95, 900, 300) == pytest.approx(28_500)
    # Twice the interval, twice the backlog; twice as often, too.
    assert capacity.keeps_up_with(100, 95, 1800, 300) == pytest.approx(57_000)
    assert capacity.keeps_up_with(100, 95, 900, 150) == pytest.approx(57_000)


def test_capacity_rows_count_the_jobs_tables_calls_apart_from_the_leases():
    calls = Counter({"dynamodb.PutItem": 4, "dynamodb.Query": 10, "dynamodb.UpdateItem": 504})
    row = capacity.Row(2, seconds=10, polled=500, calls=calls, shards=[0, 1, 2, 3])
    one = capacity.Row(1, seconds=10, polled=300, calls=calls, shards=[0, 1])
    assert row.polled_per_second == 50
    # 4 claims, 4 releases: the rest is an update per poll and a page per 50.
    assert row.lease_calls == 8
    assert row.job_calls_per_polled_job == pytest.approx(1.02)
    assert row.calls_per_polled_job == pytest.approx(1.036)
    assert row.growth(one) == pytest.approx(500 / 300)


def test_cpu_worth_per_million_at_the_configured_memory():
    # 1 ms of a full vCPU is 1769/512 ms at 512 MB, billed at 0.5 GB.
    expected = 0.001 * 1769 / 512 * 0.5 * cost.LAMBDA_GB_SECOND * 1e6
    assert cost.cpu_per_million(1000, 512) == pytest.approx(expected)
    # From a full vCPU up, more memory buys no more CPU: the cost grows with it.
    assert cost.cpu_per_million(1000, 3538) == pytest.approx(2 * cost.cpu_per_million(1000, 1769))


def test_a_wrong_copy_is_named_not_measured():
    good = Result(1.0, 0.1, 100, "abc", None, 1, 1)
    assert problems(100, "abc", good, 100) == []
    assert problems(100, "abc", good, None) == []
    short = Result(1.0, 0.1, 90, "abc", None, 1, 1)
    assert problems(100, "abc", short, 100) == ["moved 90 bytes of 100"]
    assert problems(100, "def", good, 100) == ["SHA-256 differs from the origin's"]
    assert problems(100, "abc", good, 50) == ["S3 holds 50 bytes of 100"]
