"""The bench reads the schedule's default from ``infra/config.py``'s source (no CDK import)."""

from bench import capacity
from infra.config import DEFAULTS


def test_bench_sees_the_deployed_poll_rate():
    assert capacity.poll_rate_minutes() == DEFAULTS["poll_rate_minutes"]
