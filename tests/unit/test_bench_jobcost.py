"""The per-job cost's pieces: pricing, the floor's steps, the cold start's interval, by hand."""

import json
from collections import Counter

import pytest

import bench.__main__ as bench_main
from bench import cold, cost, jobs, stack
from bench.harness import Context, Targets
from bench.stack import KEYS_ONLY, PathRun, Usage
from infra import spec
from sume.core.names import DUE_INDEX


def test_each_line_of_a_bill_is_its_count_times_its_price():
    usage = Usage(
        api=1,
        requests=Counter({"receiver": 1, "worker": 1}),
        billed_ms=Counter({"worker": 1000}),
        wru=3,
        # Only the deployed indexes are priced: the keys-only variant is the floor's.
        index_units=Counter({("worker", DUE_INDEX): 2, ("worker", DUE_INDEX + KEYS_ONLY): 5}),
        rru=4,
        calls=Counter(
            {
                "sqs.SendMessage": 1,
                "sqs.ReceiveMessage": 1,
                "events.PutEvents": 1,
                "s3.PutObject": 2,
                "s3.GetObject": 1,
                "secretsmanager.GetSecretValue": 1,
                "dynamodb.UpdateItem": 3,
            }
        ),
    )
    lines = jobs.lines(usage)
    assert lines["API"] == 1.00
    assert lines["Lambda requests"] == pytest.approx(0.40)
    # One second at the worker's 1024 MB: one GB-second a job.
    assert lines["Lambda duration"] == pytest.approx(cost.LAMBDA_GB_SECOND * 1e6)
    assert lines["DynamoDB writes"] == pytest.approx(3 * 0.625)
    assert lines["index writes"] == pytest.approx(2 * 0.625)
    assert lines["DynamoDB reads"] == pytest.approx(4 * 0.125)
    assert lines["SQS"] == pytest.approx(2 * 0.40)
    assert lines["EventBridge"] == 1.00
    assert lines["S3"] == pytest.approx(2 * 5.00 + 0.40)
    assert lines["Secrets Manager"] == pytest.approx(5.00)


def test_billed_ms_scales_cpu_to_the_memory_s_share_and_adds_each_wait():
    # 10 ms CPU at 512 MB is 10 x 1769 / 512 = 34.6 ms, plus DynamoDB 5, SQS 8, one Sume request.
    assert stack.billed_ms("receiver", 10.0, ["dynamodb.UpdateItem", "sqs.SendMessage"], 1) == 148


def writes(steps):
    return sum(1 for s in steps if s.call.startswith("dynamodb."))


def test_the_floor_of_a_worker_run_writes_a_progress_between_copies_only():
    assert [writes(jobs.work(n)) for n in (0, 2, 3)] == [3, 4, 5]
    calls = Counter(s.call for s in jobs.work(2, large=True))
    assert calls["s3.PutObject"] == 2 and calls["s3.GetObject"] == 1
    assert list(jobs.FLOORS) == list(stack.PATHS)
    lost = jobs.FLOORS["registered, never found: lost"]
    assert not [s for s in lost if s.call == "sqs.SendMessage"]


def test_the_floor_prices_its_writes_at_ours_mean_write_and_a_hand_off_at_its_requests():
    keys_only = ("worker", DUE_INDEX + KEYS_ONLY)
    usage = Usage(api=1, wru=10, writes=5, index_units=Counter({keys_only: 2}))
    usage.cpu_us.update({"receiver": 1000, "worker": 2000})
    floor = jobs.floor(PathRun("webhook, 0 artifacts", usage=usage))
    # Four floor writes at ours' 2 units a write; one hand-off: its send, the event
    # source's receive and delete, one worker request.
    assert floor.wru == 8
    assert floor.requests == Counter({"receiver": 1, "worker": 1})
    assert floor.calls["sqs.SendMessage"] == 1 and floor.calls["sqs.ReceiveMessage"] == 1
    assert floor.calls["sqs.DeleteMessageBatch"] == 1
    # Ours' index images as a keys-only index takes them, priced as the deployed index.
    assert jobs.lines(floor)["index writes"] == pytest.approx(2 * 0.625)
    # The receiver's 1 ms CPU at 512 MB (3.5 ms), its write (5) and its send (8).
    assert floor.billed_ms["receiver"] == 17


def test_a_write_is_a_write_whatever_its_verb_when_ours_is_set_beside_the_floor():
    calls = Counter({"dynamodb.PutItem": 1, "dynamodb.UpdateItem": 2, "sqs.SendMessage": 1})
    assert jobs.as_writes(calls) == Counter({"dynamodb.write": 3, "sqs.SendMessage": 1})


def test_a_job_found_by_a_poll_pays_its_round_less_an_empty_round():
    empty = Usage(wru=32, rru=16.0, writes=32, requests=Counter({"poller": 17}))
    empty.calls.update({"dynamodb.Query": 16})
    empty.cpu_us.update({"poller": 20_000})
    run = Usage(wru=35, rru=16.0, writes=34, requests=Counter({"poller": 17, "worker": 1}))
    run.calls.update({"dynamodb.Query": 16, "dynamodb.UpdateItem": 2})
    run.cpu_us.update({"poller": 25_000, "worker": 50_000})
    own = run.less(empty)
    assert own.requests == Counter({"worker": 1})
    assert own.calls == Counter({"dynamodb.UpdateItem": 2})
    assert (own.wru, own.rru, own.writes) == (3, 0.0, 2)
    assert own.cpu_us == Counter({"poller": 5_000, "worker": 50_000})
    # Never below nothing: a round that cost less than the empty one is no refund.
    assert empty.less(run) == Usage()


