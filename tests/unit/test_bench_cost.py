"""The bench's price model and helpers: plain arithmetic, checked by hand."""

import pytest

from bench import cost
from bench.harness import paired_difference, paired_ratios, spread
from devstack.counting import short


def test_write_units_round_up_per_started_kilobyte_and_never_below_one():
    assert cost.wru(0) == 1
    assert cost.wru(1024) == 1
    assert cost.wru(1025) == 2


def test_cost_per_million_of_a_new_delivery_at_a_full_vcpu():
    usage = cost.Usage(1000, ("dynamodb.UpdateItem", "sqs.SendMessage"), wru=1, sqs_requests=1)
    # 1 ms of CPU at a full vCPU, plus 5 ms DynamoDB and 8 ms SQS.
    assert cost.billed_ms(usage, 1769) == 14
    lines = cost.per_million(usage, memory_mb=1769)
    gb_seconds = 0.014 * 1769 / 1024
    assert lines["Lambda"] == pytest.approx(0.20 + gb_seconds * 0.0000133334 * 1e6)
    assert sum(lines.values()) == pytest.approx(1.00 + lines["Lambda"] + 0.625 + 0.40)


def test_less_memory_means_a_smaller_cpu_share():
    usage = cost.Usage(cpu_us=1000, calls=(), wru=0, sqs_requests=0)
    assert cost.billed_ms(usage, 1769) == 1
    assert cost.billed_ms(usage, 512) == 4  # 1 ms x 1769/512 = 3.46 ms, rounded up


def test_rest_api_front_changes_only_the_api_line():
    usage = cost.Usage(cpu_us=0, calls=(), wru=0, sqs_requests=0)
    http, rest = cost.per_million(usage, 512), cost.per_million(usage, 512, cost.REST_API_PER_M)
    assert sum(rest.values()) - sum(http.values()) == pytest.approx(2.50)


def test_short_groups_repeated_calls():
    calls = ["dynamodb.Query"] * 3 + ["sqs.SendMessage", "dynamodb.Query"]
    assert short(calls) == "Query x3 + SendMessage + Query"
    assert short([]) == "-"


def test_paired_statistics_compare_within_rounds():
    assert paired_ratios([2.0, 30.0, 4.0], [1.0, 10.0, 4.0]) == [2.0, 3.0, 1.0]
    assert paired_difference([5.0, 7.0, 9.0], [1.0, 1.0, 1.0]) == 6.0


def test_mrsc_pays_every_write_unit_in_both_replicas_and_nothing_else_more() -> None:
    single = cost.per_million(cost.Usage(5000.0, ("dynamodb.UpdateItem",), 2, 1), 512)
    both = cost.mrsc(single)
    assert both["DynamoDB"] == cost.MRSC_REPLICAS * single["DynamoDB"] == 2 * 2 * 0.625
    assert sum(both.values()) - sum(single.values()) == pytest.approx(single["DynamoDB"])
    rejected = cost.per_million(cost.Usage(500.0, (), 0, 0), 512)
    assert cost.mrsc(rejected) == rejected


def test_the_failover_fixed_cost_is_its_parts() -> None:
    fixed = cost.failover_fixed_month(512)
    assert fixed["health checks"] == 2 * cost.HEALTH_CHECK_MONTH + cost.ALARM_MONTH
    probes_a_month = 2 * cost.HEALTH_CHECKERS * cost.MONTH_S / cost.HEALTH_CHECK_INTERVAL_S
    # Each probe costs at least its API request and its read.
    assert fixed["probes"] > probes_a_month / 1e6 * (cost.HTTP_API_PER_M + cost.DDB_RRU_PER_M)
    assert fixed["second region"] == pytest.approx(17 * 0.10 + 3.00 + 2 * 0.40)


def test_a_figure_that_moves_with_the_machine_is_judged_on_its_median_with_its_range():
    assert spread([1.4, 1.6, 1.5]) == "1.50x (runs 1.40-1.60x, n=3)"
