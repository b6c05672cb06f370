"""The poller capacity harness in miniature: real runs, counted calls, no timing asserted."""

import subprocess
import sys

import pytest

from bench import capacity


def test_a_run_that_prints_nothing_is_an_error_that_says_why_not_an_index_error():
    # The bench once died of an IndexError when a poller run's process printed nothing.
    crash = "import sys; print('boom: the moto server went away', file=sys.stderr); sys.exit(3)"
    process = subprocess.Popen(
        [sys.executable, "-c", crash], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with pytest.raises(RuntimeError, match="ended with code 3 and no result") as error:
        capacity._finish(process, timeout=30)
    assert "boom: the moto server went away" in str(error.value)


def test_a_round_in_parallel_processes_polls_each_due_job_once_and_counts_its_calls(moto_server):
    # Two processes of 8 shards share the round as 16 of 1 do in the bench; the
    # moto they call is this process's (the bench gives moto a process of its own).
    # A window no run reaches: each run ends when its shards are drained, however slow
    # the machine (a 10 s one polled 23 of 40 beside two busy loops). Every seeded job
    # (40 ids fall in all 16 shards) is due and polled once.
    row = capacity.measure_row(moto_server, runs=2, due=40, window=3600.0, delay=0.0)
    assert row.polled == 40
    assert row.shards == list(range(16))
    # Each shard claimed and released once; an update per poll, a page per shard.
    assert row.calls["dynamodb.PutItem"] == 16
    assert row.calls["dynamodb.UpdateItem"] == 40 + 16
    assert row.calls["dynamodb.Query"] == 16
    assert row.lease_calls == 32
    assert set(row.calls) == {"dynamodb.PutItem", "dynamodb.Query", "dynamodb.UpdateItem"}