def test_read_units_per_started_4_kb_and_half_when_eventually_consistent():
    assert cost.rru(5000, consistent=True) == 2
    assert cost.rru(5000, consistent=False) == 1.0
    assert cost.rru(0, consistent=False) == 0.5


def test_the_median_s_interval_narrows_as_pairs_come_in():
    low, high = cold.median_interval(list(range(100)))
    assert low < 50 < high
    assert (high - low) < 25
    assert cold.median_interval([5.0] * 30) == (5.0, 5.0)


def test_the_fixed_costs_list_the_receiver_s_cached_snapshot_at_its_memory():
    fixed = jobs.fixed_month(Usage())
    # 512 MB cached all month at the cache's GB-second price: about 1.95 USD.
    month = spec.RECEIVER_MEMORY_MB / 1024 * cost.MONTH_S * cost.SNAPSTART_CACHE_GB_SECOND
    assert spec.RECEIVER_SNAPSTART
    assert fixed["receiver's SnapStart snapshot, 1 version cached"] == pytest.approx(month)
    assert round(month, 2) == 1.95


def test_the_fixed_costs_count_what_the_synthesized_template_keeps(tmp_path, monkeypatch):
    kinds = ["AWS::CloudWatch::Alarm"] * 3 + ["AWS::Lambda::EventSourceMapping"] * 2
    kinds += ["AWS::CloudWatch::Dashboard", "AWS::SecretsManager::Secret", "AWS::SQS::Queue"]
    template = tmp_path / "template.json"
    template.write_text(
        json.dumps({"Resources": {f"R{n}": {"Type": k} for n, k in enumerate(kinds)}})
    )
    monkeypatch.setattr(jobs, "TEMPLATE", template)
    fixed = jobs.fixed_month(Usage())
    assert fixed["3 alarms"] == pytest.approx(0.30)
    assert fixed["1 dashboard"] == 3.00 and fixed["1 secrets"] == 0.40
    # Two event sources, five pollers each asking every 20 s for a 30-day month.
    receives = 2 * 5 * 3 * 60 * 24 * 30
    assert fixed["2 SQS event sources' empty receives (modelled)"] == pytest.approx(
        receives * 0.40 / 1e6
    )


def _cold_report() -> cold.ColdReport:
    pairs = cold.PAIRS
    report = cold.ColdReport(
        gap=cold.Gap([300.0] * pairs, [360.0] * pairs),
        restored=cold.Gap([140.0] * pairs, [141.0] * pairs),
    )
    report.cpu_ms = {cold.FLOOR: [300.0], cold.RECEIVER_FIRST_USE: [360.0]}
    report.wall_ms = {name: list(v) for name, v in report.cpu_ms.items()}
    report.tracer_off_ms = {cold.RECEIVER_FIRST_USE: [335.0]}
    return report


@pytest.mark.parametrize("snapstart", [True, False])
def test_the_cold_start_target_judges_what_is_deployed_and_prints_the_full_init(
    monkeypatch, capsys, snapstart
):
    monkeypatch.setattr(cold, "RECEIVER_SNAPSTART", snapstart)
    targets = Targets([])
    cold.render(_cold_report(), targets)
    printed = capsys.readouterr().out
    ((target, measured, met),) = targets.rows
    # Both pairs are printed whichever is judged.
    assert "Full init" in printed and "As SnapStart restores it" in printed
    if snapstart:
        assert "as deployed: restored by SnapStart" in target
        assert measured.startswith("+1 ms CPU restored") and "full init +60 ms CPU" in measured
        assert met is True
    else:
        assert "(import + first use)" in target
        assert measured.startswith("+60 ms CPU")
        assert met is False


def test_a_section_that_stops_is_a_missed_target_and_the_others_still_run(monkeypatch, capsys):
    def broken(ctx: Context) -> None:
        raise IndexError("list index out of range")

    ran = []
    sections = {
        "calls": ("1. first", broken),
        "cpu": ("2. second", lambda ctx: ran.append("cpu")),
    }
    monkeypatch.setattr(bench_main, "SECTIONS", sections)
    assert bench_main.main(["--only", "calls,cpu"]) == 1
    out, err = capsys.readouterr()
    assert ran == ["cpu"]
    assert (
        "| section calls runs to its end | IndexError('list index out of range') | **MISSED** |"
        in out
    )
    # A progress line names each section as it starts.
    assert "1. first" in err and "2. second" in err


def test_a_section_that_prices_another_s_figures_brings_them_along():
    parser = bench_main.parser()
    assert bench_main.chosen(parser, "cost", "") == ["calls", "cpu", "cost"]
    assert bench_main.chosen(parser, "", "cost,artifacts,poller") == [
        "calls",
        "cpu",
        "cold",
        "throughput",
        "indexes",
        "jobs",
        "idle",
    ]
