"""The price model of a large event's second copy and of the MRSC table's expiry."""

import pytest

from bench import cost


def test_a_second_copy_of_a_mib_costs_its_put_transfer_storage_and_wait() -> None:
    copy = cost.second_copy(1024 * 1024)
    # A million MiB is 976.6 GiB: $0.02 each across regions, $0.023 a month for 3 months.
    assert copy["2nd PUT"] == 5.00
    assert copy["transfer"] == pytest.approx(976.5625 * 0.02)
    assert copy["storage (90 days)"] == pytest.approx(976.5625 * 0.023 * 3)
    # 60 ms more of a 512 MB receiver, a million times.
    assert copy["receiver's wait"] == pytest.approx(0.5 * 0.06 * 1_000_000 * 0.0000133334)
    parts = ("2nd PUT", "transfer", "storage (90 days)", "receiver's wait")
    assert copy["**total**"] == pytest.approx(sum(copy[k] for k in parts))
    assert copy["**total**"] < copy["S3 replication + RTC instead"]


def test_the_expiry_pays_a_delete_in_both_replicas_and_a_cheap_read() -> None:
    expiry = cost.expiry(1536)
    assert expiry["delete (both replicas)"] == pytest.approx(2 * 2 * 0.625)
    assert expiry["read (BatchGetItem)"] == pytest.approx(0.5 * 0.125)
    assert expiry["**total**"] == pytest.approx(2.5625)
