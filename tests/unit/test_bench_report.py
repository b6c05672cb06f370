"""The arithmetic behind the artifact and poller sections: limits, ratios, capacity."""

from collections import Counter

import pytest

from bench import capacity, cost
from bench.artifacts import (
    CAPPED,
    FULL,
    ArtifactsReport,
    Case,
    Role,
    Row,
    mb_per_second,
    overlapped_limit,
    problems,
)
from bench.copier import Result

MiB = 1024 * 1024


def result(seconds, python_peak=None):
    return Result(seconds, 0.1, 64 * MiB, None, python_peak, 50 * MiB, 60 * MiB)


def row(label, role, speed, seconds, connections=1, python_peak=None):
    timed = [result(s) for s in seconds]
    return Row(Case(label, label, role, speed, connections), timed, result(99, python_peak))


def report(*rows):
    return ArtifactsReport(64 * MiB, 8 * MiB, 5 * 1024 * MiB, 2, 4, 4, 270.0, 20e6, list(rows))


def test_the_limit_of_an_overlapped_copy_is_the_slower_floor():
    assert overlapped_limit(2.0, 3.0) == 3.0
    assert overlapped_limit(4.0, 3.0) == 4.0
    assert mb_per_second(50_000_000, 2.0) == 25.0


def test_each_row_counts_its_fastest_round():
    fast = row("ours", Role.OURS, FULL, [3.0, 2.5, 4.0])
    assert fast.seconds == 2.5


def test_ours_is_measured_against_the_limit_at_its_own_speed():
    rows = [
        row("upload", Role.UPLOAD_FLOOR, None, [2.0]),
        row("download", Role.DOWNLOAD_FLOOR, FULL, [0.5]),
        row("ours", Role.OURS, FULL, [3.0]),
        row("download", Role.DOWNLOAD_FLOOR, CAPPED, [4.0]),
        row("ours", Role.OURS, CAPPED, [6.0]),
    ]
    r = report(*rows)
    assert r.limit(FULL) == 2.0
    assert r.limit(CAPPED) == 4.0
    assert r.over_limit(rows[2]) == pytest.approx(1.5)
    assert r.over_limit(rows[4]) == pytest.approx(1.5)
    assert r.over_limit(rows[0]) is None


def test_a_ranged_copy_under_the_cap_has_no_one_connection_limit():
    rows = [
        row("upload", Role.UPLOAD_FLOOR, None, [2.0]),
        row("download", Role.DOWNLOAD_FLOOR, FULL, [0.5]),
        row("download", Role.DOWNLOAD_FLOOR, CAPPED, [4.0]),
        row("ranged", Role.OURS, FULL, [2.2], connections=4),
        row("ranged", Role.OURS, CAPPED, [2.0], connections=4),
    ]
    r = report(*rows)
    assert r.over_limit(rows[3]) == pytest.approx(1.1)
    assert r.over_limit(rows[4]) is None


def test_no_limit_without_both_floors():
    r = report(row("download", Role.DOWNLOAD_FLOOR, FULL, [0.5]))
    assert r.limit(FULL) is None
    assert r.over_limit(row("ours", Role.OURS, FULL, [1.0])) is None


def test_ranged_speedup_is_unknown_until_a_ranged_copy_is_measured():
    single = row("one stream", Role.OURS, CAPPED, [12.0])
    assert report(single).ranged_speedup(CAPPED) is None
    ranged = [
        row("ranged 4", Role.OURS, CAPPED, [4.0], connections=4),
        row("ranged 8", Role.OURS, CAPPED, [3.0], connections=8),
    ]
    assert report(single, *ranged).ranged_speedup(CAPPED) == 4.0
    assert report(single, *ranged).ranged_speedup(FULL) is None


def test_memory_is_ours_worst_python_peak_against_parts_and_framing():
    r = report(
        row("upload", Role.UPLOAD_FLOOR, None, [1.0], python_peak=80 * MiB),
        row("ours", Role.OURS, FULL, [1.0], python_peak=12 * MiB),
        row("ours", Role.OURS, CAPPED, [1.0], python_peak=20 * MiB),
    )
    assert r.python_peak() == 20 * MiB
    assert r.bound_parts == 8
    assert r.bound_bytes == 8 * 8 * MiB + 4 * 2 * MiB


def test_backlog_a_schedule_keeps_up_with():
    # 100 polls/s for 95 s every 300 s; each job due every 900 s.
    assert capacity.keeps_up_with(100, 95, 900, 300) == pytest.approx(28_500)
    # Twice the interval, twice the backlog; twice as often, too.
    assert capacity.keeps_up_with(100, 95, 1800, 300) == pytest.approx(57_000)
    assert capacity.keeps_up_with(100, 95, 900, 150) == pytest.approx(57_000)


def test_capacity_rows_count_the_jobs_tables_calls_apart_from_the_leases():
    runs = [
        capacity.Run(shards=[0, 1], polled=300, seconds=10, calls={}),
        capacity.Run(shards=[2, 3], polled=200, seconds=9, calls={}),
    ]
    calls = Counter({"dynamodb.PutItem": 4, "dynamodb.Query": 10, "dynamodb.UpdateItem": 504})
    row = capacity.Row(runs=2, due=1000, window=8, seconds=10, polled=500, calls=calls, each=runs)
    one = capacity.Row(runs=1, due=1000, window=8, seconds=10, polled=250, calls=Counter())
    report = capacity.CapacityReport(
        delay=0.5,
        parallel=2,
        deployed_parallel=32,
        budget=110,
        reserve=15,
        every=300,
        intervals=(900, 21600),
        rows=[one, row],
    )
    assert row.polled_per_second == 50
    assert row.dynamodb_calls == 518
    # 4 claims, 4 releases: the rest is an update per poll and a page per 50.
    assert row.lease_calls == 8
    assert row.job_calls_per_polled_job == pytest.approx(1.02)
    assert row.calls_per_polled_job == pytest.approx(1.036)
    assert report.growth(row) == 2
    assert report.window == 95
    assert report.backlog(50, 900) == pytest.approx(50 * 95 * 900 / 300)


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
