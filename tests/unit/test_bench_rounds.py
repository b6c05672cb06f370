"""The bench measures a poller round only when its runs worked every shard assigned."""

import pytest

from bench.stack import check_worked
from sume.polling.poller import RunSummary

WORKED = RunSummary(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, True, shards=(0, 1))


def test_a_round_whose_runs_won_every_shard_is_measured():
    check_worked([{"runs": [WORKED.as_dict()]}, {"batchItemFailures": []}])


def test_a_refused_assignment_is_no_shard_taken():
    check_worked([{"runs": [{"refused": "invalid_assignment"}]}])


def test_a_run_refused_a_shard_stops_the_measurement():
    refused = RunSummary(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, True, shards=(0,), taken=(1,))
    with pytest.raises(RuntimeError, match=r"shards \[1\] were held by another run"):
        check_worked([{"runs": [WORKED.as_dict()]}, {"runs": [refused.as_dict()]}])
