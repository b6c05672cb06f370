"""``make load``'s generator and outcome check, on a short run against the local stack."""

from __future__ import annotations

import json
import time
from collections import Counter

from devstack.load import Origin, Tally, check, plan, send, settle
from devstack.stack import DevStack

# Bounds on waiting, not expectations of speed: give up after this long without progress.
SETTLE_SECONDS = 120.0


def test_the_plan_mixes_sumes_traffic_at_the_rate_asked() -> None:
    shots = plan(rate=30, seconds=1)
    kinds = Counter(shot.kind for shot in shots)
    assert set(kinds) == {"new", "retry", "twin", "redeliver", "forged"}
    # A twin is two requests at once: 30 requests in all, a thirtieth of a second apart.
    assert sum(2 if s.kind == "twin" else 1 for s in shots) == 30
    assert [s.at for s in shots] == sorted(s.at for s in shots)
    assert shots[-1].at < 1
    new = {s.job_id for s in shots if s.kind in ("new", "twin")}
    assert all(s.job_id in new for s in shots if s.kind in ("retry", "redeliver"))
    assert not new & {s.job_id for s in shots if s.kind == "forged"}


def test_a_short_load_meets_the_outcome_and_the_check_catches_a_second_announcement(
    stack: DevStack,
) -> None:
    with Origin() as origin:
        tally = send(stack.url, stack.signing_secret, origin.url, rate=20, seconds=1)
        assert settle(stack, tally, SETTLE_SECONDS)
        assert tally.sent >= 20
        assert tally.answers[401] == len(tally.forged) > 0
        assert set(tally.accepted) == set(tally.jobs)
        assert check(stack, origin, tally) == []

        # The same announcement put on the bus again: one job announced twice.
        job = tally.jobs[0]
        (first,) = [a for a in stack.announcements if a["detail"]["job_id"] == job]
        assert stack.names is not None
        stack.client("events").put_events(
            Entries=[
                {
                    "Source": first["source"],
                    "DetailType": first["detail-type"],
                    "Detail": json.dumps(first["detail"]),
                    "EventBusName": stack.names.event_bus,
                }
            ]
        )
        deadline = time.monotonic() + SETTLE_SECONDS
        while stack.announced()[job] < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert check(stack, origin, tally) == [f"{job}: announced 2 times, not once"]


def test_the_check_names_a_lost_job_and_a_stored_forgery(stack: DevStack) -> None:
    """Jobs the stack never saw: acknowledged yet without an item, and a forged id stored."""
    with Origin() as origin:
        tally = Tally(jobs=["load-never-sent"], accepted=Counter({"load-never-sent": 1}))
        assert check(stack, origin, tally) == ["load-never-sent: acknowledged but no item (lost)"]
        tally = Tally(gave_up=["load-refused"], jobs=["load-refused"])
        assert check(stack, origin, tally) == ["load-refused: Sume gave up after 10 attempts"]
