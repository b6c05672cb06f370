"""Whether this region's worker is paused: while it is, the sweep holds owed work.

A paused worker (``sume-webhooks pause worker``: its SQS event source mapping
disabled) leaves its jobs owed, their messages waiting in the queue. Swept,
each would get one more message a round for as long as the pause lasts, and
``resume`` would find many messages a job. So the sweeper asks the mapping, at
most once a run and only when it has owed work to sweep, and holds that work
while the mapping is off: the jobs stay due, and the first round after
``resume`` sweeps what the queue no longer holds. In two regions the pause
turns both regions' mappings (docs/regions.md), so neither region's sweeper
moves the other's owed work to a worker that runs.

A mapping that cannot be read (no permission, throttled, gone) holds nothing:
the sweep is the safety net of lost messages, and a duplicate message costs a
claim that finds the job taken, a held one a job never worked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sume.core.observability import logger

# A mapping in these states reads nothing, or soon will (as the CLI's pause reads them).
MAPPING_OFF = frozenset({"Disabled", "Disabling"})


class WorkerSwitch:
    """The worker's event source mapping, asked once: ``paused()``."""

    def __init__(self, client: Callable[[], Any], uuid: str) -> None:
        self._client = client
        self._uuid = uuid

    def paused(self) -> bool:
        try:
            state = self._client().get_event_source_mapping(UUID=self._uuid).get("State")
        except (ClientError, BotoCoreError) as exc:
            logger.warning(
                "could not read the worker's event source mapping: sweeping as usual",
                mapping=self._uuid,
                error=str(exc),
            )
            return False
        return state in MAPPING_OFF


def never_paused() -> bool:
    """A stack that names no worker mapping: nothing is held."""
    return False
