"""The poller keeps every poll thread busy across pages: the next page is read while
the last polls of the one before are still running, and the run still waits for them."""

import threading
from typing import Any

from sume.polling.poller import Poller
from sume.polling.settings import PollPolicy
from sume.polling.status import StatusResult, Verdict
from sume.store.job import Job, State

NOW = 1_700_000_000


class Jobs:
    """One shard of awaiting items, handed out ``page_size`` at a time."""

    def __init__(self, count: int) -> None:
        self.items = [
            Job(job_id=f"job_{n:03d}", state=State.AWAITING, status_url="u") for n in range(count)
        ]
        self.rescheduled: list[str] = []
        self._lock = threading.Lock()

    def due(
        self, shard: int, now: int, limit: int, start: dict[str, Any] | None = None
    ) -> tuple[list[Job], dict[str, Any] | None]:
        offset = int(start["offset"]) if start else 0
        page = self.items[offset : offset + limit]
        more = offset + limit < len(self.items)
        return page, ({"offset": offset + limit} if more else None)

    def reschedule_poll(self, job_id: str, now: int, next_poll_at: int, error: Any = None) -> bool:
        with self._lock:
            self.rescheduled.append(job_id)
        return True


class SlowStatus:
    """A Sume slower than the poller's paging, on any machine: every answer waits until
    ``parallel`` polls have run at once. A poller that waits for each page before the
    next never gets there: its polls answer after ``patience`` seconds, and ``most``
    says how many ran at once."""

    def __init__(self, parallel: int, patience: float = 10.0) -> None:
        self.parallel = parallel
        self.patience = patience
        self.running = self.most = 0
        self._changed = threading.Condition()

    def __call__(self, job_id: str, url: str, deadline: float) -> StatusResult:
        with self._changed:
            self.running += 1
            self.most = max(self.most, self.running)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self.most >= self.parallel, self.patience)
            self.running -= 1
        return StatusResult(Verdict.PENDING, "running")


def test_polls_of_the_next_page_start_while_the_last_page_ends():
    jobs = Jobs(12)
    status = SlowStatus(parallel=4)
    policy = PollPolicy(
        initial_seconds=900,
        max_interval_seconds=21600,
        max_age_seconds=7 * 86400,
        sweep_after_seconds=120,
        poll_timeout_seconds=5,
        page_size=3,
    )
    poller = Poller(
        jobs,  # type: ignore[arg-type]
        intake=None,  # type: ignore[arg-type]
        queue=None,  # type: ignore[arg-type]
        announcer=None,  # type: ignore[arg-type]
        check_status=status,
        policy=policy,
        max_parallel_polls=4,
    )

    summary = poller.run(lambda: 60.0, NOW, [0])

    # Pages of 3 and 4 threads: waiting for each page would leave one idle.
    assert status.most == 4
    assert (summary.polled, summary.rescheduled, summary.remaining) == (12, 12, 0)
    assert summary.complete
    assert sorted(jobs.rescheduled) == [job.job_id for job in jobs.items]
