"""Make moto's EventBridge replay what AWS replays, and a disabled rule deliver nothing.

``sume-webhooks announcements replay`` rests on three things AWS does and moto
(5.2) does not:

- a replay sends only the archived events whose time lies in its window
  (``EventStartTime`` to ``EventEndTime``); moto replays the whole archive;
- a replay with ``Destination.FilterArns`` reaches only those rules; moto sends
  every replayed event to every rule of the bus, so all subscribers would get
  copies an integrator asked for one;
- a disabled rule sends nothing; moto's rules deliver whatever their state,
  so a subscriber switched off for a window would miss nothing here.

The backends are patched (not botocore), so this holds for in-process
``mock_aws`` and moto's threaded server alike. Installed by
``devstack.moto_limits.install``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

_installed = False


def _epoch(value: Any) -> float:
    """An event's or a replay's time: moto keeps epoch numbers or ISO strings."""
    if isinstance(value, int | float):
        return float(value)
    text = str(value)
    try:
        return float(text)
    except ValueError:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def install() -> None:
    global _installed  # noqa: PLW0603 - the patch is process-wide, like moto's backends
    if _installed:
        return
    from moto.events import models

    deliver = models.Rule.send_to_targets

    def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
        if self.state == "DISABLED":
            return
        deliver(self, original_event, transform_input)

    def replay_events(self: Any, archive: Any) -> None:
        start, end = _epoch(self.event_start_time), _epoch(self.event_end_time)
        bus_name = self.destination["Arn"].split("/")[-1]
        only = set(self.destination.get("FilterArns") or [])
        backend = models.events_backends[self.account_id][self.region]
        rules = [
            rule
            for rule in backend.describe_event_bus(bus_name).rules.values()
            if not only or rule.arn in only
        ]
        for event in archive.events:
            # AWS: "only events that occurred between EventStartTime and EventEndTime".
            if not start <= _epoch(event["time"]) < end:
                continue
            # As AWS: the same event under a new id, marked with the replay's name
            # (moto's own ``ingestion-time`` is no field of an event AWS delivers).
            copy: Any = {k: v for k, v in event.items() if k != "ingestion-time"}
            copy.update(id=str(models.random.uuid4()), **{"replay-name": self.name})
            for rule in rules:
                rule.send_to_targets(copy, transform_input=False)
        self.state = models.ReplayState.COMPLETED
        self.end_time = models.unix_time()

    models.Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]
    models.Replay.replay_events = replay_events  # type: ignore[method-assign]
    _installed = True
