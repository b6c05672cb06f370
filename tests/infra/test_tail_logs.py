"""What ``sume-webhooks tail`` finds on a stage: the log groups its functions log to."""

from __future__ import annotations

from sume_cli.commands.tail import FUNCTION_LOGS
from tests.infra.conftest import Stage

FUNCTIONS = ("Receiver", "Worker", "Poller")


def test_the_log_groups_tail_reads_are_the_three_functions_ones(dev: Stage, prod: Stage) -> None:
    for stage in (dev, prod):
        found = {
            logical
            for logical in stage.of_type("AWS::Logs::LogGroup")
            if logical.startswith(FUNCTION_LOGS)
        }
        logged_to = {stage.function(name)["LoggingConfig"]["LogGroup"]["Ref"] for name in FUNCTIONS}
        assert found == logged_to
