from typing import Any

from sume.polling.settings import PollPolicy


def policy(**overrides):
    values: dict[str, Any] = {
        "initial_seconds": 900,
        "max_interval_seconds": 6 * 3600,
        "max_age_seconds": 7 * 24 * 3600,
        "sweep_after_seconds": 120,
        "poll_timeout_seconds": 15.0,
    }
    values.update(overrides)
    return PollPolicy(**values)


def test_poll_delays_double_from_the_initial_delay_up_to_the_cap():
    delays = [policy().poll_delay(n) for n in range(8)]
    assert delays == [900, 1800, 3600, 7200, 14400, 21600, 21600, 21600]


def test_sweep_delays_double_from_the_sweep_deadline_up_to_the_cap():
    delays = [policy(max_interval_seconds=1000).sweep_delay(n) for n in range(5)]
    assert delays == [120, 240, 480, 960, 1000]


def test_a_very_old_item_gets_the_cap_not_a_huge_number():
    assert policy().poll_delay(10_000) == 6 * 3600
    assert policy().sweep_delay(10_000) == 6 * 3600
